package sim

import (
	"encoding/json"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// fragmenter writes compact JSON text and records where it splits into output tokens. A token
// starts at every scalar (an object key, a string, number, boolean or null) after the first,
// and at every word after the first of a generated sentence, so punctuation travels with the
// scalar before it: {"a":1,"b":[true,"x y"]} is the tokens {"a": 1, "b":[ true, "x and y"]}.
type fragmenter struct {
	buf     []byte
	cuts    []int // offsets where a token starts, after the first
	scalars int   // tokens started so far
}

// mark is a position of a fragmenter to return to.
type mark struct{ buf, cuts, scalars int }

// mark returns the current position.
func (f *fragmenter) mark() mark { return mark{len(f.buf), len(f.cuts), f.scalars} }

// reset returns to position m, forgetting what was written after it.
func (f *fragmenter) reset(m mark) {
	f.buf, f.cuts, f.scalars = f.buf[:m.buf], f.cuts[:m.cuts], m.scalars
}

// since returns the bytes written after m.
func (f *fragmenter) since(m mark) []byte { return f.buf[m.buf:] }

// token starts a token at the current offset.
func (f *fragmenter) token() {
	if f.scalars > 0 && (len(f.cuts) == 0 || f.cuts[len(f.cuts)-1] != len(f.buf)) {
		f.cuts = append(f.cuts, len(f.buf))
	}
	f.scalars++
}

// raw appends punctuation that belongs to the current token.
func (f *fragmenter) raw(s string) { f.buf = append(f.buf, s...) }

// str appends a string scalar.
func (f *fragmenter) str(s string) {
	f.token()
	f.buf = appendString(f.buf, s)
}

// words appends a string scalar made of words separated by single spaces, one token a word.
func (f *fragmenter) words(ws []string) {
	f.token()
	f.buf = append(f.buf, '"')
	for i, w := range ws {
		if i > 0 {
			f.token()
			f.buf = append(f.buf, ' ')
		}
		f.buf = jsontext.AppendEscaped(f.buf, w)
	}
	f.buf = append(f.buf, '"')
}

// literal appends a number, true, false or null.
func (f *fragmenter) literal(s string) {
	f.token()
	f.buf = append(f.buf, s...)
}

// value appends a decoded JSON value (a const or enum member of a schema).
func (f *fragmenter) value(v any) {
	switch x := v.(type) {
	case *jsonObject:
		f.raw("{")
		for i, k := range x.keys {
			if i > 0 {
				f.raw(",")
			}
			f.str(k)
			f.raw(":")
			f.value(x.vals[k])
		}
		f.raw("}")
	case []any:
		f.raw("[")
		for i, e := range x {
			if i > 0 {
				f.raw(",")
			}
			f.value(e)
		}
		f.raw("]")
	case string:
		f.str(x)
	case json.Number:
		f.literal(string(x))
	case bool:
		if x {
			f.literal("true")
		} else {
			f.literal("false")
		}
	default:
		f.literal("null")
	}
}

// fragments returns the written text split into its tokens (one token when nothing was
// written).
func (f *fragmenter) fragments() []string {
	out := make([]string, 0, len(f.cuts)+1)
	start := 0
	for _, c := range f.cuts {
		out = append(out, string(f.buf[start:c]))
		start = c
	}
	return append(out, string(f.buf[start:]))
}
