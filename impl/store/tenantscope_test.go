package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/impl/store"
)

// agentRows is one account's agent rows: a slot with a live session that has an event, a
// ticket, an approval pending past its expiry and one pending within it.
type agentRows struct {
	account, slot, session, ticket, due, pending uuid.UUID
}

// newAgentRows stores agentRows for a new account.
func newAgentRows(t *testing.T, st *store.Store) agentRows {
	t.Helper()
	ctx := context.Background()
	a, err := st.CreateAccount(ctx, "acct-"+uuid.NewString()[:8], "default")
	if err != nil {
		t.Fatal(err)
	}
	q := st.Agents()
	r := agentRows{account: a.ID, session: uuid.New(), ticket: uuid.New(), due: uuid.New(), pending: uuid.New()}
	slot, err := q.InsertAgentSlot(ctx, a.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	r.slot = slot.ID
	if _, err := q.InsertAgentSession(ctx, store.NewAgentSession{ID: r.session, AccountID: a.ID,
		SlotID: pgtype.UUID{Bytes: slot.ID, Valid: true}, SlotName: "main", Model: "m", Purpose: "private", MaxTurns: 1, MaxSpendMicros: 1, MaxDurationSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if err := q.InsertAgentEvent(ctx, store.NewAgentEvent{SessionID: r.session, Seq: 1, AccountID: a.ID, Kind: "state", Data: []byte(`{"private":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.InsertAgentTicket(ctx, store.NewAgentTicket{ID: r.ticket, AccountID: a.ID, Title: "private", OpenedBy: "operator"}); err != nil {
		t.Fatal(err)
	}
	for id, expires := range map[uuid.UUID]time.Time{r.due: time.Now().Add(-time.Minute), r.pending: time.Now().Add(time.Hour)} {
		if _, err := q.InsertAgentApproval(ctx, store.NewAgentApproval{ID: id, AccountID: a.ID, Action: "spawn",
			Arguments: []byte(`{}`), ArgumentsHash: "h", ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// noRow fails the test unless err is the no-row answer.
func noRow(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("%s of another account's row: %v, want no row", what, err)
	}
}

// TestAgentQueriesByIDKeepToTheAccount: the agent queries that take a row's id (a session, its
// slot, its events, a ticket, an approval) also take the caller's account, and for another
// account's id read nothing and write nothing, whatever the Go above them checks; the owner's
// account reads and writes the same rows (so the refusals are not of a query that never
// matches).
func TestAgentQueriesByIDKeepToTheAccount(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	q := st.Agents()
	acme := newAgentRows(t, st)
	globex := newAgentRows(t, st)
	other := globex.account

	_, err := q.GetAccountAgentSession(ctx, other, acme.session)
	noRow(t, "GetAccountAgentSession", err)
	_, err = q.LatestSlotSession(ctx, other, acme.slot)
	noRow(t, "LatestSlotSession", err)
	if err := st.InAgentTx(ctx, func(tx *store.AgentTx) error {
		_, err := tx.GetAccountAgentSessionForUpdate(ctx, other, acme.session)
		noRow(t, "GetAccountAgentSessionForUpdate", err)
		_, err = tx.LiveSlotSessionForUpdate(ctx, other, acme.slot)
		noRow(t, "LiveSlotSessionForUpdate", err)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if evs, err := q.ListAgentEvents(ctx, other, acme.session, 0, 10); err != nil || len(evs) != 0 {
		t.Errorf("ListAgentEvents of another account's session: %d events, %v", len(evs), err)
	}
	if evs, err := q.ListAgentEventsTail(ctx, other, acme.session, 10); err != nil || len(evs) != 0 {
		t.Errorf("ListAgentEventsTail of another account's session: %d events, %v", len(evs), err)
	}
	_, err = q.GetAccountAgentTicket(ctx, other, acme.ticket)
	noRow(t, "GetAccountAgentTicket", err)
	_, err = q.CloseAgentTicket(ctx, other, acme.ticket)
	noRow(t, "CloseAgentTicket", err)
	_, err = q.GetAccountAgentApproval(ctx, other, acme.pending)
	noRow(t, "GetAccountAgentApproval", err)
	if n, err := q.ExpireAgentApproval(ctx, other, acme.due); err != nil || n != 0 {
		t.Errorf("ExpireAgentApproval of another account's approval due to expire: %d expired, %v", n, err)
	}
	if err := st.InAgentTx(ctx, func(tx *store.AgentTx) error {
		_, err := tx.ResolveAgentApproval(ctx, other, acme.pending, "approved", "web:mallory")
		noRow(t, "ResolveAgentApproval", err)
		n, err := tx.DeleteAgentSlot(ctx, other, acme.slot)
		if err != nil || n != 0 {
			t.Errorf("DeleteAgentSlot of another account's slot: %d deleted, %v", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Nothing of acme's moved: its rows are as it left them.
	if tk, err := q.GetAgentTicket(ctx, acme.ticket); err != nil || tk.State != "open" || tk.ClosedAt != nil {
		t.Errorf("acme's ticket after globex's close: %+v, %v", tk, err)
	}
	for _, id := range []uuid.UUID{acme.due, acme.pending} {
		if ap, err := q.GetAgentApproval(ctx, id); err != nil || ap.State != "pending" || ap.ResolvedAt != nil {
			t.Errorf("acme's approval %s after globex's calls: %+v, %v", id, ap, err)
		}
	}
	if _, err := q.GetAgentSlot(ctx, acme.account, "main"); err != nil {
		t.Errorf("acme's slot after globex's delete: %v", err)
	}

	// The owner's account reads and writes them.
	if _, err := q.GetAccountAgentSession(ctx, acme.account, acme.session); err != nil {
		t.Errorf("GetAccountAgentSession of the owner: %v", err)
	}
	if _, err := q.LatestSlotSession(ctx, acme.account, acme.slot); err != nil {
		t.Errorf("LatestSlotSession of the owner: %v", err)
	}
	if evs, err := q.ListAgentEvents(ctx, acme.account, acme.session, 0, 10); err != nil || len(evs) != 1 {
		t.Errorf("ListAgentEvents of the owner: %d events, %v", len(evs), err)
	}
	if evs, err := q.ListAgentEventsTail(ctx, acme.account, acme.session, 10); err != nil || len(evs) != 1 {
		t.Errorf("ListAgentEventsTail of the owner: %d events, %v", len(evs), err)
	}
	if _, err := q.GetAccountAgentTicket(ctx, acme.account, acme.ticket); err != nil {
		t.Errorf("GetAccountAgentTicket of the owner: %v", err)
	}
	if tk, err := q.CloseAgentTicket(ctx, acme.account, acme.ticket); err != nil || tk.State != "closed" {
		t.Errorf("CloseAgentTicket of the owner: %+v, %v", tk, err)
	}
	if _, err := q.GetAccountAgentApproval(ctx, acme.account, acme.pending); err != nil {
		t.Errorf("GetAccountAgentApproval of the owner: %v", err)
	}
	if n, err := q.ExpireAgentApproval(ctx, acme.account, acme.due); err != nil || n != 1 {
		t.Errorf("ExpireAgentApproval of the owner: %d expired, %v", n, err)
	}
	if err := st.InAgentTx(ctx, func(tx *store.AgentTx) error {
		if _, err := tx.GetAccountAgentSessionForUpdate(ctx, acme.account, acme.session); err != nil {
			t.Errorf("GetAccountAgentSessionForUpdate of the owner: %v", err)
		}
		if _, err := tx.LiveSlotSessionForUpdate(ctx, acme.account, acme.slot); err != nil {
			t.Errorf("LiveSlotSessionForUpdate of the owner: %v", err)
		}
		if ap, err := tx.ResolveAgentApproval(ctx, acme.account, acme.pending, "denied", "operator"); err != nil || ap.State != "denied" {
			t.Errorf("ResolveAgentApproval of the owner: %+v, %v", ap, err)
		}
		if n, err := tx.DeleteAgentSlot(ctx, acme.account, acme.slot); err != nil || n != 1 {
			t.Errorf("DeleteAgentSlot of the owner: %d deleted, %v", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
