package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
)

// TestAgentToolArgumentsAreValidated: a tool's handler is run only with arguments its input
// schema accepts (tool.Handler's contract, which the MCP endpoint keeps). A session's model
// that calls a tool with arguments the schema refuses (one missing, one of the wrong type, one
// the tool does not take, a bound broken) gets the refusal that an MCP client gets, naming the
// argument, and the tool does not run: before, the agent ran the handler with them, and the
// model was told that the dataset of an empty name is not owned by the caller when it sent
// none, read a Go decoding error for a wrong type, and ran a query with an argument the tool
// does not take.
func TestAgentToolArgumentsAreValidated(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()
	calls := []struct{ call, want string }{
		{`call query_schema {}`, "Error: invalid arguments for tool 'query_schema': arguments: missing property 'dataset'"},
		{`call query_data {"dataset":5,"sql":"SELECT 1"}`, "Error: invalid arguments for tool 'query_data': dataset: got number, want string"},
		{`call query_data {"dataset":"sales","sql":"SELECT 1","extra":true}`, "Error: invalid arguments for tool 'query_data': arguments: additional properties 'extra' not allowed"},
		{`call load_storage_dataset {"name":"sales","limit":0}`, "Error: invalid arguments for tool 'load_storage_dataset': limit: minimum: got 0, want 1"},
	}
	calls2 := make([]string, len(calls))
	for i, c := range calls {
		calls2[i] = c.call
	}
	res, err := svc.Spawn(ctx, acme.p, "main", "Look. "+script(calls2...), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady {
		t.Fatalf("session: %+v", s)
	}
	var results []string
	for _, e := range allEvents(t, svc, acme.p, res.SessionID) {
		if e.Kind != "tool_result" {
			continue
		}
		var r struct {
			Text    string `json:"text"`
			IsError bool   `json:"is_error"`
		}
		if err := json.Unmarshal(e.Data, &r); err != nil {
			t.Fatal(err)
		}
		if !r.IsError {
			t.Errorf("tool result %q is not an error", r.Text)
		}
		results = append(results, r.Text)
	}
	if len(results) != len(calls) {
		t.Fatalf("%d tool results, want %d: %q", len(results), len(calls), results)
	}
	for i, c := range calls {
		if results[i] != c.want {
			t.Errorf("%s: %q, want %q", c.call, results[i], c.want)
		}
	}
}
