package reqschema

import (
	"bytes"
	"fmt"
	"strings"
)

// ErrorKind says which part of a request is at fault.
type ErrorKind int

// The kinds of Error.
const (
	// BodySyntax: the body is not one JSON value (malformed, truncated, followed by other text,
	// or nested deeper than 10000 levels).
	BodySyntax ErrorKind = iota + 1
	// BodySchema: the body is JSON but does not match the operation's schema.
	BodySchema
	// ContentType: the Content-Type header names a media type the operation does not accept.
	ContentType
	// Parameter: a declared parameter is missing or empty.
	Parameter
)

// pointerEscaper escapes a JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// Error is a request that does not match its operation. It is the only error type the
// validation methods return.
type Error struct {
	Kind ErrorKind
	// Pointer holds the JSON pointer tokens of the offending body value, from the root
	// (["messages", "0", "role"]); it is empty when the body as a whole is at fault. For a missing
	// required property it ends with that property's name. Only for BodySchema.
	Pointer []string
	// Keyword is the schema keyword that failed, as kin-openapi names it ("type", "required",
	// "minimum", "nullable", ...). Only for BodySchema.
	Keyword string
	// Required reports a missing required property (Keyword "required").
	Required bool
	// Parameter names the offending parameter. Only for Parameter.
	Parameter string
	// Reason says what is wrong in a few words, e.g. "value must be an integer" or
	// `property "model" is missing`.
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	switch e.Kind {
	case BodySyntax:
		if e.Reason != "" {
			return e.Reason
		}
		return "the request body is not valid JSON"
	case BodySchema:
		if len(e.Pointer) == 0 {
			return "request body: " + e.Reason
		}
		var b strings.Builder
		b.WriteString("request body at ")
		for _, token := range e.Pointer {
			b.WriteByte('/')
			b.WriteString(pointerEscaper.Replace(token))
		}
		return b.String() + ": " + e.Reason
	case Parameter:
		return fmt.Sprintf("parameter %q: %s", e.Parameter, e.Reason)
	default:
		return e.Reason
	}
}

// syntaxReason says why body, which failed at offset at (len(body): it ended early), is not
// one JSON value, and where: the line and column (of bytes, from 1) a client can look at.
func syntaxReason(body []byte, at int, tooDeep bool) string {
	const prefix = "the request body is not valid JSON: "
	switch {
	case len(bytes.TrimLeft(body, " \t\r\n")) == 0:
		return "the request body is empty: send a JSON value"
	case tooDeep:
		return fmt.Sprintf(prefix+"its arrays and objects nest deeper than %d levels (%s)", maxDepth, position(body, at))
	case at >= len(body):
		return prefix + "it ends early, inside a value (was it cut short?)"
	}
	c := body[at]
	what := fmt.Sprintf("byte 0x%02x", c)
	switch {
	case c >= 0x20 && c < 0x7f:
		what = fmt.Sprintf("character %q", rune(c))
	case c == 0x1f && at == 0 && len(body) > 1 && body[1] == 0x8b:
		return prefix + "it starts like gzip-compressed data: send it uncompressed"
	}
	return fmt.Sprintf(prefix+"unexpected %s (%s)", what, position(body, at))
}

// position names offset at of body as its line and column, counted from 1.
func position(body []byte, at int) string {
	line := 1 + bytes.Count(body[:at], []byte{'\n'})
	col := at + 1
	if i := bytes.LastIndexByte(body[:at], '\n'); i >= 0 {
		col = at - i
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}
