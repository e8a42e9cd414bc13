package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/tool"
)

// chatRequestBody is the chat-completions request a step sent before the exchange took
// neutral requests (as step.go built it then, kept here as the reference of
// TestModelRequestIsTheChatRequestsNeutralForm).
func (s *Service) chatRequestBody(row store.AgentSession, events []store.AgentEvent, queued []store.AgentMessage, env []string) ([]byte, error) {
	name := row.AgentName
	if name == "" {
		name = "an agent"
	}
	system := fmt.Sprintf("You are %s, running inside tollgate for one account. Your purpose: %s. "+
		"Use the tools to read the account's datasets; open a ticket with open_ticket when a person must act. "+
		"When you are done, answer in plain text.", name, row.Purpose)
	msgs := []map[string]any{{"role": "system", "content": system}}
	for _, e := range events {
		var d struct {
			Text      string `json:"text"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Turn      int    `json:"turn"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, err
		}
		switch e.Kind {
		case "message_in":
			msgs = append(msgs, map[string]any{"role": "user", "content": d.Text})
		case "model_call":
			if d.Text != "" {
				msgs = append(msgs, map[string]any{"role": "assistant", "content": d.Text, "tool_calls": []any{}, "turn": d.Turn})
			}
		case "tool_call":
			call := map[string]any{"id": d.CallID, "type": "function", "function": map[string]any{"name": d.Name, "arguments": d.Arguments}}
			last := msgs[len(msgs)-1]
			if last["role"] == "assistant" && last["turn"] == d.Turn {
				last["tool_calls"] = append(last["tool_calls"].([]any), call)
			} else {
				msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}, "turn": d.Turn})
			}
		case "tool_result":
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": d.CallID, "content": d.Text})
		case "message_out":
			msgs = append(msgs, map[string]any{"role": "assistant", "content": d.Text})
		}
	}
	for _, m := range queued {
		msgs = append(msgs, map[string]any{"role": "user", "content": m.Text})
	}
	for _, m := range msgs {
		delete(m, "turn")
		if tc, ok := m["tool_calls"].([]any); ok && len(tc) == 0 {
			delete(m, "tool_calls")
		}
	}
	req := map[string]any{"model": row.Model, "messages": msgs}
	var tools []any
	for _, name := range env {
		if name == ToolOpenTicket {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": ToolOpenTicket,
				"description": "Open a ticket of the account for a person to look at: a title and the details.",
				"parameters":  json.RawMessage(openTicketSchema)}})
			continue
		}
		t := s.tools[name]
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": t.Name,
			"description": t.Description, "parameters": t.InputSchema}})
	}
	if len(tools) > 0 {
		req["tools"] = tools
	}
	return json.Marshal(req)
}

// TestModelRequestIsTheChatRequestsNeutralForm (a differential test): the neutral request a step
// hands the exchange is what the chat-completions request a step sent before decodes to, for
// conversations with every kind of event (a turn's text and its tool calls joined in one
// assistant message, tool calls without text, empty texts, tool results, answers, queued
// messages) and the environment's tools: the upstreams are asked the same.
func TestModelRequestIsTheChatRequestsNeutralForm(t *testing.T) {
	s := &Service{tools: map[string]checkedTool{
		"query_data": {Tool: tool.Tool{Name: "query_data", Description: "Run SQL over a dataset.",
			InputSchema: json.RawMessage(`{"type": "object", "properties": {"sql": {"type": "string"}}}`)}},
	}}
	ev := func(kind string, data map[string]any) store.AgentEvent {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return store.AgentEvent{Kind: kind, Data: b}
	}
	row := store.AgentSession{ID: uuid.New(), Model: "service-flint", Purpose: "answer questions", AgentName: "Ada"}
	call := func(turn int, id string) store.AgentEvent {
		return ev("tool_call", map[string]any{"turn": turn, "call_id": id, "name": "query_data", "arguments": `{"sql":"select 1"}`})
	}
	result := func(turn int, id, text string) store.AgentEvent {
		return ev("tool_result", map[string]any{"turn": turn, "call_id": id, "name": "query_data", "text": text})
	}
	for name, c := range map[string]struct {
		row    store.AgentSession
		events []store.AgentEvent
		queued []store.AgentMessage
		env    []string
	}{
		"first turn": {row: row, events: []store.AgentEvent{ev("state", map[string]any{"to": "busy"}), ev("message_in", map[string]any{"text": "What is the total?"})},
			env: []string{"query_data", ToolOpenTicket}},
		"no name, no tools": {row: store.AgentSession{Model: "m", Purpose: "p"}, queued: []store.AgentMessage{{Text: "hello"}}},
		"tool calls and answers": {row: row, env: []string{ToolOpenTicket, "query_data"}, events: []store.AgentEvent{
			ev("message_in", map[string]any{"text": "What is the total?"}),
			ev("model_call", map[string]any{"turn": 1, "text": "Let me look."}),
			call(1, "c1"), call(1, "c2"),
			result(1, "c1", "49"), result(1, "c2", ""),
			ev("model_call", map[string]any{"turn": 2}),
			call(2, "c3"),
			result(2, "c3", "Error: no such dataset"),
			ev("model_call", map[string]any{"turn": 3}),
			ev("message_out", map[string]any{"turn": 3, "text": "The total is 49."}),
			ev("message_in", map[string]any{"text": ""}),
			ev("model_call", map[string]any{"turn": 4}),
			ev("message_out", map[string]any{"turn": 4, "text": ""}),
		}, queued: []store.AgentMessage{{Text: "Thanks."}, {Text: "And the mean?"}}},
	} {
		t.Run(name, func(t *testing.T) {
			body, err := s.chatRequestBody(c.row, c.events, c.queued, c.env)
			if err != nil {
				t.Fatal(err)
			}
			want, err := convert.DecodeRequest(llm.FormatChat, body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.modelRequest(c.row, c.events, c.queued, c.env)
			if err != nil {
				t.Fatal(err)
			}
			normalize(want)
			normalize(got)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("neutral request differs from the chat request's neutral form:\n got %s\nwant %s", show(got), show(want))
			}
		})
	}
}

// normalize clears what only a decoded request has (the wire paths and the raw fields, which
// name where things were in the body) and compacts the tools' schemas (json.Marshal compacts a
// RawMessage).
func normalize(r *llm.Request) {
	r.Raw = nil
	for i := range r.Messages {
		m := &r.Messages[i]
		m.Path = ""
		for j := range m.Parts {
			m.Parts[j].Path = ""
		}
		for j := range m.ToolCalls {
			m.ToolCalls[j].Path = ""
		}
	}
	for i := range r.Tools {
		var b bytes.Buffer
		if err := json.Compact(&b, r.Tools[i].Parameters); err == nil {
			r.Tools[i].Parameters = b.Bytes()
		}
	}
}

func show(r *llm.Request) string {
	b, _ := json.MarshalIndent(r, "", " ")
	return fmt.Sprintf("%s", b)
}

// TestFirstLineMarksACut: a session's purpose is its prompt's first line; one longer than
// maxPurpose bytes is cut at a word near the limit and ends with an ellipsis, within the limit.
func TestFirstLineMarksACut(t *testing.T) {
	if got := firstLine("  Summarise the sales  \nthen more"); got != "Summarise the sales" {
		t.Errorf("a short first line: %q", got)
	}
	long := "Query the sales table " + strings.Repeat("grouped by region ", 10) + "ORDER BY units DESC"
	got := firstLine(long)
	kept := strings.TrimSuffix(got, "…")
	if len(got) > maxPurpose || kept == got || !strings.HasPrefix(long, kept) || long[len(kept)] != ' ' {
		t.Errorf("a long first line (%d bytes) became %q (%d bytes)", len(long), got, len(got))
	}
	word := strings.Repeat("é", 150) // no space to cut at: cut on a character boundary
	if got := firstLine(word); len(got) > maxPurpose || !strings.HasSuffix(got, "é…") {
		t.Errorf("a long word became %q (%d bytes)", got, len(got))
	}
}
