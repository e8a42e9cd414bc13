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
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/agents", strings.NewReader(`{"slot":"main"}`))
	req.Header.Set("Authorization", "Bearer "+tn.Key)
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

	cs := connect(t, ctx, g, k.Plain)
	text, isErr := call(t, ctx, cs, "agent_prompt", map[string]any{"session_id": spawned.SessionID, "prompt": "Spend on my behalf."})
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
