package exchange

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// The GenAI conventions' message schemas for captured content
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-input-messages.json and
// gen-ai-output-messages.json): a message is a role and its parts, each part typed.
type (
	genAIMessage struct {
		Role         string      `json:"role"`
		Parts        []genAIPart `json:"parts"`
		FinishReason *string     `json:"finish_reason,omitempty"`
	}
	genAIPart struct {
		Type      string          `json:"type"`
		Content   string          `json:"content,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Response  string          `json:"response,omitempty"`
		Modality  string          `json:"modality,omitempty"`
		MimeType  string          `json:"mime_type,omitempty"`
		URI       string          `json:"uri,omitempty"`
	}
)

// contentAttributes are the captured content of the answering attempt: the request's
// conversation (gen_ai.input.messages) and system prompt (gen_ai.system_instructions), and the
// answer's text with its finish reason (gen_ai.output.messages). The request is read from its
// neutral form, decoded here for a request relayed in its own format (only for an account that
// opted in).
//
// Each is a structured value (an array of maps, as the schemas have them: structuredOf), which
// the conventions ask for on spans where the SDK has such values, as Go's now has
// (attribute.SLICE and MAP); JSON text is their fallback for SDKs without. A backend that keeps
// only scalar tags (Jaeger) shows them as JSON text.
func (x *Exchange) contentAttributes(output, finishReason string) []attribute.KeyValue {
	req := x.ir
	if req == nil {
		req = x.parsed
	}
	if req == nil && x.view != nil {
		req, _ = convert.DecodeView(x.client, x.view)
	}
	var attrs []attribute.KeyValue
	if req != nil {
		if req.System != "" {
			if b, err := json.Marshal([]genAIPart{{Type: "text", Content: req.System}}); err == nil {
				attrs = append(attrs, attribute.KeyValue{Key: telemetry.AttrSystemInstructions, Value: structuredOf(b)})
			}
		}
		msgs := make([]genAIMessage, 0, len(req.Messages))
		for _, m := range req.Messages {
			msgs = append(msgs, inputMessage(m))
		}
		if b, err := json.Marshal(msgs); err == nil {
			attrs = append(attrs, attribute.KeyValue{Key: telemetry.AttrInput, Value: structuredOf(b)})
		}
	}
	out := []genAIMessage{{Role: "assistant", Parts: []genAIPart{{Type: "text", Content: output}}, FinishReason: &finishReason}}
	if b, err := json.Marshal(out); err == nil {
		attrs = append(attrs, attribute.KeyValue{Key: telemetry.AttrOutput, Value: structuredOf(b)})
	}
	return attrs
}

// inputMessage is one message of the conversation in the input messages schema.
func inputMessage(m llm.Message) genAIMessage {
	g := genAIMessage{Role: string(m.Role), Parts: make([]genAIPart, 0, len(m.Parts)+len(m.ToolCalls))}
	for _, p := range m.Parts {
		switch {
		case m.Role == llm.RoleTool:
			g.Parts = append(g.Parts, genAIPart{Type: "tool_call_response", ID: m.ToolCallID, Response: p.Text})
		case p.Kind == llm.PartImage && p.ImageURL != "":
			g.Parts = append(g.Parts, genAIPart{Type: "uri", Modality: "image", URI: p.ImageURL})
		case p.Kind == llm.PartImage:
			g.Parts = append(g.Parts, genAIPart{Type: "blob", Modality: "image", MimeType: p.MediaType, Content: p.Data})
		case p.Kind == llm.PartDocument:
			g.Parts = append(g.Parts, genAIPart{Type: "blob", Modality: "document", MimeType: p.MediaType, Content: p.Data})
		default:
			g.Parts = append(g.Parts, genAIPart{Type: "text", Content: p.Text})
		}
	}
	if m.Role == llm.RoleTool && len(m.Parts) == 0 {
		g.Parts = append(g.Parts, genAIPart{Type: "tool_call_response", ID: m.ToolCallID})
	}
	for _, c := range m.ToolCalls {
		args := json.RawMessage(c.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Arguments)
		}
		g.Parts = append(g.Parts, genAIPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
	}
	return g
}

// structuredOf is the attribute value of the JSON text b, as the conventions' message schemas
// are read: an array is a slice, an object a map (its members in name order, so that one
// content is always one value), a string a string, an integer an int64 and another number a
// float64, a boolean a boolean, null the empty value. JSON text that does not decode (never the
// json.Marshal output it is given) stays the string it is.
func structuredOf(b []byte) attribute.Value {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return attribute.StringValue(string(b))
	}
	return valueOf(v)
}

// valueOf is structuredOf of a value decoded with UseNumber.
func valueOf(v any) attribute.Value {
	switch v := v.(type) {
	case []any:
		vs := make([]attribute.Value, len(v))
		for i, e := range v {
			vs[i] = valueOf(e)
		}
		return attribute.SliceValue(vs...)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		kvs := make([]attribute.KeyValue, len(keys))
		for i, k := range keys {
			kvs[i] = attribute.KeyValue{Key: attribute.Key(k), Value: valueOf(v[k])}
		}
		return attribute.MapValue(kvs...)
	case string:
		return attribute.StringValue(v)
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return attribute.Int64Value(n)
		}
		f, _ := v.Float64()
		return attribute.Float64Value(f)
	case bool:
		return attribute.BoolValue(v)
	}
	return attribute.Value{}
}
