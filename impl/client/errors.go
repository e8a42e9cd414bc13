package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error answer is read to build an APIError.
const maxErrorBody = 1 << 20

// maxPlainMessage bounds the message taken from an error body that is not a
// JSON error envelope.
const maxPlainMessage = 512

// ErrModelNotFound is matched by errors.Is for a [*ModelNotFoundError] and for
// an [*APIError] whose code is model_not_found.
var ErrModelNotFound = errors.New("model not found")

// ModelNotFoundError reports that a model id is not in the account's model
// list.
type ModelNotFoundError struct {
	// ID is the model id that was looked up.
	ID string
}

// Error describes the missing model.
func (e *ModelNotFoundError) Error() string {
	return fmt.Sprintf("tollgate: model %q is not available to the account", e.ID)
}

// Is reports whether target is [ErrModelNotFound].
func (e *ModelNotFoundError) Is(target error) bool {
	return target == ErrModelNotFound
}

// APIError is a non-2xx answer from the gateway, parsed from its error
// envelope: {"error":{"message","type","param","code"}} on most routes, or
// {"type":"error","error":{"type","message"}} on /v1/messages.
type APIError struct {
	// Status is the HTTP status code of the answer.
	Status int
	// Type is the error type, such as invalid_request_error or rate_limit_error.
	Type string
	// Code is the machine-readable error code, such as model_not_found, when
	// the envelope has one.
	Code string
	// Param names the offending request field, when there is one.
	Param string
	// Message is the human-readable message of the envelope, or the start of
	// the body when the answer was not a JSON error envelope.
	Message string
	// RequestID is the x-request-id (or request-id) of the answer, for support
	// requests.
	RequestID string
}

// Error describes the failure with its status, type, code, message and request id.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tollgate: %d", e.Status)
	if e.Type != "" {
		b.WriteString(" " + e.Type)
	}
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Param != "" {
		b.WriteString(" [param " + e.Param + "]")
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// Is reports whether target is [ErrModelNotFound] and the error is the
// gateway's model_not_found answer.
func (e *APIError) Is(target error) bool {
	return target == ErrModelNotFound && e.Code == "model_not_found"
}

// ErrorFromResponse returns nil for a 2xx answer and otherwise an [*APIError]
// built from the answer's status, headers and body. Pass the Body of a
// generated *WithResponse result (its HTTPResponse body is already consumed);
// when body is nil the error body is read from resp.Body, which is not closed.
func ErrorFromResponse(resp *http.Response, body []byte) error {
	if resp == nil {
		return errors.New("tollgate: no response")
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if body == nil && resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	}
	return newAPIError(resp.StatusCode, resp.Header, body)
}

// newAPIError parses an error answer into an APIError, tolerating bodies that
// are not a JSON envelope.
func newAPIError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{Status: status}
	var env struct {
		Error     json.RawMessage `json:"error"`
		RequestID string          `json:"request_id"`
	}
	parsed := false
	if err := json.Unmarshal(body, &env); err == nil && len(env.Error) > 0 && string(env.Error) != "null" {
		var inner struct {
			Message json.RawMessage `json:"message"`
			Type    json.RawMessage `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		if err := json.Unmarshal(env.Error, &inner); err == nil {
			e.Message = jsonText(inner.Message)
			e.Type = jsonText(inner.Type)
			e.Param = jsonText(inner.Param)
			e.Code = jsonText(inner.Code)
			parsed = true
		} else if s := jsonText(env.Error); s != "" {
			// {"error":"text"}, as some proxies answer.
			e.Message = s
			parsed = true
		}
	}
	if !parsed {
		e.Message = plainMessage(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.RequestID = header.Get("x-request-id")
	if e.RequestID == "" {
		e.RequestID = header.Get("request-id")
	}
	if e.RequestID == "" {
		e.RequestID = env.RequestID
	}
	return e
}

// jsonText renders a JSON value as text: a string without its quotes, null or
// absent as "", anything else (such as a numeric code) as its JSON text.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// plainMessage returns the start of a non-envelope error body as a message.
func plainMessage(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > maxPlainMessage {
		s = s[:maxPlainMessage]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}
