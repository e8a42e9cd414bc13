package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tollgate/tollgate/impl/apierror"
)

// maxBodyBytes bounds a request body (the Messages API's own limit is 32 MB).
const maxBodyBytes = 32 << 20

// validator checks requests against the embedded OpenAPI document. Routes are looked up by the
// ServeMux pattern that matched, so no second router runs.
type validator struct {
	routes  map[string]*routers.Route
	options *openapi3filter.Options
}

// newValidator indexes the document's operations by "METHOD /path" patterns.
func newValidator(doc *openapi3.T) *validator {
	v := &validator{
		routes: map[string]*routers.Route{},
		options: &openapi3filter.Options{
			// Authentication is done by our own middleware before validation.
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		},
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v.routes[method+" "+path] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return v
}

// middleware validates the request of the matched operation; violations answer 400 naming the
// offending field. Unknown body fields, query parameters and enum-free values pass.
func (v *validator) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := v.validate(r); err != nil {
			writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (v *validator) validate(r *http.Request) error {
	route, ok := v.routes[r.Pattern]
	if !ok {
		return nil
	}
	params := map[string]string{}
	for _, p := range route.Operation.Parameters {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
			params[p.Value.Name] = r.PathValue(p.Value.Name)
		}
	}
	if route.Operation.RequestBody != nil {
		body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return apierror.Invalid("", "request body exceeds %d bytes", maxBodyBytes)
			}
			return apierror.Invalid("", "could not read the request body")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if len(bytes.TrimSpace(body)) == 0 {
			return apierror.Invalid("", "a JSON request body is required")
		}
		// curl -d, browsers' fetch with a string body and some clients send JSON without, or with
		// a form or text content type.
		if ct := r.Header.Get("Content-Type"); ct == "" || strings.HasPrefix(ct, "application/x-www-form-urlencoded") || strings.HasPrefix(ct, "text/plain") {
			r.Header.Set("Content-Type", "application/json")
		}
		defer func() { r.Body = io.NopCloser(bytes.NewReader(body)) }()
	}
	err := openapi3filter.ValidateRequest(context.WithoutCancel(r.Context()), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route, Options: v.options,
	})
	if err == nil {
		return nil
	}
	return describe(err)
}

// describe turns a kin-openapi validation error into a 400 naming the offending field.
func describe(err error) *apierror.Error {
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		return apierror.Invalid("", "invalid request")
	}
	var parseErr *openapi3filter.ParseError
	if errors.As(reqErr.Err, &parseErr) || strings.Contains(reqErr.Error(), "failed to decode request body") {
		return apierror.Invalid("", "the request body is not valid JSON")
	}
	var schemaErr *openapi3.SchemaError
	if errors.As(reqErr.Err, &schemaErr) {
		param := jsonPath(schemaErr.JSONPointer())
		if reqErr.Parameter != nil {
			param = reqErr.Parameter.Name
		}
		if schemaErr.SchemaField == "required" {
			return apierror.Invalid(param, "'%s' is required", param)
		}
		if param == "" {
			return apierror.Invalid("", "invalid request body: %s", schemaErr.Reason)
		}
		return apierror.Invalid(param, "invalid '%s': %s", param, schemaErr.Reason)
	}
	if reqErr.Parameter != nil {
		return apierror.Invalid(reqErr.Parameter.Name, "invalid parameter '%s': %s", reqErr.Parameter.Name, reqErr.Reason)
	}
	if reqErr.Reason != "" {
		return apierror.Invalid("", "invalid request: %s", reqErr.Reason)
	}
	return apierror.Invalid("", "invalid request")
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
