package streamconv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// wireError is an error object as the upstreams send it: OpenAI's {message, type, param, code}
// (code a string, a number or null; LiteLLM sends the string "None" for absent values),
// Anthropic's {type, message}, and Responses' {code, message}.
type wireError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// streamError turns the wire error into a neutral one. The type is the upstream's own word:
// its type when that is meaningful, else its code, else "upstream_error".
func (e *wireError) streamError() *llm.StreamError {
	return newStreamError(e.Type, rawText(e.Code), e.Message)
}

// newStreamError picks the more telling of an error's type and code and fills in defaults.
func newStreamError(typ, code, message string) *llm.StreamError {
	if typ == "None" {
		typ = ""
	}
	if code == "None" {
		code = ""
	}
	t := typ
	if t == "" || (errorKind(t) == apierror.KindUpstream && code != "" && errorKind(code) != apierror.KindUpstream) {
		t = code
	}
	if t == "" {
		t = "upstream_error"
	}
	if message == "" {
		message = "the upstream reported an error"
	}
	return &llm.StreamError{Type: t, Message: message}
}

// rawText is the text of a JSON string or number ("" for null, absence or anything else).
func rawText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw)
	}
	return ""
}

// unmarshal decodes an event's data, wrapping a failure as a malformed-stream error. A value
// of an unexpected JSON type in a field is tolerated (the field keeps its zero value): upstreams
// add and vary fields, and a decoder must not fail on what it does not need.
func unmarshal(what string, data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	if err == nil || errors.As(err, &typeErr) {
		return nil
	}
	return fmt.Errorf("streamconv: malformed %s event: %w", what, err)
}

// eventType is the type of an event whose SSE name is missing: the "type" field of its data.
func eventType(what string, data []byte) (string, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := unmarshal(what, data, &t); err != nil {
		return "", err
	}
	return t.Type, nil
}

// isDone reports whether data is the [DONE] sentinel (leading and trailing space allowed).
func isDone(data []byte) bool {
	return string(bytes.TrimSpace(data)) == "[DONE]"
}
