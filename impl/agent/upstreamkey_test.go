package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/exchange"
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

// TestSpawnRefusesAModelTheAccountCannotReach: with every provider taking only accounts with
// an upstream key of their own (account_keys: required), an account without one is refused the
// spawn with the 403 upstream_key_required its requests get, instead of a session that is
// accepted and fails at its first model call; once the operator sets the account's key, the
// same spawn runs and reaches ready.
func TestSpawnRefusesAModelTheAccountCannotReach(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		for i := range c.Providers {
			c.Providers[i].AccountKeys = config.AccountKeysRequired
		}
	})
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	acme := w.tenant(n, "acme", 5_000_000)
	_, err := svc.Spawn(ctx, acme.p, "main", "Say hello.", "")
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Code != exchange.UpstreamKeyRequiredCode || ae.Kind != apierror.KindForbidden {
		t.Fatalf("spawn without an upstream key: %v, want the 403 %s", err, exchange.UpstreamKeyRequiredCode)
	}
	if list, err := svc.Sessions(ctx, acme.p); err != nil || len(list) != 0 {
		t.Fatalf("sessions after the refused spawn: %+v, %v; want none", list, err)
	}

	secret, err := w.store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := upstreamkeys.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.cfg.Providers {
		sealed, err := sealer.Seal(acme.p.AccountID, p.Name, "sk-acme-own")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: acme.p.AccountID, Provider: p.Name, Sealed: sealed, Hint: upstreamkeys.Hint("sk-acme-own"), SetBy: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	var res agent.SpawnResult
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The key reaches the exchange's grants cache through the database's notification.
		if res, err = svc.Spawn(ctx, acme.p, "main", "Say hello.", ""); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("spawn with the account's key: %v", err)
	}
	if s := waitSession(t, svc, acme.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped); s.State != agent.StateReady {
		t.Fatalf("session with the account's key: %+v", s)
	}
}
