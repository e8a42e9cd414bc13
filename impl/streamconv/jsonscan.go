package streamconv

import (
	"bytes"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// A minimal JSON scanner for the decoders' fast paths. Text deltas are most of a stream, and
// decoding each with encoding/json costs tens of times what encoding the client event does. The
// fast paths read only the common shape of a delta event with this scanner and hand anything
// else (other fields with values they do not expect, escaped keys, malformed input) to the
// encoding/json path, which stays the reference: fuzzing checks that both agree.

// disableFastPath turns the fast paths off; tests set it to compare both paths.
var disableFastPath = false

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the end (after the closing quote) of the string starting at d[i] == '"',
// and whether it has escapes; -1 when it is unterminated or holds a raw control character.
func scanString(d []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return -1, false
		}
	}
	return -1, false
}

// scanValue returns the end of the value starting at d[i], or -1. Objects and arrays are
// matched by nesting depth only; the fast paths never look inside the ones they skip.
func scanValue(d []byte, i int) int {
	if i >= len(d) {
		return -1
	}
	switch c := d[i]; {
	case c == '"':
		end, _ := scanString(d, i)
		return end
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				end, _ := scanString(d, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case c == 't':
		return literal(d, i, "true")
	case c == 'f':
		return literal(d, i, "false")
	case c == 'n':
		return literal(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(d) && (d[j] >= '0' && d[j] <= '9' || d[j] == '.' || d[j] == 'e' || d[j] == 'E' || d[j] == '+' || d[j] == '-') {
			j++
		}
		return j
	}
	return -1
}

func literal(d []byte, i int, lit string) int {
	if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// objIter iterates the members of an object.
type objIter struct {
	d     []byte
	i     int
	first bool
	bad   bool
	done  bool
}

// iterObject starts iterating the object at d[i:] (after whitespace).
func iterObject(d []byte) objIter {
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return objIter{bad: true, done: true}
	}
	return objIter{d: d, i: i + 1, first: true}
}

// next returns the next member's unescaped key and raw value; false at the end of the object or
// on a problem (then bad is set).
func (it *objIter) next() (key, val []byte, ok bool) {
	if it.done {
		return nil, nil, false
	}
	d := it.d
	i := skipWS(d, it.i)
	if i < len(d) && d[i] == '}' {
		it.i, it.done = i+1, true
		return nil, nil, false
	}
	if !it.first {
		if i >= len(d) || d[i] != ',' {
			return it.fail()
		}
		i = skipWS(d, i+1)
	}
	it.first = false
	if i >= len(d) || d[i] != '"' {
		return it.fail()
	}
	kend, esc := scanString(d, i)
	if kend < 0 || esc {
		return it.fail()
	}
	key = d[i+1 : kend-1]
	i = skipWS(d, kend)
	if i >= len(d) || d[i] != ':' {
		return it.fail()
	}
	i = skipWS(d, i+1)
	vend := scanValue(d, i)
	if vend < 0 {
		return it.fail()
	}
	it.i = vend
	return key, d[i:vend], true
}

func (it *objIter) fail() ([]byte, []byte, bool) {
	it.bad, it.done = true, true
	return nil, nil, false
}

// ok reports whether the object was read to its end with nothing but whitespace after it.
func (it *objIter) ok() bool {
	return !it.bad && it.done && skipWS(it.d, it.i) == len(it.d)
}

// member returns the raw value of the member name of the object d, or false when d is no
// object or has no such member (the first one counts).
func member(d []byte, name string) ([]byte, bool) {
	it := iterObject(d)
	for {
		key, val, ok := it.next()
		if !ok {
			return nil, false
		}
		if string(key) == name {
			return val, true
		}
	}
}

// soleElement returns the one element of an array, or false.
func soleElement(arr []byte) ([]byte, bool) {
	if len(arr) == 0 || arr[0] != '[' {
		return nil, false
	}
	i := skipWS(arr, 1)
	end := scanValue(arr, i)
	if end < 0 || skipWS(arr, end) != len(arr)-1 {
		return nil, false
	}
	return arr[i:end], true
}

// stringOf unquotes a JSON string token as encoding/json does (escapes, surrogate pairs,
// U+FFFD for invalid UTF-8 and lone surrogates); false when it is not a valid string token.
func stringOf(tok []byte) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", false
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var stack [256]byte
	b, ok := jsontext.AppendUnquoted(stack[:0], inner)
	if !ok {
		return "", false
	}
	return string(b), true
}

// isStringToken reports whether stringOf reads tok, without making the string in the common
// case (no escapes, valid UTF-8), which is stringOf's own first test.
func isStringToken(tok []byte) bool {
	if len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' {
		if inner := tok[1 : len(tok)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return true
		}
	}
	_, ok := stringOf(tok)
	return ok
}

// intOf reads a small non-negative integer token.
func intOf(tok []byte) (int, bool) {
	if len(tok) == 0 || len(tok) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func isNull(tok []byte) bool { return string(tok) == "null" }

// foldable reports whether a key the fast path does not know might still match a field of the
// encoding/json path, which matches keys case-insensitively (with Unicode folding): such a
// key sends the event to that path.
func foldable(key []byte) bool {
	for _, c := range key {
		if c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
