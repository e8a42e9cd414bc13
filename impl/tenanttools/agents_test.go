package tenanttools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestLimitedKeysPromptRefusalIsSaid: a key with limits (here a credit cap) may ask through MCP
// to prompt only the sessions it started (docs/agents.md, "The key's limits hold for its
// agents"). agent_prompt on a session another key of the account started is refused, and the
// refusal reaches the client in its own words, as the REST route's 403 says it, never as an
// internal error to quote a request id for; and no approval is made.
func TestLimitedKeysPromptRefusalIsSaid(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	capMicros := int64(1_000_000)
	k, err := g.Accounts.CreateKeyWith(ctx, tn.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily})
	if err != nil {
		t.Fatal(err)
	}

	// The account's unlimited key starts a session.
	sessionID := startSession(t, ctx, g, tn.Key, "main")

	cs := connect(t, ctx, g, k.Plain)
	text, isErr := call(t, ctx, cs, "agent_prompt", map[string]any{"session_id": sessionID, "prompt": "Spend on my behalf."})
	if !isErr || !strings.HasPrefix(text, "Error: ") || !strings.Contains(text, "not started by this key") || strings.Contains(text, "internal error") {
		t.Errorf("agent_prompt by a limited key on another key's session: %q (isError %v), want the refusal in its words", text, isErr)
	}
	var pending int
	if err := g.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_approvals WHERE account_id = $1`, tn.Account.ID).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Errorf("%d approvals made for the refused agent_prompt, want 0", pending)
	}
}

// startSession starts a session in slot with key (POST /v1/agents) and returns its id.
func startSession(t *testing.T, ctx context.Context, g *apitest.Gateway, key, slot string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/agents", strings.NewReader(`{"slot":"`+slot+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var spawned struct {
		SessionID string `json:"sessionId"`
	}
	err = json.NewDecoder(resp.Body).Decode(&spawned)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted || spawned.SessionID == "" {
		t.Fatalf("spawn: %d %v %+v", resp.StatusCode, err, spawned)
	}
	return spawned.SessionID
}

// TestSpawnWithNoFreeSlotSaysSo: agent_spawn while every slot of the account runs a session is
// still accepted as a pending approval (a slot may be free by the time a person approves it),
// but its answer says that no slot is free now and what to do; while a slot is free it says
// nothing of the kind. Only the console's Approvals page said so (newcomer walk s11h3), and an
// MCP client's user learnt it when the approved spawn failed.
func TestSpawnWithNoFreeSlotSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	cs := connect(t, ctx, g, tn.Key)
	const noSlot = "No slot is free now: "

	text, isErr := call(t, ctx, cs, "agent_spawn", map[string]any{"purpose": "Tidy the tickets."})
	if isErr || !strings.HasPrefix(text, "Approval ") || strings.Contains(text, noSlot) {
		t.Errorf("agent_spawn with a free slot: %q (isError %v), want an approval that says nothing of a busy slot", text, isErr)
	}

	startSession(t, ctx, g, tn.Key, "main")
	text, isErr = call(t, ctx, cs, "agent_spawn", map[string]any{"purpose": "Tidy the tickets again."})
	first := strings.SplitN(text, "\n", 2)[0]
	if isErr || !strings.HasPrefix(text, "Approval ") || !strings.Contains(first, noSlot) ||
		!strings.Contains(first, "DELETE /v1/agents/{slot}") {
		t.Errorf("agent_spawn with every slot busy: %q (isError %v), want the approval saying %q and how to free one", text, isErr, noSlot)
	}
}
