package exchange

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// TestContentAttributesAreStructured: captured content is recorded as the conventions' message
// schemas in structured values (a slice of maps), which they ask for on spans where the SDK has
// them, as Go's does, not as JSON text: the system instructions, the conversation (a tool call's
// arguments an object with its numbers and booleans typed) and the answer with its finish
// reason.
func TestContentAttributesAreStructured(t *testing.T) {
	x := &Exchange{ir: &llm.Request{System: "Be brief.", Messages: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "weather?"}}},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris","days":2,"metric":true,"at":1.5}`}}},
	}}}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range x.contentAttributes("Rainy.", "stop") {
		got[kv.Key] = kv.Value
	}
	for _, c := range []struct {
		key  attribute.Key
		want string
	}{
		{telemetry.AttrSystemInstructions, `[{"content":"Be brief.","type":"text"}]`},
		{telemetry.AttrInput, `[{"parts":[{"content":"weather?","type":"text"}],"role":"user"},` +
			`{"parts":[{"arguments":{"at":1.5,"city":"Paris","days":2,"metric":true},"id":"call_1","name":"get_weather","type":"tool_call"}],"role":"assistant"}]`},
		{telemetry.AttrOutput, `[{"finish_reason":"stop","parts":[{"content":"Rainy.","type":"text"}],"role":"assistant"}]`},
	} {
		v, ok := got[c.key]
		if !ok {
			t.Errorf("no %s", c.key)
			continue
		}
		if v.Type() != attribute.SLICE {
			t.Errorf("%s is a %s (%s), want a structured SLICE", c.key, v.Type(), v.Emit())
			continue
		}
		if s := v.Emit(); s != c.want {
			t.Errorf("%s = %s, want %s", c.key, s, c.want)
		}
	}
	// The arguments' values keep their JSON types.
	args := got[telemetry.AttrInput].AsSlice()[1].AsMap()[0].Value.AsSlice()[0].AsMap()[0].Value.AsMap()
	types := map[string]attribute.Type{}
	for _, kv := range args {
		types[string(kv.Key)] = kv.Value.Type()
	}
	if types["days"] != attribute.INT64 || types["at"] != attribute.FLOAT64 || types["metric"] != attribute.BOOL || types["city"] != attribute.STRING {
		t.Errorf("the tool call's arguments are typed %v", types)
	}
}

// TestDocumentContentIsABlob: an inline document of the conversation (a PDF sent as base64) is
// captured as a blob part with its media type, as an inline image is; without inputMessage's
// case for documents, which reads every part but an image as text, it was an empty text part.
func TestDocumentContentIsABlob(t *testing.T) {
	x := &Exchange{ir: &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
		{Kind: llm.PartText, Text: "Summarize."},
		{Kind: llm.PartDocument, MediaType: "application/pdf", Data: "JVBERi0=", Filename: "report.pdf"},
	}}}}}
	want := `[{"parts":[{"content":"Summarize.","type":"text"},{"content":"JVBERi0=","mime_type":"application/pdf","modality":"document","type":"blob"}],"role":"user"}]`
	for _, kv := range x.contentAttributes("", "stop") {
		if kv.Key == telemetry.AttrInput {
			if s := kv.Value.Emit(); s != want {
				t.Errorf("%s = %s, want %s", kv.Key, s, want)
			}
			return
		}
	}
	t.Errorf("no %s", telemetry.AttrInput)
}
