package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestAgentSpendWithinTheSpawningKeysCap (through the gateway's wiring): a key with a credit cap of 1 micro-unit (too little for
// any call of its own) spawns an agent session: the session's model calls are billed to the key
// (usage_records.api_key_id), so they must count against the key's cap, and the session must not
// spend past it.
func TestAgentSpendWithinTheSpawningKeysCap(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 50_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	capMicros := int64(1)
	key, id := keyWith(t, g, tn.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily})
	a := newAgentsClient(t, g, key)
	// The key itself cannot make one call.
	if status, _, body := a.do("POST", "/v1/chat/completions", chatBody("service-flint", "hi", false, 16), nil); status != http.StatusPaymentRequired {
		t.Fatalf("the capped key's own call: %d %s", status, body)
	}
	sp := a.spawn("main", scriptPrompt)
	end := a.waitState("main", "ready", "stopped", "failed")
	if end.Session.State != "stopped" || end.Session.EndReason == nil || *end.Session.EndReason != "key_limit" {
		t.Errorf("the session of a key capped below any call: %+v, want stopped (key_limit)", *end.Session)
	}
	// The events are written with each step: a model call made is a model_call event.
	evs, err := g.Agents.Events(context.Background(), auth.Principal{AccountID: tn.Account.ID}, sp.SessionID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Kind == "model_call" {
			spent, _, _ := keySpend(t, g, tn.Account.ID, id, store.CapPeriodDaily)
			t.Fatalf("the session of a key capped at %d micro-units made a model call: %s (the key's budget counts %d)", capMicros, e.Data, spent)
		}
	}
}
