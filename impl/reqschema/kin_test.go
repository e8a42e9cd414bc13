package reqschema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/tollgate/tollgate/gen/api"
)

// This file holds the harness that puts a request to both kin-openapi (the reference) and this
// package, and reduces what each concludes to a verdict that can be compared.

// verdict is what a validator concluded about a request: accepted (Kind 0), or the kind of
// fault, where, and why.
type verdict struct {
	Kind      ErrorKind
	Pointer   string // the JSON pointer tokens, joined by "/"
	Keyword   string
	Reason    string
	Parameter string
}

// subject is one operation of a test document, as kin-openapi routes it and as compiled here.
type subject struct {
	name   string // "document: METHOD path"
	route  *routers.Route
	op     *Operation
	header http.Header // a Content-Type and every declared header parameter
	path   string      // the request path: every path parameter is "p"
	params []string    // names of the path parameters
}

// subjects compiles the gateway's embedded document and testdata/keywords.yaml.
func subjects(t testing.TB) []subject {
	t.Helper()
	embedded, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/keywords.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keywords, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := keywords.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []subject
	for name, doc := range map[string]*openapi3.T{"embedded": embedded, "keywords.yaml": keywords} {
		ops, err := Compile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			item := doc.Paths.Value(op.Path)
			kinOp := item.GetOperation(op.Method)
			s := subject{
				name:   name + ": " + op.Method + " " + op.Path,
				route:  &routers.Route{Spec: doc, Path: op.Path, PathItem: item, Method: op.Method, Operation: kinOp},
				op:     op,
				header: http.Header{"Content-Type": {"application/json"}},
				path:   pathParam.ReplaceAllString(op.Path, "p"),
			}
			for _, p := range append(append(openapi3.Parameters{}, item.Parameters...), kinOp.Parameters...) {
				switch p.Value.In {
				case openapi3.ParameterInHeader:
					s.header.Set(p.Value.Name, "v")
				case openapi3.ParameterInPath:
					s.params = append(s.params, p.Value.Name)
				}
			}
			out = append(out, s)
		}
	}
	return out
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// request builds the request s receives, with header (nil: s.header) and body.
func (s subject) request(header http.Header, body []byte) *http.Request {
	r, err := http.NewRequest(s.op.Method, "http://gateway"+s.path, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	if header == nil {
		header = s.header
	}
	r.Header = header.Clone()
	for _, name := range s.params {
		r.SetPathValue(name, "p")
	}
	return r
}

// kin is kin-openapi's verdict on the request, as impl/httpapi used to ask for it. A body that
// is not exactly one JSON value is a syntax error even where kin-openapi reads only its first
// value: the one deliberate difference.
func (s subject) kin(t testing.TB, r *http.Request, body []byte) verdict {
	t.Helper()
	params := map[string]string{}
	for _, name := range s.params {
		params[name] = r.PathValue(name)
	}
	err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: s.route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
	v := kinVerdict(t, err)
	if s.op.HasBody() && (v.Kind == 0 || v.Kind == BodySchema) && !json.Valid(body) {
		return verdict{Kind: BodySyntax}
	}
	if v.Kind == BodySyntax && json.Valid(body) {
		t.Fatalf("kin-openapi finds valid JSON invalid: %q", body)
	}
	return v
}

func kinVerdict(t testing.TB, err error) verdict {
	t.Helper()
	if err == nil {
		return verdict{}
	}
	var reqErr *openapi3filter.RequestError
	if !errors.As(err, &reqErr) {
		t.Fatalf("kin-openapi: unexpected error %T %v", err, err)
	}
	var parseErr *openapi3filter.ParseError
	if errors.As(reqErr.Err, &parseErr) || strings.Contains(reqErr.Error(), "failed to decode request body") {
		return verdict{Kind: BodySyntax}
	}
	var schemaErr *openapi3.SchemaError
	if errors.As(reqErr.Err, &schemaErr) && reqErr.Parameter == nil {
		return verdict{Kind: BodySchema, Pointer: strings.Join(schemaErr.JSONPointer(), "/"), Keyword: schemaErr.SchemaField, Reason: schemaErr.Reason}
	}
	if reqErr.Parameter != nil {
		return verdict{Kind: Parameter, Parameter: reqErr.Parameter.Name, Reason: reqErr.Reason}
	}
	if strings.HasPrefix(reqErr.Reason, "header Content-Type has unexpected value") {
		return verdict{Kind: ContentType, Reason: reqErr.Reason}
	}
	t.Fatalf("kin-openapi: unexpected error %v", err)
	return verdict{}
}

// ours is this package's verdict on the request, asked as impl/httpapi asks.
func (s subject) ours(t testing.TB, r *http.Request, body []byte) verdict {
	t.Helper()
	err := s.op.ValidateParameters(r)
	if err == nil {
		err = s.op.ValidateBody(r.Header.Get("Content-Type"), body)
	}
	if err == nil {
		return verdict{}
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not an *Error: %T %v", err, err)
	}
	if e.Required != (e.Keyword == "required") {
		t.Fatalf("Required %v with keyword %q", e.Required, e.Keyword)
	}
	if e.Kind == BodySyntax {
		return verdict{Kind: BodySyntax} // kin-openapi's reason is encoding/json's
	}
	return verdict{Kind: e.Kind, Pointer: strings.Join(e.Pointer, "/"), Keyword: e.Keyword, Reason: e.Reason, Parameter: e.Parameter}
}

// compare asserts that kin-openapi and this package agree on the request s receives with header
// (nil: s.header) and body.
func (s subject) compare(t testing.TB, header http.Header, body []byte) {
	t.Helper()
	want := s.kin(t, s.request(header, body), body)
	got := s.ours(t, s.request(header, body), body)
	if got != want {
		t.Errorf("%s, body %s:\n kin-openapi %+v\n reqschema   %+v", s.name, abbreviate(body), want, got)
	}
}

func abbreviate(body []byte) string {
	if len(body) > 300 {
		return strings.ToValidUTF8(string(body[:150]), "?") + "…" + strings.ToValidUTF8(string(body[len(body)-150:]), "?")
	}
	return strings.ToValidUTF8(string(body), "?")
}
