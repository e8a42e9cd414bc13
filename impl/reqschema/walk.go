package reqschema

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsonview"
)

// reason is why a value failed its schema; passed when it did not.
type reason uint8

const (
	passed reason = iota
	reasonType
	reasonNotFloat64
	reasonNotInteger
	reasonMinimum
	reasonMaximum
	reasonMinLength
	reasonMaxLength
	reasonMinItems
	reasonEnum
	reasonNotNullable
	reasonRequired
)

// failure is a value that failed its schema: the offset in the body where the value starts (for
// a missing property, where its object starts), the schema's node id, the reason, and for a
// missing property which one. It holds no pointer, and no field path: the path is rebuilt from
// the offset when the failure is reported.
type failure struct {
	at      int
	node    int32
	missing int32 // for reasonRequired, the index of the property in the node's names
	reason  reason
}

func failed(r reason, at int, n *node) failure { return failure{at: at, node: n.id, reason: r} }

// slot is what an object walk saw of one named property: whether it is present (seen is the
// walk's number), and the failure of its last value (a repeated name counts only with its last
// value, as encoding/json decodes it). Slots are not cleared between objects: a slot whose seen
// is another walk's number is absent.
type slot struct {
	seen    uint64
	failure failure
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// ValidateBody checks body, the bytes of a request's body, against the operation's request body
// schema; contentType is the request's Content-Type header, which must name application/json
// (parameters allowed). It returns nil when the operation declares no body or the body passes,
// otherwise an *Error of kind ContentType, BodySyntax (an empty body included) or BodySchema.
func (o *Operation) ValidateBody(contentType string, body []byte) error {
	return o.validate(contentType, body, false, nil)
}

// ValidateBodyStrict is ValidateBody, and it also refuses a body, valid by the schema, in which
// a string (a value or a member name) is not valid UTF-8, where encoding/json and kin-openapi
// would quietly replace each invalid byte with U+FFFD: the Error is a BodySchema one with
// Keyword "utf8", pointing at the first such string (a member name's own object). Only strings
// with bytes above 0x7F cost a second look (utf8.Valid over that string), so a body in ASCII
// costs nothing more.
func (o *Operation) ValidateBodyStrict(contentType string, body []byte) error {
	return o.validate(contentType, body, true, nil)
}

// ValidateBodyView is ValidateBodyStrict that also fills view with the body's top-level object
// (its members, the count of its \u escapes, and whether a member name at any depth is one
// jsonview.AudioKey names), read in the same pass: the one parse of a
// request (see impl/jsonview). When the body is valid and its top level is an object, view
// holds it; otherwise view is left empty.
func (o *Operation) ValidateBodyView(contentType string, body []byte, view *jsonview.View) error {
	return o.validate(contentType, body, true, view)
}

func (o *Operation) validate(contentType string, body []byte, strictUTF8 bool, view *jsonview.View) error {
	if view != nil {
		view.Reset(nil)
	}
	if o.body == nil {
		return nil
	}
	if !isJSON(contentType) {
		return &Error{Kind: ContentType, Reason: fmt.Sprintf("header Content-Type has unexpected value %q", contentType)}
	}
	w := walkers.Get().(*walker)
	w.strictUTF8, w.badUTF8 = strictUTF8, -1
	if view != nil {
		view.Reset(body)
		w.view, w.indexed, w.uescapes, w.audioKey = view, false, 0, false
	}
	f, valid := w.walk(o.body, body)
	badUTF8 := w.badUTF8
	badAt, tooDeep := w.badAt, w.tooDeep
	indexed, uescapes, audioKey := w.indexed, w.uescapes, w.audioKey
	w.strictUTF8, w.view, w.audioKey = false, nil, false
	// A pooled walker keeps what a usual body needs, not what an outlandish one grew.
	if cap(w.scratch) > 64<<10 {
		w.scratch = nil
	}
	if cap(w.slots) > 4<<10 {
		w.slots = nil
	}
	walkers.Put(w)
	if view != nil && (!valid || f.reason != passed || badUTF8 >= 0) {
		view.Reset(nil)
	}
	switch {
	case !valid:
		return &Error{Kind: BodySyntax, Reason: syntaxReason(body, badAt, tooDeep)}
	case f.reason != passed:
		return f.report(body, o.nodes)
	case badUTF8 >= 0:
		return &Error{Kind: BodySchema, Pointer: pointerTo(body, badUTF8), Keyword: "utf8", Reason: "string is not valid UTF-8"}
	}
	if view != nil {
		if indexed {
			view.CountEscapes(uescapes)
			view.SetValid()
			view.SawAudioKey(audioKey)
		} else if view.Parse(body) == nil {
			// The schema let the top level through unread: read here, and checked above. The
			// walk met every member name all the same.
			view.SetValid()
			view.SawAudioKey(audioKey)
		}
	}
	return nil
}

// isJSON reports whether a Content-Type header selects the application/json media type, as
// kin-openapi matches it: case-insensitively, with or without parameters.
func isJSON(contentType string) bool {
	mime := strings.ToLower(strings.TrimSpace(contentType))
	if mime == "application/json" {
		return true
	}
	base, _, _ := strings.Cut(mime, ";")
	return strings.TrimSpace(base) == "application/json"
}

// walk validates data, which must be one JSON value, against root. valid is false when data is
// not valid JSON.
func (w *walker) walk(root *node, data []byte) (f failure, valid bool) {
	w.data, w.pos, w.depth, w.bad, w.badAt, w.tooDeep = data, 0, 0, false, 0, false
	w.slots = w.slots[:0]
	f = w.value(root)
	if !w.bad {
		w.skipSpace()
		if w.pos != len(w.data) {
			w.fail()
		}
	}
	w.data = nil
	return f, !w.bad
}

// value consumes the value after pos and judges it against n (nil: anything goes), in
// kin-openapi's order: null, emptiness, enum, then the keywords of the value's type.
func (w *walker) value(n *node) failure {
	w.skipSpace()
	if n == nil {
		w.skipValue()
		return failure{}
	}
	if w.pos >= len(w.data) {
		w.fail()
		return failure{}
	}
	at := w.pos
	switch c := w.data[at]; {
	case c == 'n':
		w.literal("null")
		switch {
		case n.nullable:
			return failure{}
		case !n.empty && n.enum != nil:
			return failed(reasonEnum, at, n)
		}
		return failed(reasonNotNullable, at, n)
	case n.empty:
		w.skipValue()
		return failure{}
	case c == '"':
		return w.string(n, at)
	case c == '{':
		return w.object(n, at)
	case c == '[':
		return w.array(n, at)
	case c == 't' || c == 'f':
		if c == 't' {
			w.literal("true")
		} else {
			w.literal("false")
		}
		switch {
		case n.enum != nil:
			return failed(reasonEnum, at, n)
		case !n.permits(kindBoolean):
			return failed(reasonType, at, n)
		}
		return failure{}
	case c == '-' || isDigit(c):
		return w.number(n, at)
	}
	w.fail()
	return failure{}
}

func (w *walker) string(n *node, at int) failure {
	escaped, nonASCII := w.scanString()
	if w.bad || (n.enum == nil && n.minLength == 0 && !n.hasMaxLength && n.permits(kindString)) {
		return failure{}
	}
	raw := w.data[at+1 : w.pos-1]
	if n.enum != nil && !n.inEnum(w.text(raw, escaped, nonASCII)) {
		return failed(reasonEnum, at, n)
	}
	if !n.permits(kindString) {
		return failed(reasonType, at, n)
	}
	if n.minLength > 0 || n.hasMaxLength {
		// kin-openapi counts characters (not UTF-16 units) of the decoded string.
		length := len(raw)
		switch {
		case escaped:
			length = utf8.RuneCount(w.text(raw, escaped, nonASCII))
		case nonASCII:
			// Decoding replaces each invalid byte by one U+FFFD: the count is the same.
			length = utf8.RuneCount(raw)
		}
		if uint64(length) < n.minLength {
			return failed(reasonMinLength, at, n)
		}
		if n.hasMaxLength && uint64(length) > n.maxLength {
			return failed(reasonMaxLength, at, n)
		}
	}
	return failure{}
}

func (n *node) inEnum(text []byte) bool {
	for _, allowed := range n.enum {
		if string(text) == allowed {
			return true
		}
	}
	return false
}

// number judges a number on its float64 value, as kin-openapi does with the json.Number it
// decodes: a number beyond the float64 range fails any schema, an integer is any value without a
// fractional part (1e2, 1.0 and -0 are integers).
func (w *walker) number(n *node, at int) failure {
	integral, exponent := w.scanNumber()
	if w.bad {
		return failure{}
	}
	if n.enum != nil {
		return failed(reasonEnum, at, n)
	}
	literal := w.data[at:w.pos]
	var value float64
	// Without an exponent, a number shorter than 300 characters is well inside the float64 range,
	// so it is parsed only when its value matters.
	if exponent || len(literal) >= 300 || n.hasMinimum || n.hasMaximum || (n.kind == kindInteger && !integral) {
		var ok bool
		if value, ok = parseNumber(literal, integral); !ok {
			return failed(reasonNotFloat64, at, n)
		}
	}
	switch n.kind {
	case kindInteger:
		if !integral && value != math.Trunc(value) {
			return failed(reasonNotInteger, at, n)
		}
	case kindNumber, kindAny:
	default:
		return failed(reasonType, at, n)
	}
	if n.hasMinimum && !(n.minimum <= value) {
		return failed(reasonMinimum, at, n)
	}
	if n.hasMaximum && !(n.maximum >= value) {
		return failed(reasonMaximum, at, n)
	}
	return failure{}
}

// parseNumber is the float64 value of a JSON number literal, as strconv.ParseFloat gives it;
// ok is false beyond the float64 range.
func parseNumber(literal []byte, integral bool) (value float64, ok bool) {
	if integral && len(literal) <= 16 {
		digits, negative := literal, literal[0] == '-'
		if negative {
			digits = digits[1:]
		}
		if len(digits) <= 15 { // below 2^53: exact
			var v uint64
			for _, c := range digits {
				v = v*10 + uint64(c-'0')
			}
			value = float64(v)
			if negative {
				value = -value
			}
			return value, true
		}
	}
	value, err := strconv.ParseFloat(string(literal), 64)
	return value, err == nil
}

// object judges an object: the failure of the first property in name order that fails, else
// the first required property that is missing. Properties without a schema are only scanned.
func (w *walker) object(n *node, at int) failure {
	switch {
	case n.enum != nil:
		w.skipValue()
		return failed(reasonEnum, at, n)
	case !n.permits(kindObject):
		w.skipValue()
		return failed(reasonType, at, n)
	case len(n.names) == 0:
		w.skipValue()
		return failure{}
	}
	w.pos++ // {
	if !w.enter() {
		return failure{}
	}
	w.objects++
	seen := w.objects
	// The top-level object's members go to the view, when one was asked for.
	index := w.view != nil && w.depth == 1
	w.indexed = w.indexed || index
	base := len(w.slots)
	if end := base + len(n.names); end <= cap(w.slots) {
		w.slots = w.slots[:end]
	} else {
		w.slots = append(w.slots, make([]slot, len(n.names))...)
	}
	w.skipSpace()
	if w.pos < len(w.data) && w.data[w.pos] == '}' {
		w.pos++
	} else {
		for {
			w.skipSpace()
			if w.pos >= len(w.data) || w.data[w.pos] != '"' {
				w.fail()
				return failure{}
			}
			start := w.pos
			escaped, nonASCII := w.scanString()
			if w.bad {
				return failure{}
			}
			name := w.text(w.data[start+1:w.pos-1], escaped, nonASCII)
			i, named := n.slot(name)
			if w.view != nil && !w.audioKey {
				w.audioKey = jsonview.AudioKey(name)
			}
			var key []byte
			if index {
				key = w.data[start+1 : w.pos-1]
				if escaped {
					key = jsonview.Unquote(w.data[start:w.pos])
				}
			}
			w.expect(':')
			if w.bad {
				return failure{}
			}
			w.skipSpace()
			valueStart := w.pos
			if named {
				f := w.value(n.properties[i])
				w.slots[base+i] = slot{seen: seen, failure: f}
			} else {
				w.skipValue()
			}
			if index && !w.bad {
				w.view.Add(jsonview.Member{Key: key, KeyStart: start, Start: valueStart, End: w.pos})
			}
			if w.endOf('}') {
				break
			}
		}
		if w.bad {
			return failure{}
		}
	}
	w.depth--
	var f failure
	slots := w.slots[base:]
	for i := range slots {
		if slots[i].seen == seen && slots[i].failure.reason != passed {
			f = slots[i].failure
			break
		}
	}
	if f.reason == passed {
		for _, i := range n.required {
			if slots[i].seen != seen {
				f = failed(reasonRequired, at, n)
				f.missing = int32(i)
				break
			}
		}
	}
	w.slots = w.slots[:base]
	return f
}

// endOf consumes what follows a member or an element: a comma (false: another one follows) or
// close, the end of the container (true). Anything else is a syntax error, which also ends the
// container (true, with w.bad set).
func (w *walker) endOf(close byte) bool {
	w.skipSpace()
	if w.pos >= len(w.data) {
		w.fail()
		return true
	}
	c := w.data[w.pos]
	w.pos++
	if c == ',' {
		return false
	}
	if c != close {
		w.fail()
	}
	return true
}

// array judges an array: too few items, else the first item that fails.
func (w *walker) array(n *node, at int) failure {
	switch {
	case n.enum != nil:
		w.skipValue()
		return failed(reasonEnum, at, n)
	case !n.permits(kindArray):
		w.skipValue()
		return failed(reasonType, at, n)
	case n.items == nil && n.minItems == 0:
		w.skipValue()
		return failure{}
	}
	w.pos++ // [
	if !w.enter() {
		return failure{}
	}
	var first failure
	count := uint64(0)
	w.skipSpace()
	if w.pos < len(w.data) && w.data[w.pos] == ']' {
		w.pos++
	} else {
		for {
			if first.reason == passed {
				first = w.value(n.items)
			} else {
				w.skipValue()
			}
			count++
			if w.endOf(']') {
				break
			}
		}
		if w.bad {
			return failure{}
		}
	}
	w.depth--
	if count < n.minItems {
		return failed(reasonMinItems, at, n)
	}
	return first
}

// slot finds the slot of a property name: by comparing names when there are few (faster than
// hashing), else in the index.
func (n *node) slot(name []byte) (int, bool) {
	if n.slotIndex != nil {
		i, ok := n.slotIndex[string(name)]
		return i, ok
	}
	for i, candidate := range n.names {
		if candidate == string(name) {
			return i, true
		}
	}
	return 0, false
}
