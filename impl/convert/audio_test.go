package convert

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestAudioRefusal: a request that carries audio or asks for it is refused naming the field, in
// chat and Responses; a request without audio is not, even when its bytes mention audio (a tool's
// parameter named audio, text about audio, modalities of text only); Messages has no audio.
func TestAudioRefusal(t *testing.T) {
	part := `{"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}}`
	for _, tc := range []struct {
		f     llm.Format
		body  string
		param string // "" when the request is not refused
	}{
		{llm.FormatChat, `{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":[` + part + `]}]}`, "modalities"},
		{llm.FormatChat, `{"model":"m","modalities":["audio"],"messages":[{"role":"user","content":"hi"}]}`, "modalities"},
		{llm.FormatChat, `{"model":"m","audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":"hi"}]}`, "audio"},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"x"},` + part + `]}]}`, "messages[1].content[1]"},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0]"},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"assistant","audio":{"id":"audio_1"}}]}`, "messages[0].audio"},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"input_\u0061udio","input_\u0061udio":{}}]}]}`, "messages[0].content[0]"},
		{llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x"},` + part + `]}]}`, "input[0].content[1]"},
		{llm.FormatResponses, `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[` + part + `]}]}`, "input[0].output[0]"},

		{llm.FormatChat, `{"model":"m","modalities":["text"],"audio":null,"messages":[{"role":"assistant","content":"ok","audio":null},{"role":"user","content":"Tell me about audio codecs."}],"tools":[{"type":"function","function":{"name":"play","parameters":{"type":"object","properties":{"audio":{"type":"string"}}}}}]}`, ""},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"What is \"input_audio\"?"}]}`, ""},
		{llm.FormatResponses, `{"model":"m","input":"What is input_audio?","tools":[{"type":"function","name":"f","parameters":{"properties":{"input_audio":{}}}}]}`, ""},
		{llm.FormatMessages, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, ""},
	} {
		v, err := ReadRequest([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		err = AudioRefusal(tc.f, v)
		if tc.param == "" {
			if err != nil {
				t.Errorf("%s %s: refused: %v", tc.f, tc.body, err)
			}
			continue
		}
		e, ok := err.(*apierror.Error)
		if !ok || e.Kind != apierror.KindInvalidRequest || e.Param != tc.param || !strings.Contains(e.Message, "audio is not metered by this gateway") {
			t.Errorf("%s %s: %#v, want a 400 naming %s", tc.f, tc.body, err, tc.param)
		}
	}
}

// TestResponseUsageReadsAudioTokens: a chat answer's audio token counts are read, by the
// usage-only reader and the full decoder alike.
func TestResponseUsageReadsAudioTokens(t *testing.T) {
	body := []byte(`{"id":"c","object":"chat.completion","model":"gpt-4o-audio-preview","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":600,"total_tokens":1800,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":1000,"text_tokens":200},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":500,"text_tokens":100}}}`)
	u, err := ResponseUsage(llm.FormatChat, body)
	if err != nil || u.AudioInputTokens != 1000 || u.AudioOutputTokens != 500 || u.InputTokens != 1200 || u.OutputTokens != 600 {
		t.Errorf("ResponseUsage: %+v (%v)", u, err)
	}
	full, err := DecodeResponse(llm.FormatChat, body)
	if err != nil || full.Usage != u {
		t.Errorf("DecodeResponse: %+v (%v), ResponseUsage %+v", full.Usage, err, u)
	}
}
