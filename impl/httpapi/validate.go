package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/readbody"
	"github.com/tollgate/tollgate/impl/reqschema"
)

// maxBodyBytes bounds a request body (the Messages API's own limit is 32 MB).
const maxBodyBytes = 32 << 20

// validator checks requests against the embedded OpenAPI document, with the request schemas
// compiled once by reqschema: a body is validated in one pass over its bytes. Operations are
// looked up by the ServeMux pattern that matched, so no second router runs.
type validator struct {
	operations map[string]*reqschema.Operation
	// budget bounds the large bodies read at once (nil: no bound; see bodyBudget).
	budget *bodyBudget
}

// newValidator compiles the document's operations and indexes them by "METHOD /path" patterns.
// It fails when the document uses a schema keyword, parameter or media type reqschema cannot
// validate, so that no part of a request goes unchecked.
func newValidator(doc *openapi3.T) (*validator, error) {
	ops, err := reqschema.Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("the embedded OpenAPI document cannot be validated: %w", err)
	}
	v := &validator{operations: make(map[string]*reqschema.Operation, len(ops))}
	for _, op := range ops {
		v.operations[op.Method+" "+op.Path] = op
	}
	return v, nil
}

// middleware validates the request of the matched operation; violations answer 400 naming the
// offending field. Unknown body fields, query parameters and enum-free values pass. A large
// body holds its share of the body budget until the request is done.
func (v *validator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease, err := v.validate(r)
		if err != nil {
			lease.release()
			writeError(w, r, err)
			return
		}
		if lease == nil {
			next.ServeHTTP(w, r)
			return
		}
		// The body, what was decoded from it and the upstream's copy of it live until the
		// handler returns (the transport keeps the upstream request until its answer is read).
		defer lease.release()
		next.ServeHTTP(w, r)
	})
}

// validate checks r; a large body's share of the budget is returned (nil for a small body),
// even with an error, and the caller releases it.
func (v *validator) validate(r *http.Request) (*bodyLease, error) {
	op, ok := v.operations[r.Pattern]
	if !ok {
		return nil, nil
	}
	var body []byte
	var lease *bodyLease
	var checked *checkedBody
	if op.HasBody() {
		var err error
		body, lease, err = v.readBody(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return lease, &apierror.Error{Kind: apierror.KindRequestTooLarge, Message: fmt.Sprintf("the request body exceeds %d bytes (32 MiB)", maxBodyBytes)}
			case errors.As(err, new(budgetSpent)):
				return lease, v.budget.refusal()
			case errors.Is(err, os.ErrDeadlineExceeded):
				// A stalled upload: the client is still there (the failed read ended the
				// request's context, but the client did not close), and gets its 400.
				return lease, clientStillThere{apierror.Invalid("", "could not read the request body: it stalled")}
			case r.ContentLength > 0 && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
				// The client stopped sending (a half-close) before the length it announced:
				// it may still be reading, and gets its 400.
				return lease, clientStillThere{apierror.Invalid("", "could not read the request body: it ended before the %d bytes its Content-Length announced", r.ContentLength)}
			}
			return lease, apierror.Invalid("", "could not read the request body")
		}
		if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			// The body is read (the connection stays usable) and refused: what arrived is
			// compressed, and every route reads JSON as it is.
			return lease, apierror.Invalid("", "the request body is encoded (Content-Encoding: %s): send it uncompressed, without Content-Encoding", ce)
		}
		// The handler reads the body again; validation only reads the bytes, and the view
		// of their top level that it reads goes with them.
		checked = newCheckedBody(body)
		r.Body = checked
		r.ContentLength = int64(len(body))
		if len(bytes.TrimSpace(body)) == 0 {
			return lease, apierror.Invalid("", "a JSON request body is required")
		}
		// curl -d, browsers' fetch with a string body and some clients send JSON without, or with
		// a form or text content type.
		if ct := r.Header.Get("Content-Type"); ct == "" || strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "text/plain") {
			r.Header.Set("Content-Type", "application/json")
		}
	}
	// Parameters first, then the body, as kin-openapi (the reference the messages come from)
	// checks them.
	if err := op.ValidateParameters(r); err != nil {
		return lease, describe(err)
	}
	// Strict: a string that is not valid UTF-8 is refused naming its field, not quietly
	// served with U+FFFD in place of its bytes (what strict SDKs expect; issue 23).
	if checked == nil {
		return lease, nil
	}
	if err := op.ValidateBodyView(r.Header.Get("Content-Type"), body, &checked.view); err != nil {
		return lease, describe(err)
	}
	if r.Pattern == "POST "+responsesPath {
		if input, ok := checked.view.Value("input"); ok {
			if err := checkResponsesInput(input); err != nil {
				return lease, err
			}
		}
	}
	return lease, nil
}

// checkResponsesInput refuses the input of a Responses request (its value's bytes, which the
// validator's pass found valid JSON) unless it is a string or an array of at least one input
// item, with a 400 naming 'input'. The request schema cannot say so: the input is a string or
// an array, which OpenAPI 3.0 says with oneOf, outside what reqschema validates, so the schema
// names no type, and without this an empty array or a number went upstream (an empty input is
// answered, and billed, by a Responses upstream). It reads the first bytes of the value only
// and allocates nothing for an input it accepts: it runs on every Responses request.
func checkResponsesInput(input []byte) error {
	i := jsonview.SkipSpace(input, 0)
	if i >= len(input) {
		return nil // no value: the schema's to refuse
	}
	switch input[i] {
	case '"':
		return nil
	case '[':
		if j := jsonview.SkipSpace(input, i+1); j < len(input) && input[j] != ']' {
			return nil
		}
		return apierror.Invalid("input", "invalid 'input': the array is empty: send at least one input item, or a string")
	case 'n':
		return nil // null: the schema's to refuse (it is not nullable)
	}
	return apierror.Invalid("input", "invalid 'input': expected a string or an array of input items, got %s", jsonKind(input))
}

// jsonKind names the kind of the JSON value v (valid JSON) for a refusal: "a string", "an
// array", "an object", "a boolean", "null" or "a number".
func jsonKind(v []byte) string {
	i := jsonview.SkipSpace(v, 0)
	if i >= len(v) {
		return "nothing"
	}
	switch v[i] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// clientStillThere marks an error answered although the request's context has ended: the read
// that ended it timed out, and the client is waiting for its answer (see writeError).
type clientStillThere struct{ error }

// Unwrap returns the error answered.
func (e clientStillThere) Unwrap() error { return e.error }

// readBody reads the request body, at most maxBodyBytes (beyond that the error is an
// *http.MaxBytesError). A body of more than largeBodyBytes is admitted against the budget: one
// with a Content-Length once its first largeBodyBytes have arrived (until then its buffer grows
// with what arrives, so a stalled upload holds little and none of the budget), for the whole
// length at once, and the rest is read in place into one buffer of that length; one without a
// Content-Length as its bytes arrive beyond largeBodyBytes. One announcing more than
// maxBodyBytes is refused unread. When the budget stays spent the error is a budgetSpent. The lease is returned
// whenever it holds something, with or without an error; nil for a small body.
func (v *validator) readBody(r *http.Request) ([]byte, *bodyLease, error) {
	return v.read(r.Context(), r.Body, r.ContentLength)
}

// read is readBody of any body: n bytes long (-1: unknown, as a WebSocket message's), the
// budget waited for until ctx ends.
func (v *validator) read(ctx context.Context, r io.Reader, n int64) ([]byte, *bodyLease, error) {
	if n > maxBodyBytes {
		// Refused on its announced length, unread: a client that asked `Expect: 100-continue`
		// is answered 413 before it uploads (trial h5: it got 100 Continue, then 32 MiB were
		// read before the 413).
		return nil, nil, &http.MaxBytesError{Limit: maxBodyBytes}
	}
	br := &bodyReader{r: r, limit: maxBodyBytes}
	if v.budget == nil || (n >= 0 && n <= largeBodyBytes) {
		body, err := readbody.Append(nil, br, n, maxBodyBytes)
		return body, nil, err
	}
	br.lease = newBodyLease(v.budget, ctx)
	lease := &br.lease
	if n < 0 {
		body, err := readbody.Append(nil, br, n, maxBodyBytes)
		if lease.held == 0 {
			lease = nil
		}
		return body, lease, err
	}
	head, err := readbody.Append(nil, io.LimitReader(br, largeBodyBytes), largeBodyBytes, largeBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	if !lease.admit(n) {
		return nil, nil, budgetSpent{}
	}
	// One more byte of room holds readbody.Append's probe for the body's end.
	body := append(make([]byte, 0, n+1), head...)
	body, err = readbody.Append(body, br, n-int64(len(head)), maxBodyBytes)
	return body, lease, err
}

// describe turns a reqschema error into a 400 naming the offending field.
func describe(err error) *apierror.Error {
	var e *reqschema.Error
	if !errors.As(err, &e) {
		return apierror.Invalid("", "invalid request")
	}
	switch e.Kind {
	case reqschema.BodySyntax:
		return apierror.Invalid("", "%s", e.Reason)
	case reqschema.BodySchema:
		param := jsonPath(e.Pointer)
		switch {
		case e.Required:
			return apierror.Invalid(param, "'%s' is required", param)
		case e.Keyword == "nullable" && param == "":
			return apierror.Invalid("", "invalid request body: it must not be null")
		case e.Keyword == "nullable":
			return apierror.Invalid(param, "invalid '%s': must not be null (give a value, or leave an optional field out)", param)
		case e.Keyword == "type" && e.Reason == reqschema.ReasonNumberOutOfRange:
			return apierror.Invalid(param, "invalid '%s': the number is out of range", param)
		}
		if e.Keyword == "utf8" {
			if param == "" {
				return apierror.Invalid("", "the request body holds a string that is not valid UTF-8: send text encoded as UTF-8")
			}
			return apierror.Invalid(param, "invalid '%s': the string is not valid UTF-8: send text encoded as UTF-8", param)
		}
		if param == "" {
			return apierror.Invalid("", "invalid request body: %s", e.Reason)
		}
		return apierror.Invalid(param, "invalid '%s': %s", param, e.Reason)
	case reqschema.Parameter:
		return apierror.Invalid(e.Parameter, "invalid parameter '%s': %s", e.Parameter, e.Reason)
	}
	return apierror.Invalid("", "invalid request: %s", e.Reason)
}

// jsonPath writes a JSON pointer as a field path: ["messages","0","role"] → messages[0].role.
func jsonPath(pointer []string) string {
	var b strings.Builder
	for _, p := range pointer {
		if _, err := strconv.Atoi(p); err == nil && b.Len() > 0 {
			fmt.Fprintf(&b, "[%s]", p)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
