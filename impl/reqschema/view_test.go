package reqschema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/impl/jsonview"
)

// TestViewAgreesWithParse: the view the validating pass reads (ValidateBodyView) is the one
// jsonview.Parse reads from the same bytes, member for member, with the \u escapes counted as
// bytes.Count counts them, for every body of the differential corpus that an operation accepts;
// a body it refuses leaves the view empty. The members also decode to what encoding/json
// decodes the body to.
func TestViewAgreesWithParse(t *testing.T) {
	bodies := corpus(t)
	checked := 0
	for _, s := range subjects(t) {
		if !s.op.HasBody() {
			continue
		}
		for _, body := range bodies {
			var v jsonview.View
			err := s.op.ValidateBodyView("application/json", body, &v)
			if err != nil {
				if v.Body() != nil || len(v.Members()) != 0 {
					t.Errorf("%s: %s refused (%v) but the view holds %d members", s.name, body, err, len(v.Members()))
				}
				continue
			}
			want, perr := jsonview.Parse(body)
			if perr != nil {
				if v.Body() != nil {
					t.Errorf("%s: %s is not an object, but the view holds it", s.name, body)
				}
				continue
			}
			checked++
			if !v.Valid() {
				t.Errorf("%s: %s: the validated view is not marked valid", s.name, body)
			}
			if !reflect.DeepEqual(v.Members(), want.Members()) {
				t.Errorf("%s: %s:\n validator %+v\n parse     %+v", s.name, body, v.Members(), want.Members())
			}
			if got, n := v.UnicodeEscapes(), bytes.Count(body, []byte(`\u`)); got != n && !bytes.Contains(body, []byte(`\\u`)) {
				t.Errorf("%s: %s: %d \\u escapes counted, bytes.Count says %d", s.name, body, got, n)
			}
			var decoded map[string]json.RawMessage
			if err := json.Unmarshal(body, &decoded); err != nil {
				t.Fatalf("%s: %s validated but encoding/json refuses it: %v", s.name, body, err)
			}
			var whole any
			_ = json.Unmarshal(body, &whole)
			if got, want := v.MayHoldAudio(), hasAudioKey(whole); got != want {
				t.Errorf("%s: %s: the pass noted an audio member name: %v, encoding/json finds one: %v", s.name, body, got, want)
			}
			for k, raw := range decoded {
				got, ok := v.Value(k)
				if !ok || !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(raw)) {
					t.Errorf("%s: %s: member %q is %s in the view, %s by encoding/json", s.name, body, k, got, raw)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d bodies were accepted: the corpus does not exercise the view", checked)
	}
}

// hasAudioKey reports whether a decoded JSON value has, at any depth, a member whose name
// jsonview.AudioKey names.
func hasAudioKey(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if jsonview.AudioKey([]byte(k)) || hasAudioKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasAudioKey(e) {
				return true
			}
		}
	}
	return false
}

// TestViewNotesAudioKeys: the validating pass notes a member named audio or input_audio at any
// depth, spelled with escapes too, and only then.
func TestViewNotesAudioKeys(t *testing.T) {
	for _, s := range subjects(t) {
		if s.op.Method != "POST" || s.op.Path != "/v1/chat/completions" {
			continue
		}
		for body, want := range map[string]bool{
			`{"model":"m","messages":[{"role":"user","content":"audio input_audio"}]}`:                                         false,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x"}}]}]}`:         true,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"x","input_\u0061udio":{}}]}]}`:                        true,
			`{"model":"m","messages":[{"role":"assistant","audio":{"id":"a"}}]}`:                                               true,
			`{"model":"m","audio":{"voice":"alloy"},"messages":[{"role":"user","content":"hi"}]}`:                              true,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"audios":{}}}]}`: false,
		} {
			var v jsonview.View
			if err := s.op.ValidateBodyView("application/json", []byte(body), &v); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if got := v.MayHoldAudio(); got != want {
				t.Errorf("%s: noted %v, want %v", body, got, want)
			}
		}
		return
	}
	t.Fatal("no chat completions operation among the subjects")
}
