// Package jsonview is a JSON object read once, and the one way the gateway rewrites JSON bytes.
//
// A View holds an object's bytes and the offsets of its top-level members. The request
// validator (impl/reqschema) fills it during the one pass in which it checks the whole body, so
// that everything the exchange reads of a request (the model, the stream flag and output bounds,
// the provider-kept state it refuses, the hosted tools it plans, the members it rewrites for the
// upstream, the top level of the neutral form) is a look-up among a dozen members rather than
// another scan of the body. A View can also read the top level of bytes that were not validated
// (Parse): an upstream's answer, a stream event, a nested object.
//
// Edits are the changes made to an object's members (values replaced, members removed, members
// added), applied in one copy of the bytes: every byte outside an edited value is copied as it
// came, so a request relayed to an upstream of its own format keeps the client's encoding (key
// order, white space, number spellings, escapes) and is never re-encoded.
//
// The scanning here checks the syntax of the object's own structure and the nesting of the
// brackets of nested values, not their inner syntax: a View built by Parse is as trustworthy as
// its bytes, and the gateway validates requests before it reads them.
//
// Why not a library: tidwall/sjson and encoding/json/jsontext rewrite a document one path at a
// time, each edit another scan and copy of the whole body; the gateway makes three to six edits
// to every relayed request and needs them in one copy, and the offsets come for free from the
// validator's pass.
package jsonview

import (
	"bytes"
	"errors"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// ErrNotObject is Parse's error for bytes that are not one JSON object (by the syntax of its top
// level and the nesting of its brackets).
var ErrNotObject = errors.New("jsonview: not a JSON object")

// Member is one member of an object: its key and where its key and value lie in the object's
// bytes.
type Member struct {
	// Key is the member's name, unescaped. It aliases the object's bytes when the name has no
	// escape sequence.
	Key []byte
	// KeyStart is the offset of the key's opening quote.
	KeyStart int
	// Start and End are the offsets of the value: the bytes [Start, End).
	Start, End int
}

// inlineMembers is how many members a View holds without allocating: more than any request the
// official SDKs send has at its top level.
const inlineMembers = 16

// View is an object's bytes and its top-level members, in the order they appear (a repeated
// key appears each time; look-ups take the last, as encoding/json decodes it). The zero View is
// empty; Parse or Reset and Add fill it. A View holds no copy of the bytes, which must not change
// while it is used.
type View struct {
	body []byte
	// The members: the first inlineMembers in inline (n of them), all of them in more once
	// there are more. Indexes, not a slice into inline, keep a View on its caller's stack.
	n      int
	inline [inlineMembers]Member
	more   []Member
	// escapes counts the \u escape sequences in the object's strings; -1 when not counted.
	escapes int
	// valid says the whole object's JSON syntax was checked (by the validator).
	valid bool
	// audio says whether a member anywhere in the object is named as AudioKey names them: 1
	// yes, 0 no (recorded by the validator's pass, or looked for once), -1 not known yet.
	audio int8
}

// Parse returns the view of body, which must be one JSON object.
func Parse(body []byte) (*View, error) {
	v := new(View)
	if err := v.Parse(body); err != nil {
		return nil, err
	}
	return v, nil
}

// Parse reads body into v, replacing what v held; on error v is left empty.
func (v *View) Parse(body []byte) error {
	v.Reset(body)
	err := EachMember(body, func(m Member) error {
		v.Add(m)
		return nil
	})
	if err != nil {
		v.Reset(nil)
	}
	return err
}

// Reset empties v and makes it the view of body, to which Add then adds the members, and
// CountEscapes the number of \u escapes when the caller counted them.
func (v *View) Reset(body []byte) {
	v.body, v.n, v.more, v.escapes, v.valid, v.audio = body, 0, nil, -1, false, -1
}

// SetValid records that the whole object's JSON syntax was checked, nested values included.
func (v *View) SetValid() { v.valid = true }

// Valid reports whether the whole object's JSON syntax was checked (SetValid); a View read by
// Parse checked only its top level.
func (v *View) Valid() bool { return v.valid }

// Add appends a member; members must be added in the order of their offsets.
func (v *View) Add(m Member) {
	if v.more == nil && v.n < inlineMembers {
		v.inline[v.n] = m
		v.n++
		return
	}
	if v.more == nil {
		v.more = append(make([]Member, 0, 2*inlineMembers), v.inline[:v.n]...)
	}
	v.more = append(v.more, m)
}

// CountEscapes records the number of \u escape sequences in the object's strings.
func (v *View) CountEscapes(n int) { v.escapes = n }

// AudioKey reports whether a member named name (unescaped) may carry audio in a request of the
// OpenAI formats: "audio" (chat's request for spoken output, and an assistant turn's reference to
// an earlier spoken answer) and "input_audio" (the payload of an audio content part, in chat and
// in Responses). The validator's pass asks it of every member name it meets, at any depth, and
// records the answer with SawAudioKey.
func AudioKey(name []byte) bool {
	return string(name) == "input_audio" || string(name) == "audio"
}

// SawAudioKey records whether any member of the object, at any depth, is named as AudioKey
// names them: the validator met every member name in its pass.
func (v *View) SawAudioKey(seen bool) {
	v.audio = 0
	if seen {
		v.audio = 1
	}
}

// MayHoldAudio reports whether the object may hold a member named as AudioKey names them, at any
// depth. A view the validator filled answers from its pass (SawAudioKey), without another look at
// the bytes; any other view looks once for the bytes "audio" (or a \u escape, which could
// spell them) and keeps the answer. False means that the object holds no such member.
func (v *View) MayHoldAudio() bool {
	if v.audio < 0 {
		v.SawAudioKey(v.UnicodeEscapes() > 0 || bytes.Contains(v.body, []byte("audio")))
	}
	return v.audio == 1
}

// Body returns the object's bytes.
func (v *View) Body() []byte { return v.body }

// Members returns the top-level members in order. The slice belongs to the view.
func (v *View) Members() []Member {
	if v.more != nil {
		return v.more
	}
	return v.inline[:v.n]
}

// Lookup returns the last member named key.
func (v *View) Lookup(key string) (Member, bool) {
	ms := v.Members()
	for i := len(ms) - 1; i >= 0; i-- {
		if string(ms[i].Key) == key {
			return ms[i], true
		}
	}
	return Member{}, false
}

// Has reports whether a member is named key.
func (v *View) Has(key string) bool {
	_, ok := v.Lookup(key)
	return ok
}

// Value returns the bytes of the last member named key's value.
func (v *View) Value(key string) ([]byte, bool) {
	m, ok := v.Lookup(key)
	if !ok {
		return nil, false
	}
	return v.body[m.Start:m.End], true
}

// ValueOf returns the bytes of m's value.
func (v *View) ValueOf(m Member) []byte { return v.body[m.Start:m.End] }

// UnicodeEscapes is the number of \u escape sequences in the object's strings (counted by the
// validator's pass, else here, once).
func (v *View) UnicodeEscapes() int {
	if v.escapes < 0 {
		v.escapes = bytes.Count(v.body, []byte(`\u`))
	}
	return v.escapes
}

// EachMember calls fn with each member of the top-level object of body, in order. It checks the
// object's own syntax and the nesting of brackets; what is inside strings and nested values is
// not checked. An error of fn ends the walk and is returned.
func EachMember(body []byte, fn func(Member) error) error {
	i := SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return ErrNotObject
	}
	i = SkipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		if SkipSpace(body, i+1) != len(body) {
			return ErrNotObject
		}
		return nil
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return ErrNotObject
		}
		ks := i
		ke, ok := SkipString(body, i)
		if !ok {
			return ErrNotObject
		}
		key := body[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = Unquote(body[i:ke])
		}
		i = SkipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return ErrNotObject
		}
		vs := SkipSpace(body, i+1)
		ve, ok := SkipValue(body, vs)
		if !ok {
			return ErrNotObject
		}
		if err := fn(Member{Key: key, KeyStart: ks, Start: vs, End: ve}); err != nil {
			return err
		}
		i = SkipSpace(body, ve)
		if i >= len(body) {
			return ErrNotObject
		}
		switch body[i] {
		case ',':
			i = SkipSpace(body, i+1)
		case '}':
			if SkipSpace(body, i+1) != len(body) {
				return ErrNotObject
			}
			return nil
		default:
			return ErrNotObject
		}
	}
}

// Unquote returns the text of the JSON string token tok (quotes included), unescaped.
func Unquote(tok []byte) []byte {
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	s, _ := jsontext.AppendUnquoted(nil, inner)
	return s
}

// SkipSpace returns the offset of the first byte at or after i that is not JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipString returns the offset after the string starting at b[i] == '"'. It jumps from quote
// to quote (bytes.IndexByte is vectorised) and does not check the string's content.
func SkipString(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		escapes := 0
		for m := j - 1; m > i && b[m] == '\\'; m-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// SkipValue returns the offset after the value starting at b[i]. Nested values are skipped by
// matching brackets outside strings; their inner syntax is not checked. Numbers are checked by
// their characters.
func SkipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{' || c == '[':
		var buf [64]byte
		stack := buf[:0]
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := SkipString(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				stack = append(stack, b[j])
			case '}', ']':
				if len(stack) == 0 || (b[j] == '}') != (stack[len(stack)-1] == '{') {
					return 0, false
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return number(b, i)
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// number returns the offset after the JSON number at b[i], checking its grammar.
func number(b []byte, i int) (int, bool) {
	isDigit := func(j int) bool { return j < len(b) && '0' <= b[j] && b[j] <= '9' }
	j := i
	if b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case isDigit(j):
		for j++; isDigit(j); j++ {
		}
	default:
		return 0, false
	}
	if j < len(b) && b[j] == '.' {
		if j++; !isDigit(j) {
			return 0, false
		}
		for j++; isDigit(j); j++ {
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		if j++; j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if !isDigit(j) {
			return 0, false
		}
		for j++; isDigit(j); j++ {
		}
	}
	return j, true
}
