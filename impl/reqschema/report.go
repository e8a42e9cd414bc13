package reqschema

import (
	"fmt"
	"strconv"
)

// ReasonNumberOutOfRange is the Reason of a number beyond float64's range (1e400, say), in
// kin-openapi's words.
const ReasonNumberOutOfRange = "cannot convert json.Number to float64"

// report turns a failure in data into an Error, rebuilding the failing value's field path.
func (f failure) report(data []byte, nodes []*node) *Error {
	e := &Error{Kind: BodySchema, Pointer: pointerTo(data, f.at)}
	n := nodes[f.node]
	switch f.reason {
	case reasonType:
		e.Keyword, e.Reason = "type", n.typeReason
	case reasonNotFloat64:
		e.Keyword, e.Reason = "type", ReasonNumberOutOfRange
	case reasonNotInteger:
		e.Keyword, e.Reason = "type", "value must be an integer"
	case reasonMinimum:
		e.Keyword, e.Reason = "minimum", n.minimumReason
	case reasonMaximum:
		e.Keyword, e.Reason = "maximum", n.maximumReason
	case reasonMinLength:
		e.Keyword, e.Reason = "minLength", fmt.Sprintf("minimum string length is %d", n.minLength)
	case reasonMaxLength:
		e.Keyword, e.Reason = "maxLength", fmt.Sprintf("maximum string length is %d", n.maxLength)
	case reasonMinItems:
		e.Keyword, e.Reason = "minItems", fmt.Sprintf("minimum number of items is %d", n.minItems)
	case reasonEnum:
		e.Keyword, e.Reason = "enum", n.enumReason
	case reasonNotNullable:
		e.Keyword, e.Reason = "nullable", "Value is not nullable"
	case reasonRequired:
		name := n.names[f.missing]
		e.Keyword, e.Reason = "required", fmt.Sprintf("property %q is missing", name)
		e.Required = true
		e.Pointer = append(e.Pointer, name)
	}
	return e
}

// pointerTo returns the JSON pointer tokens of the value that starts at offset at in data, a
// valid JSON text, in one pass that keeps the path of the containers open around it.
func pointerTo(data []byte, at int) []string {
	// level is an open container: the index of its current element, and for an object the
	// bytes of the current member's name.
	type level struct {
		object            bool
		index             int
		name              []byte
		escaped, nonASCII bool
	}
	var levels []level
	w := &walker{data: data}
	// memberName reads the name of the next member of the innermost object.
	memberName := func() {
		w.skipSpace()
		start := w.pos
		l := &levels[len(levels)-1]
		l.escaped, l.nonASCII = w.scanString()
		l.name = data[start+1 : w.pos-1]
		w.expect(':')
	}
	for !w.bad {
		// A value starts here.
		w.skipSpace()
		if w.pos >= at {
			break
		}
		c := data[w.pos]
		if c == '{' || c == '[' {
			w.pos++
			w.skipSpace()
			if w.pos < len(data) && data[w.pos] != c+2 { // not empty: descend
				levels = append(levels, level{object: c == '{'})
				if c == '{' {
					memberName()
				}
				continue
			}
			w.pos++
		} else {
			w.skipValue()
		}
		// A value ended: close the containers that end here, then go on to the next element.
		for !w.bad && len(levels) > 0 {
			w.skipSpace()
			if w.pos < len(data) && data[w.pos] == ',' {
				w.pos++
				levels[len(levels)-1].index++
				if levels[len(levels)-1].object {
					memberName()
				}
				break
			}
			w.pos++ // } or ]
			levels = levels[:len(levels)-1]
		}
		if len(levels) == 0 {
			break
		}
	}
	tokens := make([]string, 0, len(levels))
	for _, l := range levels {
		if l.object {
			tokens = append(tokens, string(w.text(l.name, l.escaped, l.nonASCII)))
		} else {
			tokens = append(tokens, strconv.Itoa(l.index))
		}
	}
	return tokens
}
