package reqschema

import (
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/jsonview"
)

// maxDepth is encoding/json's limit on the nesting of arrays and objects: a value nested deeper
// is a syntax error.
const maxDepth = 10000

// walker is one pass over a body. Its methods consume JSON from data at pos; a syntax error sets
// bad and moves pos to the end, so that every loop stops there.
type walker struct {
	data  []byte
	pos   int
	depth int // arrays and objects open around pos
	bad   bool
	// badAt is where the first syntax error was met (the offset of the byte that broke it, or
	// len(data) when the text ended early), and tooDeep says it was the nesting limit.
	badAt   int
	tooDeep bool

	// skipped has bit d-1 set while the container skipValue opened at depth d is an object.
	skipped [maxDepth/64 + 1]uint64
	// slots hold, for each object being validated, what was seen of its named properties.
	slots []slot
	// objects counts the objects validated by this walker, numbering their walks.
	objects uint64
	// scratch holds the decoded text of a string that has escapes or invalid UTF-8.
	scratch []byte

	// strictUTF8 makes scanString note, in badUTF8, the offset of the first string whose bytes
	// are not valid UTF-8 (-1: none yet); see Operation.ValidateBodyStrict.
	strictUTF8 bool
	badUTF8    int

	// view, when set, receives the members of the top-level object as the walk meets them
	// (indexed reports that it did), uescapes counts the \u escapes of all strings, and
	// audioKey says that a member name at any depth is one jsonview.AudioKey names.
	view     *jsonview.View
	indexed  bool
	uescapes int
	audioKey bool
}

func (w *walker) fail() {
	if !w.bad {
		w.badAt = w.pos
	}
	w.bad = true
	w.pos = len(w.data)
}

func (w *walker) skipSpace() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// expect consumes the byte c, after white space.
func (w *walker) expect(c byte) {
	w.skipSpace()
	if w.pos < len(w.data) && w.data[w.pos] == c {
		w.pos++
		return
	}
	w.fail()
}

// enter notes an opened array or object, failing beyond maxDepth.
func (w *walker) enter() bool {
	if w.depth == maxDepth {
		if !w.bad {
			// The error is the bracket just consumed.
			w.tooDeep = true
			w.pos--
		}
		w.fail()
		return false
	}
	w.depth++
	return true
}

// plainStringByte marks the bytes that stand for themselves inside a JSON string: all but the
// quote, the backslash and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString consumes the string at pos (which holds its opening quote). escaped reports escape
// sequences and nonASCII bytes above 0x7F: without either, the string's text is its bytes.
func (w *walker) scanString() (escaped, nonASCII bool) {
	data := w.data
	var seen byte
	for i := w.pos + 1; i < len(data); {
		c := data[i]
		if plainStringByte[c] {
			seen |= c
			i++
			continue
		}
		switch c {
		case '"':
			start := w.pos
			w.pos = i + 1
			if seen >= utf8.RuneSelf && w.strictUTF8 && w.badUTF8 < 0 && !utf8.Valid(data[start+1:i]) {
				// Only strings with bytes above 0x7F are read twice, and only those.
				w.badUTF8 = start
			}
			return escaped, seen >= utf8.RuneSelf
		case '\\':
			escaped = true
			if i+1 >= len(data) {
				w.fail()
				return
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || jsontext.Hex4(data[i+2:i+6]) < 0 {
					w.fail()
					return
				}
				w.uescapes++
				i += 6
			default:
				w.fail()
				return
			}
		default: // a control character
			w.fail()
			return
		}
	}
	w.fail()
	return
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber consumes the number at pos. integral reports a number written without fraction or
// exponent, exponent one written with an exponent.
func (w *walker) scanNumber() (integral, exponent bool) {
	data, i := w.data, w.pos
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		for i++; i < len(data) && isDigit(data[i]); i++ {
		}
	default:
		w.fail()
		return
	}
	integral = true
	if i < len(data) && data[i] == '.' {
		integral = false
		if i++; i >= len(data) || !isDigit(data[i]) {
			w.fail()
			return
		}
		for ; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		integral, exponent = false, true
		if i++; i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			w.fail()
			return
		}
		for ; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	w.pos = i
	return integral, exponent
}

// literal consumes text (true, false or null).
func (w *walker) literal(text string) {
	if len(w.data)-w.pos >= len(text) && string(w.data[w.pos:w.pos+len(text)]) == text {
		w.pos += len(text)
		return
	}
	w.fail()
}

// objectKey consumes an object member's name and colon, after white space.
func (w *walker) objectKey() {
	w.skipSpace()
	if w.pos >= len(w.data) || w.data[w.pos] != '"' {
		w.fail()
		return
	}
	start := w.pos
	escaped, nonASCII := w.scanString()
	if w.view != nil && !w.audioKey && !w.bad {
		w.noteKey(w.data[start+1:w.pos-1], escaped, nonASCII)
	}
	w.expect(':')
}

// noteKey notes, for the view, whether raw (a member name's bytes between its quotes) is one
// jsonview.AudioKey names. Only a name of such a length, or one with escapes, is compared: the
// rest cost a length test.
func (w *walker) noteKey(raw []byte, escaped, nonASCII bool) {
	if !escaped && len(raw) != len("audio") && len(raw) != len("input_audio") {
		return
	}
	w.audioKey = jsonview.AudioKey(w.text(raw, escaped, nonASCII))
}

// skipValue consumes the value after pos, checking its syntax only. It does not recurse: the
// kind of each container it opens is one bit of objects.
func (w *walker) skipValue() {
	base := w.depth
	for {
		// A value starts here.
		w.skipSpace()
		if w.pos >= len(w.data) {
			w.fail()
			return
		}
		switch c := w.data[w.pos]; {
		case c == '{' || c == '[':
			w.pos++
			if !w.enter() {
				return
			}
			bit := uint64(1) << ((w.depth - 1) % 64)
			if c == '{' {
				w.skipped[(w.depth-1)/64] |= bit
			} else {
				w.skipped[(w.depth-1)/64] &^= bit
			}
			w.skipSpace()
			if w.pos < len(w.data) && w.data[w.pos] == c+2 { // '}' is '{'+2, ']' is '['+2
				w.pos++
				w.depth--
				break
			}
			if c == '{' {
				w.objectKey()
			}
			continue
		case c == '"':
			w.scanString()
		case c == 't':
			w.literal("true")
		case c == 'f':
			w.literal("false")
		case c == 'n':
			w.literal("null")
		case c == '-' || isDigit(c):
			w.scanNumber()
		default:
			w.fail()
		}
		// A value ended: close the containers that end here, then go on to the next element.
		for {
			if w.bad || w.depth == base {
				return
			}
			object := w.skipped[(w.depth-1)/64]&(1<<((w.depth-1)%64)) != 0
			closer := byte(']')
			if object {
				closer = '}'
			}
			if !w.endOf(closer) {
				if object {
					w.objectKey()
				}
				break
			}
			if w.bad {
				return
			}
			w.depth--
		}
		if w.bad {
			return
		}
	}
}

// text is the decoded text of a string's contents raw (between the quotes), as encoding/json
// decodes it; scanString's findings say whether decoding can change anything. The result is raw
// itself or w.scratch, valid until the next call.
func (w *walker) text(raw []byte, escaped, nonASCII bool) []byte {
	if !escaped && (!nonASCII || utf8.Valid(raw)) {
		return raw
	}
	// The syntax was checked by scanString, so the decoding cannot fail.
	w.scratch, _ = jsontext.AppendUnquoted(w.scratch[:0], raw)
	return w.scratch
}
