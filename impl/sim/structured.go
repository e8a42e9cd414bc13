package sim

import (
	"encoding/json"
)

// structuredSalt separates the seed of a structured answer from that of the reply's words.
const structuredSalt = 0x6a09e667f3bcc908

// jsonObjectSchema is the schema of the answer to a request for a JSON object without a schema
// (json_object, or json_schema without its schema).
const jsonObjectSchema = `{"type":"object","properties":{"answer":{"type":"string","minLength":1}},"required":["answer"]}`

// outputFormat is the structured output a request asks for.
type outputFormat struct {
	// schema is the JSON Schema the answer must validate against; nil asks for any JSON object.
	schema json.RawMessage
}

// fragments returns the tokens of the structured answer seeded by seed. A schema that is not
// JSON is answered as a request for any object.
func (f *outputFormat) fragments(seed uint64) []string {
	if len(f.schema) > 0 {
		if frags, err := generateJSON(f.schema, seed); err == nil {
			return frags
		}
	}
	frags, _ := generateJSON([]byte(jsonObjectSchema), seed)
	return frags
}

// formatSpec is a structured output format as the three APIs spell it: chat's
// {type, json_schema:{name, schema, strict}}, Responses' {type, name, schema, strict} and
// Anthropic's {type:"json_schema", schema}.
type formatSpec struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// outputFormat returns the format asked for, or nil for plain text or an unknown type.
func (s *formatSpec) outputFormat() *outputFormat {
	switch s.Type {
	case "json_object":
		return &outputFormat{}
	case "json_schema":
		schema := s.Schema
		if s.JSONSchema != nil {
			schema = s.JSONSchema.Schema
		}
		if isNull(schema) {
			schema = nil
		}
		return &outputFormat{schema: schema}
	}
	return nil
}

// chatOutputFormat reads a chat completions response_format.
func chatOutputFormat(raw json.RawMessage) *outputFormat {
	var spec formatSpec
	if isNull(raw) || json.Unmarshal(raw, &spec) != nil {
		return nil
	}
	return spec.outputFormat()
}

// responsesOutputFormat reads the format of a Responses text parameter.
func responsesOutputFormat(text json.RawMessage) *outputFormat {
	var t struct {
		Format *formatSpec `json:"format"`
	}
	if isNull(text) || json.Unmarshal(text, &t) != nil || t.Format == nil {
		return nil
	}
	return t.Format.outputFormat()
}

// messagesOutputFormat reads Anthropic's output_config.format, or else the older beta
// output_format.
func messagesOutputFormat(outputConfig, outputFormat json.RawMessage) *outputFormat {
	var c struct {
		Format *formatSpec `json:"format"`
	}
	if !isNull(outputConfig) && json.Unmarshal(outputConfig, &c) == nil && c.Format != nil {
		if f := c.Format.outputFormat(); f != nil {
			return f
		}
	}
	var spec formatSpec
	if isNull(outputFormat) || json.Unmarshal(outputFormat, &spec) != nil {
		return nil
	}
	return spec.outputFormat()
}

// toolArguments returns the tokens of the arguments of a call to tool name: a value generated
// from the tool's parameters schema when tool_choice forces that tool by name, else the
// default {"q":"<word>"} in toolFragments pieces.
func (in *planInput) toolArguments(name string, seed uint64) []string {
	if name == in.forced && !isNull(in.forcedSchema) {
		if frags, err := generateJSON(in.forcedSchema, seed); err == nil {
			return frags
		}
	}
	return []string{`{"q":"`, word(seed, 0), `"}`}
}
