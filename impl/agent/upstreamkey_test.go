package agent_test

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/upstreamkeys"
)

// TestAgentModelCallsUseTheAccountsUpstreamKey: an agent's model call goes through the exchange
// as a request of the account's does, so an account with upstream keys of its own (tollgate
// admin provider-key set) has its agents' calls sent with them, not with the operator's: the
// simulator, whose prompt cache is scoped by the credential it receives, sees the account's
// key on the call; an account without keys is sent with the operator's (none here).
func TestAgentModelCallsUseTheAccountsUpstreamKey(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	secret, err := w.store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := upstreamkeys.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	own := w.tenant(n, "acme", 5_000_000)
	const key = "sk-acme-own-upstream-key"
	for _, p := range w.cfg.Providers {
		sealed, err := sealer.Seal(own.p.AccountID, p.Name, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: own.p.AccountID, Provider: p.Name, Sealed: sealed, Hint: upstreamkeys.Hint(key), SetBy: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	operators := w.tenant(n, "beta", 5_000_000)
	for _, c := range []struct {
		tn   tenant
		want string
	}{{own, key}, {operators, ""}} {
		res, err := svc.Spawn(ctx, c.tn.p, "main", "Say hello.", "")
		if err != nil {
			t.Fatal(err)
		}
		if s := waitSession(t, svc, c.tn.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped); s.State != agent.StateReady {
			t.Fatalf("%s's session: %+v", c.tn.name, s)
		}
		h := w.sim.LastHeaders()
		got := h.Get("X-Api-Key")
		if got == "" {
			got = h.Get("Authorization")
			if len(got) > len("Bearer ") {
				got = got[len("Bearer "):]
			}
		}
		if got != c.want {
			t.Errorf("%s's agent call was sent the credential %q, want %q", c.tn.name, got, c.want)
		}
	}
}
