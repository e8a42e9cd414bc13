package convert

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestStructuredOutputCrossesMessages: a JSON schema response format is carried between the
// OpenAI formats (chat response_format json_schema, Responses text.format) and Anthropic's
// structured outputs (output_config.format, or the beta's output_format: {"type":
// "json_schema", "schema": …}), both ways: the schema as sent; the OpenAI name, which
// Anthropic has no place for, is "response" going the other way and strict left to OpenAI's
// default, since Anthropic's schema rules are not OpenAI strict mode's; a description, and
// output_config's other members (effort), are dropped and named; a Messages request keeps its
// own output_config as sent. On the code before, each crossing was a 400 naming the field
// (wire-format trial s15h3).
func TestStructuredOutputCrossesMessages(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	messagesFormat := `{"format":{"type":"json_schema","schema":` + schema + `}}`
	cases := []struct {
		name     string
		src, dst llm.Format
		body     string
		// key is the target's field and want its value; dropped the fields named.
		key, want string
		dropped   []string
	}{
		{"chat to messages", llm.FormatChat,
			llm.FormatMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":` + schema + `}}}`,
			"output_config", messagesFormat, nil},
		{"chat description to messages", llm.FormatChat,
			llm.FormatMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","description":"A trip.","schema":` + schema + `}}}`,
			"output_config", messagesFormat, []string{"response_format.json_schema.description"}},
		{"responses to messages", llm.FormatResponses,
			llm.FormatMessages, `{"model":"m","max_output_tokens":16,"input":"hi","text":{"format":{"type":"json_schema","name":"trip","description":"A trip.","strict":true,"schema":` + schema + `}}}`,
			"output_config", messagesFormat, []string{"text.format.description"}},
		{"messages output_config to chat", llm.FormatMessages,
			llm.FormatChat, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}}`,
			"response_format", `{"type":"json_schema","json_schema":{"name":"response","schema":` + schema + `}}`, []string{"output_config.effort"}},
		{"messages output_format to responses", llm.FormatMessages,
			llm.FormatResponses, `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"output_format":{"type":"json_schema","schema":` + schema + `}}`,
			"text", `{"format":{"type":"json_schema","name":"response","schema":` + schema + `}}`, nil},
		{"messages to messages as sent", llm.FormatMessages,
			llm.FormatMessages, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}}`,
			"output_config", `{"effort":"low","format":{"type":"json_schema","schema":` + schema + `}}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, dropped, err := EncodeRequest(c.dst, mustDecode(t, c.src, []byte(c.body)), "up")
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(out, &top); err != nil {
				t.Fatal(err)
			}
			var got, want any
			_ = json.Unmarshal(top[c.key], &got)
			_ = json.Unmarshal([]byte(c.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s, want %s", c.key, top[c.key], c.want)
			}
			if len(dropped) != len(c.dropped) || (len(dropped) > 0 && !reflect.DeepEqual(dropped, c.dropped)) {
				t.Errorf("dropped %q, want %q", dropped, c.dropped)
			}
		})
	}
}
