package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestToolChoiceEveryRouteAndUpstream: tool_choice none, required (Messages any) and a named
// tool (the second of two, so that a choice carried as "required" would show) are honoured on
// every route whatever the upstream's format: chat, Responses and Messages clients on chat,
// Responses and Messages upstreams (the simulator calls a tool only when the choice forces
// one, the first one offered for required). Held in wire-format trial s15h3; kept as a
// regression test of the translated tool choices.
func TestToolChoiceEveryRouteAndUpstream(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	const (
		params     = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
		chatTools  = `[{"type":"function","function":{"name":"lookup","parameters":` + params + `}},{"type":"function","function":{"name":"other","parameters":` + params + `}}]`
		respTools  = `[{"type":"function","name":"lookup","parameters":` + params + `},{"type":"function","name":"other","parameters":` + params + `}]`
		msgsTools  = `[{"name":"lookup","input_schema":` + params + `},{"name":"other","input_schema":` + params + `}]`
		chatPrompt = `"messages":[{"role":"user","content":"Look something up."}]`
	)
	type choice struct{ chat, responses, messages, want string }
	choices := []choice{
		{`"none"`, `"none"`, `{"type":"none"}`, ""},
		{`"required"`, `"required"`, `{"type":"any"}`, "lookup"},
		{`{"type":"function","function":{"name":"other"}}`, `{"type":"function","name":"other"}`, `{"type":"tool","name":"other"}`, "other"},
	}
	// called is the name of the tool the answer calls, "" for none.
	called := func(route string, body []byte) string {
		var a struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Output  []struct{ Type, Name string } `json:"output"`
			Content []struct{ Type, Name string } `json:"content"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		for _, c := range a.Choices {
			for _, tc := range c.Message.ToolCalls {
				return tc.Function.Name
			}
		}
		for _, it := range a.Output {
			if it.Type == "function_call" {
				return it.Name
			}
		}
		for _, b := range a.Content {
			if b.Type == "tool_use" {
				return b.Name
			}
		}
		return ""
	}
	for _, c := range choices {
		for _, m := range []string{"service-flint-base", "test-responses", "chat-via-messages"} {
			body := `{"model":"` + m + `",` + chatPrompt + `,"tools":` + chatTools + `,"tool_choice":` + c.chat + `}`
			if status, got := post(t, g, tenant.Key, "/v1/chat/completions", body); status != 200 || called("chat", got) != c.want {
				t.Errorf("chat on %s, tool_choice %s: %d, called %q, want %q: %.300s", m, c.chat, status, called("chat", got), c.want, got)
			}
			body = `{"model":"` + m + `","input":"Look something up.","tools":` + respTools + `,"tool_choice":` + c.responses + `}`
			if status, got := post(t, g, tenant.Key, "/v1/responses", body); status != 200 || called("responses", got) != c.want {
				t.Errorf("Responses on %s, tool_choice %s: %d, called %q, want %q: %.300s", m, c.responses, status, called("responses", got), c.want, got)
			}
		}
		for _, m := range []string{"messages-via-chat", "messages-via-responses", "service-sonnet"} {
			body := `{"model":"` + m + `","max_tokens":300,` + chatPrompt + `,"tools":` + msgsTools + `,"tool_choice":` + c.messages + `}`
			if status, got := post(t, g, tenant.Key, "/v1/messages", body); status != 200 || called("messages", got) != c.want {
				t.Errorf("Messages on %s, tool_choice %s: %d, called %q, want %q: %.300s", m, c.messages, status, called("messages", got), c.want, got)
			}
		}
	}
}
