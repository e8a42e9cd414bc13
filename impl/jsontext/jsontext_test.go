package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkEscape asserts that appendString produces valid JSON that decodes to what encoding/json
// makes of the same string (which replaces invalid UTF-8 with U+FFFD).
func checkEscape(t *testing.T, s string) {
	t.Helper()
	got := AppendString(nil, s)
	if !json.Valid(got) {
		t.Fatalf("invalid JSON for %q: %s", s, got)
	}
	if bytes.ContainsAny(got, "\n\r") {
		t.Fatalf("raw line break in %s", got)
	}
	var back, want string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	std, _ := json.Marshal(s)
	if err := json.Unmarshal(std, &want); err != nil {
		t.Fatal(err)
	}
	if back != want {
		t.Fatalf("%q round-trips to %q, encoding/json to %q", s, back, want)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `"quoted" \ back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "<>&", "ünïcödé 🎉",
		"\u2028\u2029", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate", "end\xe2\x82",
	} {
		checkEscape(t, s)
	}
	// Escaping pieces and joining them equals escaping the whole (the Responses encoder keeps
	// escaped text).
	a, b := "x\"y\n", "ü🎉\u2028"
	if got, want := AppendEscaped(AppendEscaped(nil, a), b), AppendEscaped(nil, a+b); !bytes.Equal(got, want) {
		t.Fatalf("%s != %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "🎉\u2028", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkEscape(t, s) })
}
