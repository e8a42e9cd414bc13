package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
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
	results := toolResults(t, svc, acme.p, res.SessionID, len(calls))
	if len(results) != len(calls) {
		t.Fatalf("%d tool results, want %d: %q", len(results), len(calls), results)
	}
	for i, c := range calls {
		if results[i] != c.want {
			t.Errorf("%s: %q, want %q", c.call, results[i], c.want)
		}
	}
}

// toolResults are the texts of the session's tool results, in order; the first errors of them
// must be errors (IsError).
func toolResults(t *testing.T, svc *agent.Service, p auth.Principal, session string, errors int) []string {
	t.Helper()
	var results []string
	for _, e := range allEvents(t, svc, p, session) {
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
		if len(results) < errors && !r.IsError {
			t.Errorf("tool result %q is not an error", r.Text)
		}
		results = append(results, r.Text)
	}
	return results
}

// TestOpenTicketArgumentsAreChecked: open_ticket's arguments are checked against the input
// schema the model is given, as every other tool's are (tool.Schema.Check): a call without the
// required body, with a title of the wrong type or beyond 200 characters, or with an argument
// the tool does not take gets the refusal naming it and opens no ticket; a call the schema
// accepts opens one. On the old code open_ticket read what it could of its arguments: a ticket
// was opened without a body, with a title cut to 200 characters, or with the unknown argument
// ignored, and a title of the wrong type was told "open_ticket needs a title".
func TestOpenTicketArgumentsAreChecked(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	acme := w.tenant(n, "acme", 5_000_000)
	ctx := context.Background()
	long := strings.Repeat("t", 201)
	calls := []struct{ call, want string }{
		{`call open_ticket {"title":"no body"}`, "Error: invalid arguments for tool 'open_ticket': arguments: missing property 'body'"},
		{`call open_ticket {"title":5,"body":"b"}`, "Error: invalid arguments for tool 'open_ticket': title: got number, want string"},
		{`call open_ticket {"title":"` + long + `","body":"b"}`, "Error: invalid arguments for tool 'open_ticket': title: maxLength: got 201, want 200"},
		{`call open_ticket {"title":"extra","body":"b","priority":"high"}`, "Error: invalid arguments for tool 'open_ticket': arguments: additional properties 'priority' not allowed"},
		{`call open_ticket {"title":"  ","body":"b"}`, "Error: open_ticket needs a title"},
		{`call open_ticket {"title":"checked","body":"the details"}`, "ticket "},
	}
	script2 := make([]string, len(calls))
	for i, c := range calls {
		script2[i] = c.call
	}
	res, err := svc.Spawn(ctx, acme.p, "main", "File them. "+script(script2...), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
	if s.State != agent.StateReady {
		t.Fatalf("session: %+v", s)
	}
	results := toolResults(t, svc, acme.p, res.SessionID, len(calls)-1)
	if len(results) != len(calls) {
		t.Fatalf("%d tool results, want %d: %q", len(results), len(calls), results)
	}
	for i, c := range calls {
		if !strings.HasPrefix(results[i], c.want) {
			t.Errorf("%.80s: %q, want %q", c.call, results[i], c.want)
		}
	}
	tickets, err := svc.Tickets(ctx, acme.p, "all", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(tickets) != 1 || tickets[0].Title != "checked" || tickets[0].Body != "the details" {
		t.Errorf("tickets: %+v, want only the one the schema accepts", tickets)
	}
}
