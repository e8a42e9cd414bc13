package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
)

// TestSpawnOutsideTheKeysModelsSaysSo: a key whose model subset lacks the agents' default model
// spawns without naming one (REST or agent_spawn): the 400 names the key, and that the model
// is the default one to replace with 'model', rather than telling the holder that a model of
// their account is "not available to this account", which it is. A model the key may not use
// is "not available to this key" whether the account has it or not (the key learns nothing of
// the account's other models); a key without a subset is told about the account.
func TestSpawnOutsideTheKeysModelsSaysSo(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	sub := keyed(t, w, n, tn, accounts.KeyOptions{Name: "sub", Models: []string{"service-flint-base"}})

	refused := func(what string, err error, want ...string) {
		t.Helper()
		e := apierror.As(err)
		if e == nil || e.Kind != apierror.KindInvalidRequest || e.Param != "model" {
			t.Errorf("%s: %v, want a 400 naming model", what, err)
			return
		}
		for _, w := range want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("%s: %q, want it to say %q", what, e.Message, w)
			}
		}
		if strings.Contains(e.Message, "this account") {
			t.Errorf("%s: %q speaks of the account", what, e.Message)
		}
	}
	_, err := svc.Spawn(ctx, sub, "main", "Say hello.", "")
	refused("a spawn with the default model", err, "default model 'service-flint'", "this key", "'model'")
	_, err = svc.RequestSpawn(ctx, sub, agent.SpawnAction{Purpose: "help"})
	refused("agent_spawn with the default model", err, "default model 'service-flint'", "this key")
	_, err = svc.SpawnWith(ctx, sub, "main", "Say hello.", "", agent.SpawnAction{Model: "service-flint"})
	refused("a spawn naming a model of the account outside the key's subset", err, "model 'service-flint' is not available to this key")
	_, err = svc.SpawnWith(ctx, sub, "main", "Say hello.", "", agent.SpawnAction{Model: "no-such-model"})
	refused("a spawn naming a model nobody has", err, "model 'no-such-model' is not available to this key")

	// A key without a subset: the account's models are what it may use.
	_, err = svc.SpawnWith(ctx, tn.p, "main", "Say hello.", "", agent.SpawnAction{Model: "no-such-model"})
	if e := apierror.As(err); e == nil || !strings.Contains(e.Message, "model 'no-such-model' is not available to this account") {
		t.Errorf("a key without a subset naming a model nobody has: %v", err)
	}
	// The subset's own model is spawned.
	if _, err := svc.SpawnWith(ctx, sub, "main", "Say hello.", "", agent.SpawnAction{Model: "service-flint-base"}); err != nil {
		t.Errorf("a spawn with the key's model: %v", err)
	}
}
