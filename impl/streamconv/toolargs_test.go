package streamconv

import "testing"

// TestArgumentsShape: arguments are whole when the object or array that begins them has
// closed, whatever the pieces; brackets and quotes inside strings do not count, nor does an
// escaped quote end a string; anything else is never whole.
func TestArgumentsShape(t *testing.T) {
	for _, c := range []struct {
		pieces []string
		whole  bool
	}{
		{[]string{`{}`}, true},
		{[]string{` {"a":1}`, "\n"}, true},
		{[]string{`{"a":`, `[1,{"b":2}]`, `}`}, true},
		{[]string{`[1,2]`}, true},
		{[]string{`{"a":"}"`}, false},
		{[]string{`{"a":"x\"}`, `"`}, false},
		{[]string{`{"a":"x\"}`, `"}`}, true},
		{[]string{`{"a":"x\\`, `"}`}, true},
		{[]string{`{"a":"\\\"}"}`}, true},
		{[]string{`{"a":1`}, false},
		{nil, false},
		{[]string{""}, false},
		{[]string{`"{}"`}, false},
		{[]string{`1`}, false},
		{[]string{`{}`, `{}`}, false},
		{[]string{`{}`, `x`}, false},
	} {
		var s argumentsShape
		for _, p := range c.pieces {
			s.feed(p)
		}
		if s.whole() != c.whole {
			t.Errorf("%q: whole %v, want %v", c.pieces, s.whole(), c.whole)
		}
	}
}
