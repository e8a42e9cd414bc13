package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tollgate/tollgate/gen/api"
)

// spec is the embedded OpenAPI document with a ServeMux that finds an operation by request.
type spec struct {
	doc    *openapi3.T
	mux    *http.ServeMux
	routes map[string]*routers.Route
}

var (
	specOnce sync.Once
	specVal  *spec
	specErr  error
)

func loadSpec() (*spec, error) {
	specOnce.Do(func() {
		doc, err := api.GetSwagger()
		if err != nil {
			specErr = err
			return
		}
		s := &spec{doc: doc, mux: http.NewServeMux(), routes: map[string]*routers.Route{}}
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				pattern := method + " " + path
				s.routes[pattern] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
				s.mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
			}
		}
		specVal = s
	})
	return specVal, specErr
}

// Operations lists every operation of the embedded document that needs a credential, as
// "METHOD /path": all but those that declare no security (`security: []`, the OAuth
// authorization server's metadata and endpoints, which the web console brings).
func Operations(t testing.TB) []string {
	s, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p, r := range s.routes {
		if sec := r.Operation.Security; sec != nil && len(*sec) == 0 {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ValidatingTransport checks every response against the OpenAPI document: that its status is
// documented for the operation, and that its body matches the documented schema. Server-sent
// event streams are checked event by event against the schema named by x-sse-event-schema.
type ValidatingTransport struct {
	t    testing.TB
	base http.RoundTripper
}

// NewValidatingTransport wraps base.
func NewValidatingTransport(t testing.TB, base http.RoundTripper) *ValidatingTransport {
	return &ValidatingTransport{t: t, base: base}
}

// RoundTrip implements http.RoundTripper.
func (v *ValidatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := v.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	s, err := loadSpec()
	if err != nil {
		v.t.Errorf("load spec: %v", err)
		return res, nil
	}
	_, pattern := s.mux.Handler(req)
	route := s.routes[pattern]
	if route == nil {
		v.t.Errorf("%s %s: not an operation of the OpenAPI document", req.Method, req.URL.Path)
		return res, nil
	}
	if ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); ct == "text/event-stream" {
		res.Body = &sseValidator{t: v.t, op: pattern, doc: s.doc, route: route, r: bufio.NewReader(res.Body), body: res.Body}
		return res, nil
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return res, err
	}
	validateResponse(v.t, route, req, res, body)
	return res, nil
}

// validateResponse checks res, whose body is body, against the operation route of req.
func validateResponse(t testing.TB, route *routers.Route, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	params := map[string]string{}
	for _, p := range route.Operation.Parameters {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
			// Recover path values by matching the pattern segments.
			params[p.Value.Name] = pathValue(route.Path, req.URL.Path, p.Value.Name)
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  res.StatusCode,
		Header:  res.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: response %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL.Path, res.StatusCode, err, truncate(body))
	}
}

// ValidateAnswer checks res, read by the test itself (a raw request's answer, such as a
// refused head's), whose body is body, against the operation "METHOD /path" of the document:
// that its status is documented there and its body matches the documented schema.
func ValidateAnswer(t testing.TB, operation string, res *http.Response, body []byte) {
	t.Helper()
	s, err := loadSpec()
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	route := s.routes[operation]
	if route == nil {
		t.Fatalf("%s: not an operation of the OpenAPI document", operation)
	}
	method, path, _ := strings.Cut(operation, " ")
	req, err := http.NewRequest(method, "http://gateway"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	validateResponse(t, route, req, res, body)
}

func pathValue(pattern, path, name string) string {
	ps, vs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, seg := range ps {
		if seg == "{"+name+"}" && i < len(vs) {
			return vs[i]
		}
	}
	return ""
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// sseValidator passes a stream through while checking each data event.
type sseValidator struct {
	t     testing.TB
	op    string
	doc   *openapi3.T
	route *routers.Route
	r     *bufio.Reader
	body  io.ReadCloser
	line  bytes.Buffer
}

func (s *sseValidator) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			s.check(s.line.String())
			s.line.Reset()
			continue
		}
		s.line.WriteByte(c)
	}
	return n, err
}

func (s *sseValidator) Close() error { return s.body.Close() }

func (s *sseValidator) check(line string) {
	data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r"), "data:")
	if !ok {
		return
	}
	data = strings.TrimPrefix(data, " ")
	if data == "[DONE]" {
		return
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		s.t.Errorf("%s: SSE data is not JSON: %q", s.op, data)
		return
	}
	name := s.eventSchema()
	if m, ok := v.(map[string]any); ok {
		if _, isErr := m["error"]; isErr {
			name = "OpenAIError"
			if m["type"] == "error" {
				name = "AnthropicError"
			}
		}
	}
	ref := s.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		s.t.Errorf("%s: no component schema %q for SSE events", s.op, name)
		return
	}
	if err := ref.Value.VisitJSON(v); err != nil {
		s.t.Errorf("%s: SSE event does not match %s: %v\n%s", s.op, name, err, data)
	}
}

func (s *sseValidator) eventSchema() string {
	resp := s.route.Operation.Responses.Status(200)
	if resp == nil || resp.Value == nil {
		return ""
	}
	mt := resp.Value.Content.Get("text/event-stream")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return ""
	}
	name, _ := mt.Schema.Value.Extensions["x-sse-event-schema"].(string)
	return name
}

// ValidateSchema checks body against the OpenAPI document's component schema name (such as
// AnthropicError), for an answer no operation documents: one the server writes itself to a
// request head it will not read on, before any route.
func ValidateSchema(t testing.TB, name string, body []byte) {
	t.Helper()
	s, err := loadSpec()
	if err != nil {
		t.Fatalf("load spec: %v", err)
	}
	ref := s.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("no component schema %q", name)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("not JSON (%v): %s", err, truncate(body))
		return
	}
	if err := ref.Value.VisitJSON(v); err != nil {
		t.Errorf("does not match %s: %v\n%s", name, err, truncate(body))
	}
}
