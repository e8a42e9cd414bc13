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

// toolFragments is the number of pieces the default tool-call arguments stream in.
const toolFragments = 3

// arguments returns the tokens of the arguments of a call to the tool: a value generated from
// its schema when the schema describes its arguments (see describesArguments) or, for a tool
// that tool_choice forces by name, whenever it has one; else the default {"q":"<word>"} in
// toolFragments pieces, as for a schema that is not JSON.
func (d *toolDef) arguments(forced bool, seed uint64) []string {
	if !isNull(d.schema) && (forced || describesArguments(d.schema)) {
		if frags, err := generateJSON(d.schema, seed); err == nil {
			return frags
		}
	}
	return []string{`{"q":"`, word(seed, 0), `"}`}
}

// describesArguments reports whether a tool's schema says what its arguments are, so that
// {"q":"<word>"} could be refused: it declares properties, required properties or
// additionalProperties: false.
func describesArguments(schema json.RawMessage) bool {
	var s struct {
		Properties           json.RawMessage `json:"properties"`
		Required             json.RawMessage `json:"required"`
		AdditionalProperties json.RawMessage `json:"additionalProperties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return false
	}
	return !isNull(s.Properties) || !isNull(s.Required) || string(s.AdditionalProperties) == "false"
}
