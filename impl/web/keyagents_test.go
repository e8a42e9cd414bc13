package web_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// TestKeyRevokeEndsItsAgentSessions: revoking a key on the Keys page ends the agent session
// started with it (stopped, key_revoked) when the revocation returns, and leaves another key's
// session alone; revoking all keys ends that one too. Before, the page revoked the key only:
// the session ran on until a step found the key revoked, and one waiting for a message never
// did.
func TestKeyRevokeEndsItsAgentSessions(t *testing.T) {
	e := start(t, nil)
	acct := e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	createKey(t, b, "one")
	createKey(t, b, "two")
	ctx := context.Background()
	keys, err := e.Store.ListAPIKeys(ctx, acct.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %v: %v", keys, err)
	}
	q := db.New(e.Store.Pool())
	session := func(slot string, key uuid.UUID) uuid.UUID {
		t.Helper()
		s, err := q.InsertAgentSlot(ctx, db.InsertAgentSlotParams{AccountID: acct.ID, Name: slot})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := q.InsertAgentSession(ctx, db.InsertAgentSessionParams{ID: uuid.New(), AccountID: acct.ID,
			SlotID: pgtype.UUID{Bytes: s.ID, Valid: true}, SlotName: slot, Model: "sim-small", Purpose: "tidy the docs",
			MaxTurns: 10, MaxSpendMicros: 2_000_000, MaxDurationSeconds: 600, KeyID: pgtype.UUID{Bytes: key, Valid: true}})
		if err != nil {
			t.Fatal(err)
		}
		return sess.ID
	}
	one, two := session("one", keys[0].ID), session("two", keys[1].ID)
	// check compares each session's state and end reason with want ("live": not ended).
	check := func(after string, want map[uuid.UUID]string) {
		t.Helper()
		for id, w := range want {
			var state, reason string
			if err := e.Store.Pool().QueryRow(ctx, "SELECT state, end_reason FROM agent_sessions WHERE id = $1", id).Scan(&state, &reason); err != nil {
				t.Fatal(err)
			}
			got := state + " " + reason
			if w == "live" && (state == "stopped" || state == "failed") || w != "live" && got != w {
				t.Errorf("session %s is %q after %s, want %s", id, got, after, w)
			}
		}
	}

	if p := b.post("/keys/"+keys[0].ID.String()+"/revoke", confirmed); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", p.Status)
	}
	check("the key's revocation", map[uuid.UUID]string{one: "stopped key_revoked", two: "live"})
	if p := b.post("/keys/revoke-all", url.Values{"confirm": {"yes"}, "confirm_text": {"acme"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("revoke all: %d", p.Status)
	}
	check("revoking all keys", map[uuid.UUID]string{one: "stopped key_revoked", two: "stopped key_revoked"})
}
