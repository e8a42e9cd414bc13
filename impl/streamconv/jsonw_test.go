package streamconv

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkEscape asserts that appendString produces valid JSON that decodes to what encoding/json
// makes of the same string (which replaces invalid UTF-8 with U+FFFD).
func checkEscape(t *testing.T, s string) {
	t.Helper()
	got := appendString(nil, s)
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
	if got, want := appendEscaped(appendEscaped(nil, a), b), appendEscaped(nil, a+b); !bytes.Equal(got, want) {
		t.Fatalf("%s != %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "🎉\u2028", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkEscape(t, s) })
}

// checkUnquote asserts that stringOf agrees with encoding/json on a string token.
func checkUnquote(t *testing.T, tok []byte) {
	t.Helper()
	var want string
	wantErr := json.Unmarshal(tok, &want)
	tok = bytes.Trim(tok, " \t\r\n") // JSON whitespace around a token
	got, ok := stringOf(tok)
	if wantErr != nil {
		// Not a valid string token: stringOf must not claim it is one, unless encoding/json
		// failed for another reason than the string (it cannot: tok is the whole input).
		if ok && json.Valid(tok) {
			t.Fatalf("%q: stringOf accepted what encoding/json rejects", tok)
		}
		return
	}
	if len(tok) == 0 || tok[0] != '"' {
		return
	}
	if !ok || got != want {
		t.Fatalf("%q: stringOf %q %v, encoding/json %q", tok, got, ok, want)
	}
}

func TestStringOf(t *testing.T) {
	for _, tok := range []string{
		`""`, `"plain"`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83c\udf89"`,
		`"\ud83c"`, `"\ud83cx"`, `"\udf89\ud83c"`, `"\ud83c\u0041"`, `"\u12"`, `"\x"`, "\"bad \xff\"",
		"\"tab\tin\"", `"\'"`, `"end\\"`, `"\u0000"`,
	} {
		checkUnquote(t, []byte(tok))
	}
}

func FuzzStringOf(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83c\udf89"`, `"\u00e9"`, "\"\xff\"", `"\ud800\udc00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) { checkUnquote(t, tok) })
}
