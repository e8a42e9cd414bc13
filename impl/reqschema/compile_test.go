package reqschema

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/gen/api"
)

// TestEmbeddedDocumentCompiles: every operation of the gateway's own document compiles, with a
// body schema wherever the document declares a request body.
func TestEmbeddedDocumentCompiles(t *testing.T) {
	doc, err := api.GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := Compile(doc)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			count++
			compiled := find(ops, method, path)
			if compiled == nil {
				t.Errorf("%s %s was not compiled", method, path)
				continue
			}
			if compiled.HasBody() != (op.RequestBody != nil) {
				t.Errorf("%s %s: HasBody %v, the document declares a body: %v", method, path, compiled.HasBody(), op.RequestBody != nil)
			}
		}
	}
	if count != len(ops) {
		t.Errorf("%d operations compiled, the document has %d", len(ops), count)
	}
}

func find(ops []*Operation, method, path string) *Operation {
	for _, op := range ops {
		if op.Method == method && op.Path == path {
			return op
		}
	}
	return nil
}

// compileSchema compiles a document whose one operation has a body of the given schema (YAML,
// indented for its place) and components.
func compileSchema(t *testing.T, schema, components string) error {
	t.Helper()
	return compileDocument(t, `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x:
    post:
      requestBody:
        content:
          application/json:
            schema: `+schema+`
      responses: {'200': {description: ok}}
components:
  schemas:
    Self: {type: object}
`+components)
}

func compileDocument(t *testing.T, yaml string) error {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(yaml))
	if err != nil {
		t.Fatalf("load: %v\n%s", err, yaml)
	}
	_, err = Compile(doc)
	return err
}

// TestUnsupportedKeywordsFailCompilation: a keyword the validator does not implement, wherever
// it is in a request body schema, fails compilation naming the keyword and the schema.
func TestUnsupportedKeywordsFailCompilation(t *testing.T) {
	cases := []struct{ schema, components, want string }{
		{`{type: string, format: date-time}`, "", `"format"`},
		{`{type: string, pattern: "^a"}`, "", `"pattern"`},
		{`{type: array, maxItems: 3}`, "", `"maxItems"`},
		{`{type: array, uniqueItems: true}`, "", `"uniqueItems"`},
		{`{type: number, multipleOf: 2}`, "", `"multipleOf"`},
		{`{type: number, minimum: 0, exclusiveMinimum: true}`, "", `"exclusiveMinimum"`},
		{`{type: number, maximum: 0, exclusiveMaximum: true}`, "", `"exclusiveMaximum"`},
		{`{type: object, minProperties: 1}`, "", `"minProperties"`},
		{`{type: object, maxProperties: 1}`, "", `"maxProperties"`},
		{`{type: object, additionalProperties: false}`, "", `"additionalProperties: false"`},
		{`{type: object, additionalProperties: {type: string}}`, "", `"additionalProperties"`},
		{`{oneOf: [{type: string}, {type: integer}]}`, "", `"oneOf"`},
		{`{anyOf: [{type: string}]}`, "", `"anyOf"`},
		{`{allOf: [{type: string}]}`, "", `"allOf"`},
		{`{not: {type: string}}`, "", `"not"`},
		{`{type: string, default: x}`, "", `"default"`},
		{`{type: string, readOnly: true}`, "", `"readOnly"`},
		{`{type: string, writeOnly: true}`, "", `"writeOnly"`},
		{`{type: integer, enum: [1, 2]}`, "", "only strings"},
		{`{type: object, properties: {a: {type: object, properties: {b: {type: string, format: email}}}}}`, "", `/properties/a/properties/b: schema keyword "format"`},
		{`{type: array, items: {$ref: '#/components/schemas/Bad'}}`, "    Bad: {type: string, pattern: x}\n", `#/components/schemas/Bad: schema keyword "pattern"`},
		{`{type: string, format: uuid, pattern: x}`, "", `"format", "pattern"`},
		{`{$ref: '#/components/schemas/Loop'}`, "    Loop: {properties: {next: {$ref: '#/components/schemas/Loop'}}}\n", "recursive schema"},
	}
	for _, tc := range cases {
		err := compileSchema(t, tc.schema, tc.components)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %s", tc.schema, err, tc.want)
		}
	}
	// What is supported compiles, recursion through a typed schema included.
	for _, schema := range []string{
		`{type: object, additionalProperties: true, required: [a], properties: {a: {type: string, minLength: 1, maxLength: 9, nullable: true, description: d, example: x}}}`,
		`{$ref: '#/components/schemas/Self'}`,
		`{type: array, minItems: 1, items: {type: number, minimum: 0, maximum: 1}}`,
		`{enum: [a, b], title: t, deprecated: true, externalDocs: {url: 'http://x'}, x-anything: 1}`,
	} {
		if err := compileSchema(t, schema, "    Tree: {type: object, properties: {kids: {type: array, items: {$ref: '#/components/schemas/Tree'}}}}\n"); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
}

// TestUnsupportedRequestsFailCompilation: parameters, media types and documents the validator
// does not handle fail compilation.
func TestUnsupportedRequestsFailCompilation(t *testing.T) {
	operation := func(parameters, content string) string {
		return `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /x/{id}:
    post:
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
` + parameters + `      requestBody:
        content:
` + content + `      responses: {'200': {description: ok}}
`
	}
	json := "          application/json: {schema: {type: object}}\n"
	cases := []struct{ document, want string }{
		{operation("        - {name: q, in: query, schema: {type: integer}}\n", json), "{type: string}"},
		{operation("        - {name: c, in: cookie, schema: {type: string}}\n", json), "only path, query and header parameters"},
		{operation("        - {name: h, in: header, schema: {type: integer}}\n", json), "{type: string}"},
		{operation("        - {name: h, in: header, schema: {type: string, minLength: 1}}\n", json), "{type: string}"},
		{operation("        - {name: h, in: header, content: {application/json: {schema: {type: string}}}}\n", json), "not content"},
		{operation("", "          text/plain: {schema: {type: string}}\n"), `media type "text/plain"`},
		{operation("", json+"          application/xml: {schema: {type: object}}\n"), "only one media type"},
		{operation("", "          application/json: {}\n"), "no schema"},
		{strings.Replace(operation("", json), "3.0.3", "3.1.0", 1), "only 3.0"},
	}
	for _, tc := range cases {
		if err := compileDocument(t, tc.document); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one mentioning %q, for\n%s", err, tc.want, tc.document)
		}
	}
}

// TestEmptinessMatchesKin: the compiler's judgement of which schemas constrain nothing is
// kin-openapi's Schema.IsEmpty, for every schema of both test documents.
func TestEmptinessMatchesKin(t *testing.T) {
	for _, s := range subjects(t) {
		c := &compiler{nodes: map[*openapi3.Schema]*node{}}
		if _, err := c.operation(s.op.Path, s.route.PathItem, s.op.Method, s.route.Operation); err != nil {
			t.Fatal(err)
		}
		if err := c.settle(); err != nil {
			t.Fatal(err)
		}
		for schema, n := range c.nodes {
			if n.empty != schema.IsEmpty() {
				t.Errorf("%s: %s: empty %v, kin-openapi says %v", s.name, n.where, n.empty, schema.IsEmpty())
			}
		}
	}
}
