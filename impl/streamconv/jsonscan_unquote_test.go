package streamconv

import (
	"bytes"
	"encoding/json"
	"testing"
)

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
