package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/reqschema"
)

// TestValidationMessagesMatchKin: the validator answers every request as the kin-openapi based
// validation it replaced did (same status, param and message), except that text after the JSON
// body is now refused as invalid JSON.
func TestValidationMessagesMatchKin(t *testing.T) {
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := newValidator(doc)
	if err != nil {
		t.Fatal(err)
	}
	reference := newKinValidator(doc)
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	type call struct {
		pattern, path, contentType, body string
		header                           map[string]string
	}
	calls := []call{
		// impl/httpapi/validation_test.go's cases.
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"service-flint"}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"service-flint","messages":"hi"}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"service-flint","messages":[{"content":"hi"}]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}],"temperature":7}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}],"max_tokens":"many"}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", ` `, nil},
		{"POST /v1/responses", "/v1/responses", "application/json", `{"model":"service-flint"}`, nil},
		{"POST /v1/messages", "/v1/messages", "application/json", `{"model":"service-sonnet","messages":[{"role":"user","content":"hi"}]}`, nil},
		{"POST /v1/messages", "/v1/messages", "application/json", `{"model":"service-sonnet","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, nil},
		{"POST /v1/agents", "/v1/agents", "application/json", `{"prompt":"x"}`, nil},
		{"POST /v1/agents/{slot}/messages", "/v1/agents/slot-1/messages", "application/json", `{}`, nil},
		// More of each message form.
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"m","messages":[{"role":"user"},{"role":3}]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"m","messages":[]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":null,"messages":[{"role":"user"}]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"","messages":[{"role":"user"}]}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"m","messages":[{"role":"user"}],"max_tokens":1.5,"n":1e400}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"m","messages":[{"role":"user"}],"max_tokens":1e2}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `[]`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `null`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `"hi"`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", `{"model":"m","messages":[{"role":"user"}],}`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "text/plain;charset=UTF-8", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/x-www-form-urlencoded", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "Application/JSON; charset=utf-8", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/xml", chat, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/vnd.api+json", `{"model":`, nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", "\t\r\n", nil},
		{"POST /v1/chat/completions", "/v1/chat/completions", "application/json", strings.Repeat(" ", maxBodyBytes+1), nil},
		{"POST /v1/responses", "/v1/responses", "application/json", `{"model":"m","input":null}`, nil},
		{"POST /v1/responses", "/v1/responses", "application/json", `{"model":"m","input":"x","tools":[{"type":1}]}`, nil},
		{"POST /v1/messages", "/v1/messages", "application/json", `{"model":"m","max_tokens":1,"messages":[{"role":"user"}]}`, map[string]string{"anthropic-version": ""}},
		{"POST /v1/messages", "/v1/messages", "application/json", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"top_k":-1}`, map[string]string{"anthropic-beta": "x"}},
		{"POST /api/mcp", "/api/mcp", "application/json", `{"jsonrpc":"1.0","method":"m"}`, nil},
		{"POST /api/mcp", "/api/mcp", "application/json", `{"jsonrpc":"2.0","method":"m","params":[]}`, nil},
		{"GET /v1/models/{model}", "/v1/models/service-flint", "", "", nil},
		{"GET /v1/models", "/v1/models", "", "", nil},
		{"DELETE /v1/agents/{slot}", "/v1/agents/slot-1", "", "", nil},
		{"DELETE /v1/agents/{slot}", "/v1/agents/slot-1", "", "", map[string]string{"Idempotency-Key": "k-1"}},
		{"GET /v1/agents/{slot}/events", "/v1/agents/slot-1/events", "", "", nil},
		{"GET /v1/agents/{slot}/events", "/v1/agents/slot-1/events?after=3", "", "", map[string]string{"Last-Event-ID": "2"}},
		{"GET /v1/agents/{slot}/events", "/v1/agents/slot-1/events?after=", "", "", nil},
		{"GET /v1/agents/{slot}/events", "/v1/agents/slot-1/events?after", "", "", nil},
		{"GET /not/an/operation", "/not/an/operation", "", "", nil},
	}
	for _, c := range calls {
		request := func() *http.Request {
			method, _, _ := strings.Cut(c.pattern, " ")
			var body io.Reader = http.NoBody
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			r, err := http.NewRequest(method, "http://gateway"+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			r.Pattern = c.pattern
			if strings.Contains(c.pattern, "{slot}") {
				r.SetPathValue("slot", "slot-1")
			}
			if strings.Contains(c.pattern, "{model}") {
				r.SetPathValue("model", "service-flint")
			}
			if c.contentType != "" {
				r.Header.Set("Content-Type", c.contentType)
			}
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			return r
		}
		r := request()
		_, got := ours.validate(r)
		want := reference.validate(request())
		if !sameError(got, want) {
			t.Errorf("%s %.80q (%s): got %v, want %v", c.pattern, c.body, c.contentType, describeForTest(got), describeForTest(want))
		}
		// The handler still reads the whole body.
		if c.body != "" && len(c.body) <= maxBodyBytes {
			if b, err := io.ReadAll(r.Body); err != nil || string(b) != c.body {
				t.Errorf("%s %.80q: the handler would read %.80q (%v)", c.pattern, c.body, b, err)
			}
		}
	}

	// The one difference: text after the JSON value.
	r, _ := http.NewRequest("POST", "http://gateway/v1/chat/completions", strings.NewReader(chat+` {"x":1}`))
	r.Pattern = "POST /v1/chat/completions"
	r.Header.Set("Content-Type", "application/json")
	if _, err := ours.validate(r); !sameError(err, apierror.Invalid("", "the request body is not valid JSON: unexpected character '{' (line 1, column 59)")) {
		t.Errorf("trailing text: %v", describeForTest(err))
	}
}

// sameError reports whether a, this package's error, is b, kin-openapi's as described before,
// with the three messages this package words more precisely: a syntax error says where (the
// reference's message is its beginning), a null names itself, and so does a number beyond
// float64's range.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, y := apierror.As(a), apierror.As(b)
	want := y.Message
	switch {
	case want == "the request body is not valid JSON":
		return x.Kind == y.Kind && x.Param == "" && strings.HasPrefix(x.Message, want+": ")
	case want == "invalid request body: Value is not nullable":
		want = "invalid request body: it must not be null"
	case strings.HasSuffix(want, ": Value is not nullable"):
		want = fmt.Sprintf("invalid '%s': must not be null (give a value, or leave an optional field out)", y.Param)
	case strings.HasSuffix(want, ": "+reqschema.ReasonNumberOutOfRange):
		want = fmt.Sprintf("invalid '%s': the number is out of range", y.Param)
	}
	return x.Kind == y.Kind && x.Param == y.Param && x.Message == want
}

func describeForTest(err error) string {
	if err == nil {
		return "accepted"
	}
	e := apierror.As(err)
	return "param " + e.Param + ": " + e.Message
}

// kinValidator is the validation this package did before reqschema, kept as the reference for
// the messages: kin-openapi's ValidateRequest, its errors described as they were.
type kinValidator struct {
	routes  map[string]*routers.Route
	options *openapi3filter.Options
}

func newKinValidator(doc *openapi3.T) *kinValidator {
	v := &kinValidator{
		routes:  map[string]*routers.Route{},
		options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			v.routes[method+" "+path] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	return v
}

func (v *kinValidator) validate(r *http.Request) error {
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
				return &apierror.Error{Kind: apierror.KindRequestTooLarge, Message: fmt.Sprintf("the request body exceeds %d bytes (32 MiB)", maxBodyBytes)}
			}
			return apierror.Invalid("", "could not read the request body")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		if len(bytes.TrimSpace(body)) == 0 {
			return apierror.Invalid("", "a JSON request body is required")
		}
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
	return describeKin(err)
}

func describeKin(err error) *apierror.Error {
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
