package streamconv

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/llm"
)

// surrogatePair joins a character that an upstream split between two text deltas of a stream:
// a character outside the Basic Multilingual Plane (an emoji) is two UTF-16 surrogates in a
// JSON \u escape, and a server that cuts its text by UTF-16 length (JavaScript's) may end one
// delta with the high surrogate and begin the next with the low one. Each delta is valid JSON,
// and unquoted alone each half would become U+FFFD, as encoding/json makes a lone surrogate:
// the character would reach a client of another format as two replacement characters (trial
// h14 D7; a client of the upstream's own format gets the bytes as they came, and joins them).
// A decoder keeps one per stream for its text and others for tool calls' arguments (chat one
// per call, as calls' fragments may interleave; Responses one per function_call item, for the
// same reason; Messages one for the open tool_use block), and unquotes those deltas through
// them, on its fast path and on the encoding/json one alike.
type surrogatePair struct {
	// high is a high surrogate that ended the last delta, held back (0: none).
	high rune
}

// text unquotes tok, the JSON string token of a text delta, as stringOf does, except that a
// high surrogate escape at its end is held back for the next delta and one held back from the
// last delta is joined with a low surrogate escape at its start (or becomes U+FFFD when none
// follows).
func (s *surrogatePair) text(tok []byte) (string, bool) {
	if s.high == 0 && !endsWithHighSurrogate(tok) {
		return stringOf(tok)
	}
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", false
	}
	inner := tok[1 : len(tok)-1]
	var stack [256]byte
	b := stack[:0]
	// The state changes only when the token is read: a caller that falls back to another
	// reading of a token this one refuses finds the pair as it was.
	if s.high != 0 {
		r := utf8.RuneError
		if lo, ok := surrogateEscape(inner); ok && utf16.IsSurrogate(lo) && lo >= 0xDC00 {
			r = utf16.DecodeRune(s.high, lo)
			inner = inner[6:]
		}
		b = utf8.AppendRune(b, r)
	}
	var held rune
	if n := len(inner); n >= 6 && escapeStartsAt(inner, n-6) {
		if hi, ok := surrogateEscape(inner[n-6:]); ok && hi >= 0xD800 && hi < 0xDC00 {
			held, inner = hi, inner[:n-6]
		}
	}
	b, ok := jsontext.AppendUnquoted(b, inner)
	if !ok {
		return "", false
	}
	s.high = held
	return string(b), true
}

// textOf reads the text of a delta that encoding/json decoded (tok, the delta's token) as the
// fast path reads it, through the pair: a character whose UTF-16 halves an upstream split
// between two deltas is whole whichever path read each of them (encoding/json alone makes each
// half U+FFFD). A delta that is no string (absent, null, a number) is no text, as encoding/json
// leaves a string field of another type, and leaves the pair as it was.
func (s *surrogatePair) textOf(tok []byte) string {
	text, _ := s.text(tok)
	return text
}

// flush appends to out, as a text delta, the U+FFFD that a high surrogate held back from the
// last delta becomes when no text delta follows it (at the end of the text, or when the next
// chunk's text is read without the pair): nothing is silently lost.
func (s *surrogatePair) flush(out []llm.Event) []llm.Event {
	if s.high == 0 {
		return out
	}
	s.high = 0
	return append(out, llm.Event{Kind: llm.EventTextDelta, Text: string(utf8.RuneError)})
}

// flushArguments is flush for the pair of tool call n's arguments: the U+FFFD is an arguments
// delta of the call.
func (s *surrogatePair) flushArguments(n int, out []llm.Event) []llm.Event {
	if s.high == 0 {
		return out
	}
	s.high = 0
	return append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: string(utf8.RuneError)})
}

// deltaToken is a delta's JSON token as encoding/json found it in an event's data, so that the
// encoding/json path reads it through a surrogatePair (textOf) as the fast path does. It is a
// slice of the event's data, not a copy (no allocation), and read only while that event is
// decoded; absent, it is empty.
type deltaToken []byte

// UnmarshalJSON implements json.Unmarshaler.
func (t *deltaToken) UnmarshalJSON(b []byte) error {
	*t = b
	return nil
}

// endsWithHighSurrogate reports, cheaply, whether the string token tok may end with a high
// surrogate escape (\uD800 to \uDBFF): the one test every text delta pays.
func endsWithHighSurrogate(tok []byte) bool {
	n := len(tok)
	if n < 8 || tok[n-7] != '\\' || tok[n-6] != 'u' || tok[n-5]|0x20 != 'd' {
		return false
	}
	switch tok[n-4] | 0x20 {
	case '8', '9', 'a', 'b':
		return true
	}
	return false
}

// surrogateEscape reads a \uXXXX escape at the start of b as a UTF-16 code unit.
func surrogateEscape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			r = r<<4 | rune(c|0x20-'a'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// escapeStartsAt reports whether the backslash at b[i] begins an escape: it is preceded by an
// even number of backslashes (an odd number would make it the escaped character of "\\").
func escapeStartsAt(b []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}
