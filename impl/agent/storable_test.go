package agent

import (
	"encoding/json"
	"testing"
)

func TestStorableJSONDropsOnlyTheNULEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":"x"}`, `{"a":"x"}`},
		{`{"title":"a\u0000b"}`, `{"title":"ab"}`},
		{`{"a\u0000":"\u0000\u0000"}`, `{"a":""}`},
		// An escaped backslash followed by the letters u0000 is text, not U+0000.
		{`{"a":"\\u0000"}`, `{"a":"\\u0000"}`},
		{`{"a":"\\\u0000"}`, `{"a":"\\"}`},
		{`{"a":"\"\u0000\""}`, `{"a":"\"\""}`},
		{`{"a":"\u00001"}`, `{"a":"1"}`},
	} {
		got := string(storableJSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("storableJSON(%s) = %s, want %s", c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("storableJSON(%s) = %s: not JSON", c.in, got)
		}
	}
	// What encoding/json writes for a string holding U+0000 comes back without it.
	b, _ := json.Marshal(map[string]any{"text": "a\x00b", "n": 1})
	var back map[string]any
	if err := json.Unmarshal(storableJSON(b), &back); err != nil || back["text"] != "ab" {
		t.Errorf("round trip: %v, %v", back, err)
	}
}
