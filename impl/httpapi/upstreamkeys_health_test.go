package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestOwnKeysLimitsStayWithTheAccount: the rate limit of an account's own upstream key (its
// upstream account's: a 429 saying not to retry, as an exhausted quota is answered, whole or
// as a stream's in-band error) fails the account's request over to the fusion model's next
// expert, and does not count against the expert's health, which every account shares: another
// tenant, on the operator's key, stays where the router put it. The review of s15h6: b4b678a
// kept the upstream's refusal of the key (401, 403) out of the expert's health, but not its
// rate limit, so three of one tenant's requests over its own key's limit moved every other
// tenant's traffic off the expert for FailureWindow, as often as it liked.
func TestOwnKeysLimitsStayWithTheAccount(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	bob := g.NewTenant(t, "bob", 0, 50_000_000)
	c := g.Client(t)
	for _, stream := range []bool{false, true} {
		chat := request{"POST", "/v1/chat/completions", chatBody("service-flint", "hello", stream, 16)}
		status, h, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + bob.Key})
		before := h.Get("x-tollgate-expert")
		if status != 200 || before == "" {
			t.Fatalf("stream %v: %d %q: %s", stream, status, before, body)
		}
		provider, model, _ := strings.Cut(before, "/")
		// A tenant of its own each time, its key set before its first request (the key is
		// read with its grants).
		alice := g.NewTenant(t, fmt.Sprintf("alice-%v", stream), 0, 50_000_000)
		g.SetUpstreamKey(t, alice.Account.ID, provider, "sk-alice-own-key-0123456789")
		fault := sim.Fault{Kind: sim.FaultStatus, Status: 429, ShouldRetry: "false"}
		if stream {
			fault = sim.Fault{Kind: sim.FaultMidstream, Status: 429}
		}
		for i := range 3 {
			s.Enqueue(model, fault)
			status, h, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + alice.Key})
			if status != 200 || h.Get("x-tollgate-expert") == before {
				t.Fatalf("stream %v, alice's request %d over her own key's limit: %d from %q: %s", stream, i, status, h.Get("x-tollgate-expert"), body)
			}
		}
		for range 2 {
			status, h, body = do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + bob.Key})
			if after := h.Get("x-tollgate-expert"); status != 200 || after != before {
				t.Errorf("stream %v, after another tenant's own key was rate limited: %d, expert %q (was %q): %s", stream, status, after, before, body)
			}
		}
	}
}
