package agent_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/sealedid"
)

// accountEndUserForm is an account's own end-user identifier (docs/inference.md, "End-user
// identifiers"): tg_ and 26 characters of lower-case base32.
var accountEndUserForm = regexp.MustCompile(`^tg_[a-z2-7]{26}$`)

// TestAgentModelCallsNameTheAccount: an agent's model calls name no end user, and the upstream
// is sent the account's own end-user identifier (docs/inference.md, "End-user identifiers"),
// as a request of the account's that names none would be. Two tenants' sessions, each one
// turn through the real gateway, read where the simulator received them: each call is sent
// one identifier, of the account's form, that opens to its account under the gateway's key,
// and the two accounts' differ.
func TestAgentModelCallsNameTheAccount(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	secret, err := w.store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := enduserid.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]string{}
	for _, name := range []string{"acme", "beta"} {
		tn := w.tenant(n, name, 5_000_000)
		before := w.sim.TotalRequests()
		res, err := svc.Spawn(ctx, tn.p, "main", "Say hello.", "")
		if err != nil {
			t.Fatal(err)
		}
		s := waitSession(t, svc, tn.p, res.SessionID, agent.StateReady, agent.StateFailed, agent.StateStopped)
		if s.State != agent.StateReady {
			t.Fatalf("%s's session: %+v", name, s)
		}
		if calls := w.sim.TotalRequests() - before; calls != 1 {
			t.Fatalf("%s's session made %d model calls, want one", name, calls)
		}
		last := w.sim.LastRequest()
		ids := endUserIDsOf(t, last.Body)
		if len(ids) != 1 || !accountEndUserForm.MatchString(ids[0]) {
			t.Fatalf("%s's agent call (%s) was sent end-user identifiers %q, want the account's own, of the form %s\n%s", name, last.Route, ids, accountEndUserForm, last.Body)
		}
		p, err := enduserid.Parse(ids[0])
		if err != nil || p.EndUser() || keys.Open(p) != tn.p.AccountID {
			t.Errorf("%s: %q does not open to the account %s (%v)", name, ids[0], tn.p.AccountID, err)
		}
		sent[name] = ids[0]
	}
	if sent["acme"] == sent["beta"] {
		t.Errorf("two accounts' agents were sent the same identifier %q", sent["acme"])
	}
}

// endUserIDsOf reads the end-user identifiers of an upstream request's body: chat and
// Responses safety_identifier and user, Messages metadata.user_id (absent ones left out).
func endUserIDsOf(t *testing.T, raw []byte) []string {
	t.Helper()
	var body struct {
		SafetyIdentifier *string `json:"safety_identifier"`
		User             *string `json:"user"`
		Metadata         *struct {
			UserID *string `json:"user_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("upstream request %s: %v", raw, err)
	}
	var ids []string
	for _, s := range []*string{body.SafetyIdentifier, body.User} {
		if s != nil {
			ids = append(ids, *s)
		}
	}
	if body.Metadata != nil && body.Metadata.UserID != nil {
		ids = append(ids, *body.Metadata.UserID)
	}
	return ids
}
