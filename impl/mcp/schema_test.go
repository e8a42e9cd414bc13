package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestDatasetInputSchemasComeFromTheContract checks that each dataset tool's input schema is the
// OpenAPI component of the same contract, converted, with what MCP clients require.
func TestDatasetInputSchemasComeFromTheContract(t *testing.T) {
	components := map[string]string{
		ToolListStorageDatasets: "ListStorageDatasetsInput",
		ToolLoadStorageDataset:  "LoadStorageDatasetInput",
		ToolQueryDatasets:       "QueryDatasetsInput",
		ToolQuerySchema:         "QuerySchemaInput",
		ToolQueryData:           "QueryDataInput",
	}
	tools := DatasetTools(newFakeDatasets())
	if len(tools) != len(components) {
		t.Fatalf("%d dataset tools, want %d", len(tools), len(components))
	}
	for _, tool := range tools {
		name, ok := components[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		want, err := ComponentSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(tool.InputSchema) != string(want) {
			t.Errorf("%s: input schema %s is not component %s %s", tool.Name, tool.InputSchema, name, want)
		}
		if err := checkObjectSchema(tool.InputSchema); err != nil {
			t.Errorf("%s: %v", tool.Name, err)
		}
		if !tool.Annotations.ReadOnly {
			t.Errorf("%s: not read-only", tool.Name)
		}
	}

	got, err := ComponentSchema("LoadStorageDatasetInput")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatal(err)
	}
	props, _ := s["properties"].(map[string]any)
	wantTypes := map[string]string{"name": "string", "columns": "array", "limit": "integer", "filter": "string"}
	for prop, typ := range wantTypes {
		p, _ := props[prop].(map[string]any)
		if p["type"] != typ || p["description"] == "" {
			t.Errorf("property %s = %v, want type %s with a description", prop, p, typ)
		}
	}
	if limit, _ := props["limit"].(map[string]any); limit["minimum"] != 1.0 {
		t.Errorf("limit minimum = %v", limit["minimum"])
	}
	if items, _ := props["columns"].(map[string]any)["items"].(map[string]any); items["type"] != "string" {
		t.Errorf("columns items = %v", items)
	}
	if !reflect.DeepEqual(s["required"], []any{"name"}) || s["additionalProperties"] != false || s["type"] != "object" {
		t.Errorf("schema %s", got)
	}
}

// TestComponentSchemaConversion checks the OpenAPI 3.0 to JSON Schema conversion on a document
// that uses the keywords that differ.
func TestComponentSchemaConversion(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(`
openapi: 3.0.3
info: {title: t, version: "1"}
paths: {}
components:
  schemas:
    Inner:
      type: string
      nullable: true
      enum: [a, b]
      example: a
      x-internal: true
    Outer:
      type: object
      required: [inner]
      additionalProperties: false
      properties:
        inner: {$ref: '#/components/schemas/Inner'}
        count:
          type: integer
          minimum: 0
          exclusiveMinimum: true
          maximum: 10
          exclusiveMaximum: false
        list:
          type: array
          items: {$ref: '#/components/schemas/Inner'}
        either:
          oneOf:
            - {$ref: '#/components/schemas/Inner'}
            - {type: integer}
    Empty:
      type: object
    Loop:
      type: object
      properties:
        next: {$ref: '#/components/schemas/Loop'}
`))
	if err != nil {
		t.Fatal(err)
	}
	convert := func(name string) (map[string]any, error) {
		c := converter{schemas: doc.Components.Schemas, active: map[string]bool{}}
		return c.component(name)
	}
	got, err := convert("Outer")
	if err != nil {
		t.Fatal(err)
	}
	inner := map[string]any{"type": []any{"string", "null"}, "enum": []any{"a", "b", nil}, "examples": []any{"a"}}
	want := map[string]any{
		"type":                 "object",
		"required":             []any{"inner"},
		"additionalProperties": false,
		"properties": map[string]any{
			"inner":  inner,
			"count":  map[string]any{"type": "integer", "exclusiveMinimum": 0.0, "maximum": 10.0},
			"list":   map[string]any{"type": "array", "items": inner},
			"either": map[string]any{"oneOf": []any{inner, map[string]any{"type": "integer"}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		t.Errorf("converted\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if _, err := convert("Loop"); err == nil || !strings.Contains(err.Error(), "refers to itself") {
		t.Errorf("recursive schema: %v", err)
	}
	if _, err := convert("Missing"); err == nil {
		t.Error("a missing component converted")
	}
	if _, err := ComponentSchema("NoSuchInput"); err == nil {
		t.Error("ComponentSchema found a missing component")
	}
	empty, err := ComponentSchema("QueryDatasetsInput")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(empty), `"properties":{}`) {
		t.Errorf("an argument-less object schema lacks properties: %s", empty)
	}
}
