package mcp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tollgate/tollgate/gen/api"
)

// componentSchemas loads the schemas of the embedded OpenAPI document once.
var componentSchemas = sync.OnceValues(func() (openapi3.Schemas, error) {
	doc, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("load the embedded OpenAPI document: %w", err)
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("the embedded OpenAPI document has no components")
	}
	return doc.Components.Schemas, nil
})

// ComponentSchema returns the schema named name in components.schemas of the embedded OpenAPI
// document (openapi/openapi.yaml), converted from OpenAPI 3.0 to JSON Schema 2020-12 as MCP
// expects: references to other components are inlined, nullable becomes a "null" type, boolean
// exclusive bounds become numeric ones, example becomes examples, and OpenAPI-only keywords
// (discriminator, xml, externalDocs, x- extensions) are dropped. An object schema always carries
// "properties", empty if need be, since some LLM APIs refuse an object schema without it.
func ComponentSchema(name string) (json.RawMessage, error) {
	schemas, err := componentSchemas()
	if err != nil {
		return nil, err
	}
	c := converter{schemas: schemas, active: map[string]bool{}}
	m, err := c.component(name)
	if err != nil {
		return nil, err
	}
	if m["type"] == "object" {
		if _, ok := m["properties"]; !ok {
			m["properties"] = map[string]any{}
		}
	}
	return json.Marshal(m)
}

// mustComponentSchema is ComponentSchema for schemas this package's tests prove present.
func mustComponentSchema(name string) json.RawMessage {
	s, err := ComponentSchema(name)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema %s: %v", name, err))
	}
	return s
}

// converter turns OpenAPI 3.0 schemas into JSON Schema.
type converter struct {
	schemas openapi3.Schemas
	// active are the components being converted, to refuse recursive schemas, which inlining
	// cannot express.
	active map[string]bool
}

// component converts the named component.
func (c *converter) component(name string) (map[string]any, error) {
	ref, ok := c.schemas[name]
	if !ok || ref == nil || ref.Value == nil {
		return nil, fmt.Errorf("no schema %q in the OpenAPI components", name)
	}
	if c.active[name] {
		return nil, fmt.Errorf("schema %q refers to itself", name)
	}
	c.active[name] = true
	defer delete(c.active, name)
	raw, err := json.Marshal(ref.Value)
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("schema %q: %w", name, err)
	}
	return c.convert(m)
}

// dropped are OpenAPI keywords that JSON Schema does not have (or that are converted).
var dropped = []string{"nullable", "example", "discriminator", "xml", "externalDocs", "allowEmptyValue"}

// convert converts one schema object.
func (c *converter) convert(m map[string]any) (map[string]any, error) {
	if ref, ok := m["$ref"].(string); ok {
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if !ok {
			return nil, fmt.Errorf("unsupported reference %q", ref)
		}
		return c.component(name)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if strings.HasPrefix(k, "x-") || slices.Contains(dropped, k) {
			continue
		}
		out[k] = v
	}
	if ex, ok := m["example"]; ok {
		if _, has := out["examples"]; !has {
			out["examples"] = []any{ex}
		}
	}
	if m["nullable"] == true {
		switch t := out["type"].(type) {
		case string:
			out["type"] = []any{t, "null"}
		case []any:
			if !slices.Contains(t, any("null")) {
				out["type"] = append(t, "null")
			}
		}
		if enum, ok := out["enum"].([]any); ok && !slices.Contains(enum, nil) {
			out["enum"] = append(enum, nil)
		}
	}
	for _, b := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		excl, bound := b[0], b[1]
		if set, ok := out[excl].(bool); ok {
			delete(out, excl)
			if v, has := out[bound]; set && has {
				out[excl] = v
				delete(out, bound)
			}
		}
	}
	for _, k := range []string{"properties", "patternProperties", "$defs"} {
		if props, ok := out[k].(map[string]any); ok {
			conv := make(map[string]any, len(props))
			for name, v := range props {
				s, ok := v.(map[string]any)
				if !ok {
					conv[name] = v
					continue
				}
				cs, err := c.convert(s)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", k, name, err)
				}
				conv[name] = cs
			}
			out[k] = conv
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not", "contains"} {
		if s, ok := out[k].(map[string]any); ok {
			cs, err := c.convert(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = cs
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		if list, ok := out[k].([]any); ok {
			conv := make([]any, len(list))
			for i, v := range list {
				s, ok := v.(map[string]any)
				if !ok {
					conv[i] = v
					continue
				}
				cs, err := c.convert(s)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", k, i, err)
				}
				conv[i] = cs
			}
			out[k] = conv
		}
	}
	return out, nil
}
