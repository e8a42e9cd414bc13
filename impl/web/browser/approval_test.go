package browser_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
)

// spawnPurpose is what the agent the test asks for is to do; the Approvals page must show it.
const spawnPurpose = "Summarise this week's open tickets"

// TestApproveAgentAction has an API key ask for an agent session through the MCP tool
// agent_spawn, which only creates a pending approval; alice, the account's owner, sees the
// exact action and its arguments on the Approvals page and approves it there; then
// agent_action_status, asked over MCP with the same key, reports the approval approved with
// its action under way, and the page lists it as resolved by her.
func TestApproveAgentAction(t *testing.T) {
	s := start(t)
	key, _ := s.GW.NewKey(t, s.Account.ID, 0)
	// A free slot for the session, given by the operator as `tollgate admin slot` does.
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.AssignSlot(context.Background(), s.Account.ID, "main"); err != nil {
		t.Fatal(err)
	}

	requested := s.mcpTool(t, key, "agent_spawn", map[string]any{"purpose": spawnPurpose, "max_turns": 5, "max_spend": 100000})
	if requested.State != "pending" || requested.ID == "" {
		t.Fatalf("agent_spawn answered the approval %+v, want a pending one", requested)
	}

	p := newTour(t)
	s.signIn(p)
	p.at(p.Follow("Approvals"), http.StatusOK, s.URL+"/approvals")
	p.shot("approvals-pending")
	pending := p.Text("main")
	// max_spend is micro-units: the page says it in dollars beside the exact JSON.
	for _, want := range []string{requested.ID, spawnPurpose, "max spend $0.10, max turns 5", `"max_spend": 100000`} {
		if !strings.Contains(pending, want) {
			t.Errorf("the Approvals page does not show %q:\n%s", want, pending)
		}
	}

	p.at(p.Submit("Approve spawn "+requested.ID), http.StatusOK, s.URL+"/approvals")
	p.shot("approvals-approved")
	if got := p.Text("[role=status]"); !strings.HasPrefix(got, "Approved") {
		t.Errorf("after approving, the page says %q", got)
	}
	resolved := p.Text("tbody")
	if !strings.Contains(resolved, "approved") || !strings.Contains(resolved, alice.Email) {
		t.Errorf("the resolved approvals do not list it as approved by %s:\n%s", alice.Email, resolved)
	}

	// The action's own status moves on from the approval: queued, then running or done (a
	// bound against a hang only).
	var status mcpApproval
	for deadline := time.Now().Add(20 * time.Second); ; {
		status = s.mcpTool(t, key, "agent_action_status", map[string]any{"approval_id": requested.ID})
		if status.State != "approved" {
			t.Fatalf("agent_action_status after approving: %+v, want the state approved", status)
		}
		if status.ActionStatus == "failed" {
			t.Fatalf("the approved action failed: %s", status.Failure)
		}
		if status.ActionStatus != "queued" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("agent_action_status: approved, the action %s, session %s", status.ActionStatus, status.SessionID)
	if status.ActionStatus != "running" && status.ActionStatus != "done" {
		t.Errorf("the approved action is %q, want it running or done", status.ActionStatus)
	}
	if status.SessionID == "" {
		t.Error("agent_action_status names no session for the approved spawn")
	}
	p.at(p.Navigate(s.URL+"/approvals"), http.StatusOK, s.URL+"/approvals")
	p.shot("approvals-outcome")

	// The session's page follows it live; its events show the time to the second.
	if status.SessionID == "" {
		return
	}
	// The session is linked by the start of its id (the whole id is the link's title).
	p.at(p.Follow(status.SessionID[:8]+"…"), http.StatusOK, s.URL+"/agents/"+status.SessionID)
	var events string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if events = p.Text("#events"); strings.Contains(events, "message_out") {
			break
		}
	}
	if !strings.Contains(events, "message_out") {
		t.Errorf("the session's page shows no answer:\n%s", events)
	}
	if !timeWithSeconds.MatchString(events) {
		t.Errorf("the session's events, as the live tail wrote them, have no seconds:\n%s", events)
	}
	// Loaded again, the page writes the same events itself (and the session's state now).
	p.at(p.Navigate(s.URL+"/agents/"+status.SessionID), http.StatusOK, s.URL+"/agents/"+status.SessionID)
	if events = p.Text("#events"); !strings.Contains(events, "message_out") || !timeWithSeconds.MatchString(events) {
		t.Errorf("the session's events, as the page wrote them, lack the answer or seconds:\n%s", events)
	}
	p.shot("agent-session")
	// The Agents page lists the session with its spend to the cent.
	p.at(p.Follow("Agents"), http.StatusOK, s.URL+"/agents")
	if got := p.Text("main"); !strings.Contains(got, spawnPurpose) || !strings.Contains(got, "/ $0.10") {
		t.Errorf("the Agents page does not list the session with its max spend of $0.10:\n%s", got)
	}
	p.shot("agents-session-listed")
}

// timeWithSeconds matches an event's time as the session page shows it.
var timeWithSeconds = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC`)

// mcpApproval is the JSON line of an approval in the answers of the agent tools.
type mcpApproval struct {
	ID           string `json:"id"`
	Action       string `json:"action"`
	State        string `json:"state"`
	ActionStatus string `json:"action_status"`
	SessionID    string `json:"session_id"`
	Failure      string `json:"failure"`
}

// mcpTool calls an agent tool through POST /api/mcp with key and returns the approval its
// answer carries (the answer's last line), failing the test on any error, a tool that is not
// there included.
func (s *site) mcpTool(t *testing.T, key, tool string, args map[string]any) mcpApproval {
	t.Helper()
	call, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL+"/api/mcp", strings.NewReader(string(call)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.GW.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &answer) != nil {
		t.Fatalf("MCP %s: %d %s", tool, resp.StatusCode, raw)
	}
	if answer.Error != nil {
		t.Fatalf("MCP %s: error %d %s (is the tool there? the agent tools come with issue 13)", tool, answer.Error.Code, answer.Error.Message)
	}
	if answer.Result == nil || answer.Result.IsError || len(answer.Result.Content) == 0 {
		t.Fatalf("MCP %s answered %s", tool, raw)
	}
	text := answer.Result.Content[0].Text
	var ap mcpApproval
	if err := json.Unmarshal([]byte(text[strings.LastIndexByte(text, '\n')+1:]), &ap); err != nil {
		t.Fatalf("MCP %s: the answer's last line is not an approval (%v):\n%s", tool, err, text)
	}
	t.Logf("MCP %s: %s", tool, strings.SplitN(text, "\n", 2)[0])
	return ap
}
