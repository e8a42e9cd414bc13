package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// allowed lists every transition each machine allows; every other pair of its states is
// refused.
var allowed = map[*Machine][]string{
	&SessionMachine: {"provisioning→ready", "provisioning→stopping", "provisioning→failed", "ready→busy", "ready→stopping",
		"busy→ready", "busy→stopping", "busy→failed", "stopping→stopped", "stopping→failed"},
	&CommandMachine:  {"accepted→running", "running→done", "running→failed", "accepted→done", "accepted→failed"},
	&MessageMachine:  {"queued→taken"},
	&ApprovalMachine: {"pending→approved", "pending→denied", "pending→expired", "pending→cancelled"},
	&ActionMachine:   {"queued→running", "running→done", "running→failed"},
}

// TestMachines (must-show 1): the whole matrix of every machine, allowed and refused.
func TestMachines(t *testing.T) {
	for m, edges := range allowed {
		for _, from := range m.States {
			for _, to := range m.States {
				want := false
				for _, e := range edges {
					want = want || e == from+"→"+to
				}
				if got := m.Allowed(from, to); got != want {
					t.Errorf("%s: %s → %s allowed %v, want %v", m.Name, from, to, got, want)
				}
				if err := m.Check(from, to); (err == nil) != want {
					t.Errorf("%s: Check(%s, %s) = %v", m.Name, from, to, err)
				}
			}
		}
	}
	for _, s := range []string{StateStopped, StateFailed} {
		if !SessionMachine.Terminal(s) || live(s) {
			t.Errorf("%s is not an end state", s)
		}
	}
}

// testDB is a migrated database with one account.
func testDB(t *testing.T) (*Service, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	acct, err := st.CreateAccount(ctx, "machines", "default")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	return s, acct.ID
}

// TestSessionTransitionsInTheDatabase (must-show 1): every pair of session states through the
// code that changes sessions (a locked row, its state event, the row written back): the
// allowed ones are committed with their event, the refused ones change nothing.
func TestSessionTransitionsInTheDatabase(t *testing.T) {
	s, acct := testDB(t)
	ctx := context.Background()
	for _, from := range SessionMachine.States {
		for _, to := range SessionMachine.States {
			t.Run(from+"→"+to, func(t *testing.T) {
				row, err := s.q.InsertAgentSession(ctx, store.NewAgentSession{ID: uuid.New(), AccountID: acct, SlotName: "x",
					Model: "service-flint", MaxTurns: 1, MaxSpendMicros: 1, MaxDurationSeconds: 1})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.pool.Exec(ctx, "UPDATE agent_sessions SET state = $2 WHERE id = $1", row.ID, from); err != nil {
					t.Fatal(err)
				}
				err = s.inTx(ctx, func(tx *store.AgentTx) error {
					st, err := lockSession(ctx, tx, row.ID)
					if err != nil {
						return err
					}
					if err := st.move(to, ReasonUserStop); err != nil {
						return err
					}
					return st.save()
				})
				got, gerr := s.q.GetAgentSession(ctx, row.ID)
				if gerr != nil {
					t.Fatal(gerr)
				}
				evs, _ := s.q.AllAgentEvents(ctx, row.ID)
				if SessionMachine.Allowed(from, to) {
					if err != nil || got.State != to || len(evs) != 1 || evs[0].Seq != 1 || evs[0].Kind != "state" {
						t.Fatalf("allowed: err %v, state %s, %d events", err, got.State, len(evs))
					}
					if ended := got.EndedAt != nil; ended != (to == StateStopped || to == StateFailed) {
						t.Fatalf("ended_at %v after → %s", got.EndedAt, to)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), "not allowed") || got.State != from || len(evs) != 0 {
					t.Fatalf("refused: err %v, state %s, %d events", err, got.State, len(evs))
				}
			})
		}
	}
}

// TestApprovalResolutions (must-show 1 and 3): an approval is resolved only from pending;
// from every other state both approve and deny are refused with its state named, and an
// expired one (past its expiry, not yet swept) is refused as expired.
func TestApprovalResolutions(t *testing.T) {
	s, acct := testDB(t)
	ctx := context.Background()
	mk := func(state string, expires time.Time) string {
		a, err := s.q.InsertAgentApproval(ctx, store.NewAgentApproval{ID: uuid.New(), AccountID: acct, Action: "prompt",
			Arguments: []byte(`{}`), ArgumentsHash: "h", ExpiresAt: expires})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, "UPDATE agent_approvals SET state = $2 WHERE id = $1", a.ID, state); err != nil {
			t.Fatal(err)
		}
		return a.ID.String()
	}
	later := time.Now().Add(time.Hour)
	for _, from := range ApprovalMachine.States {
		for _, approve := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/approve=%v", from, approve), func(t *testing.T) {
				id := mk(from, later)
				a, err := s.Resolve(ctx, &acct, id, approve, "operator")
				if from == ApprovalPending {
					want := ApprovalDenied
					if approve {
						want = ApprovalApproved
					}
					if err != nil || a.State != want || !ApprovalMachine.Allowed(from, want) || a.ResolvedBy != "operator" {
						t.Fatalf("resolve pending: %+v, %v", a, err)
					}
					if approve != (a.ActionStatus == ActionQueued) {
						t.Fatalf("action status %q", a.ActionStatus)
					}
					return
				}
				var c *ConflictError
				if !errors.As(err, &c) || !strings.Contains(c.Message, "is already "+from) {
					t.Fatalf("resolve %s: %v", from, err)
				}
			})
		}
	}
	id := mk(ApprovalPending, time.Now().Add(-time.Second))
	var c *ConflictError
	if _, err := s.Resolve(ctx, nil, id, true, "operator"); !errors.As(err, &c) || !strings.Contains(c.Message, "is already expired") {
		t.Fatalf("resolve past expiry: %v", err)
	}
	other := uuid.New()
	if _, err := s.Resolve(ctx, &other, mk(ApprovalPending, later), true, "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another account's approval: %v", err)
	}
}
