package reqschema

import (
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
