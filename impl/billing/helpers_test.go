package billing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore connects to the database at cs, applying the migrations.
func openStore(t *testing.T, cs string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// newDB returns a fresh database's connection string and a store on it.
func newDB(t *testing.T) (string, *store.Store) {
	t.Helper()
	cs := pgtest.ConnString(t)
	return cs, openStore(t, cs)
}

// newAccount creates an account granted balance micro-units.
func newAccount(t *testing.T, st *store.Store, balance int64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	acct, err := st.CreateAccount(ctx, "acct-"+uuid.NewString()[:8], "default")
	if err != nil {
		t.Fatal(err)
	}
	if balance > 0 {
		if _, _, err := st.Append(ctx, store.LedgerChange{
			AccountID: acct.ID, AmountMicros: balance, Reason: store.ReasonGrant, IdempotencyKey: "grant-1",
		}); err != nil {
			t.Fatal(err)
		}
	}
	return acct.ID
}

// logSink collects a meter's log records.
type logSink struct {
	mu      sync.Mutex
	records []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	s.mu.Lock()
	s.records = append(s.records, b.String())
	s.mu.Unlock()
	return nil
}

func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }

func (s *logSink) logger() *slog.Logger { return slog.New(s) }

func (s *logSink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.records...)
}

// checkRest checks an account at rest: nothing held, no hold rows, the ledger sums to the
// balance, and the usage ledger matches the usage records.
func checkRest(t *testing.T, st *store.Store, acct uuid.UUID) store.Credit {
	t.Helper()
	ctx := context.Background()
	credit, err := st.AccountCredit(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if credit.HeldMicros != 0 || credit.BalanceMicros < 0 {
		t.Errorf("at rest: balance %d, held %d; want held 0 and balance >= 0", credit.BalanceMicros, credit.HeldMicros)
	}
	holds, err := st.CreditHolds(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds) != 0 {
		t.Errorf("at rest: %d hold rows remain: %+v", len(holds), holds)
	}
	sum, err := st.LedgerSum(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if sum != credit.BalanceMicros {
		t.Errorf("the ledger sums to %d, the balance is %d", sum, credit.BalanceMicros)
	}
	return credit
}

// usageLedger returns the account's usage entries by idempotency key.
func usageLedger(t *testing.T, st *store.Store, acct uuid.UUID) map[string]store.LedgerEntry {
	t.Helper()
	entries, err := st.LedgerEntries(context.Background(), acct, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]store.LedgerEntry)
	for _, e := range entries {
		if e.Reason != store.ReasonUsage {
			continue
		}
		if _, dup := out[e.IdempotencyKey]; dup {
			t.Errorf("two usage entries with key %s", e.IdempotencyKey)
		}
		out[e.IdempotencyKey] = e
	}
	return out
}

// goneProcessEntries returns n spill entries of a process that is gone, for acct: requests
// gone-0 to gone-<n-1>, costing 10, 20, ... micro-units, and their costs by request id.
func goneProcessEntries(acct uuid.UUID, n int) (map[string]int64, []usagespill.Entry) {
	costs := make(map[string]int64, n)
	entries := make([]usagespill.Entry, 0, n)
	for i := range n {
		id := fmt.Sprintf("gone-%d", i)
		costs[id] = int64(10 * (i + 1))
		entries = append(entries, usagespill.Entry{Holder: "a-process-that-is-gone", Record: store.UsageRecord{
			AccountID: acct, RequestID: id, Model: "service-flint", Route: "/v1/chat/completions", CostMicros: costs[id],
			Status: "completed", StartedAt: time.Now(), FinishedAt: time.Now(),
		}})
	}
	return costs, entries
}
