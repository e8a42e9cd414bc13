package convert

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// formats are the three wire formats, with the short names used in fixture file names.
var formats = []struct {
	f    llm.Format
	name string
}{
	{llm.FormatChat, "chat"},
	{llm.FormatResponses, "responses"},
	{llm.FormatMessages, "messages"},
}

func fixture(t testing.TB, path ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/golden/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// pretty indents JSON (without re-escaping anything) and ends it with a newline.
func pretty(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustDecode(t *testing.T, f llm.Format, body []byte) *llm.Request {
	t.Helper()
	req, err := DecodeRequest(f, body)
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", f, err)
	}
	return req
}

// invalid asserts that err is a 400 *apierror.Error naming param.
func invalid(t *testing.T, err error, param string) *apierror.Error {
	t.Helper()
	var ae *apierror.Error
	if err == nil {
		t.Fatalf("want a 400 naming %q, got no error", param)
	}
	ae, ok := err.(*apierror.Error)
	if !ok || ae.Kind != apierror.KindInvalidRequest {
		t.Fatalf("want a 400 naming %q, got %T %v", param, err, err)
	}
	if ae.Param != param {
		t.Fatalf("want a 400 naming %q, got param %q: %s", param, ae.Param, ae.Message)
	}
	return ae
}

// topKey is the top-level field of a wire path ("text.format" -> "text").
func topKey(param string) string {
	if i := strings.IndexAny(param, ".["); i >= 0 {
		return param[:i]
	}
	return param
}

// withoutKey returns body without the top-level field key.
func withoutKey(t *testing.T, body []byte, key string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, key)
	out, err := marshal(rawObject(m))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rawObject(m map[string]json.RawMessage) object {
	var o object
	for _, k := range sortedKeys(m) {
		o.set(k, m[k])
	}
	return o
}

// topLevel splits a JSON object into its members.
func topLevel(t *testing.T, body []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	return m
}

// sameJSON reports whether two JSON texts denote the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v in %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
