package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestUsageWriterWaitsForAKeySettlementOfUnknownOutcome: a settlement beyond its reservation
// (SettleKeyReservationBeyond: the reservation and its budget locked, the reservation settled
// at its cost of 100,000 and 200,000 of excess) whose COMMIT has not reached the server yet, as
// when its client gave up waiting for the answer (store.UsageRecord.SettleKey's case of an
// unknown outcome), while the usage writer writes the request's record, billed 100,000. The
// writer's statement waits for the settlement's transaction and then counts the record's bill
// whichever way it ended: committed late, the reservation is brought down from 300,000 to
// 100,000 and the budget's spend with it; rolled back (the COMMIT never arrived), the
// reservation still unsettled is settled at 100,000 and leaves reserved_micros. The meter
// keeps no retry of its own for the excess: this write is what takes it back.
func TestUsageWriterWaitsForAKeySettlementOfUnknownOutcome(t *testing.T) {
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "committed-late", false: "rolled-back"}[commit]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cs := pgtest.ConnString(t)
			st := openStoreAt(t, cs)
			acct := fundedAccount(t, st, 10_000_000)
			key := cappedKey(t, st, acct, 5_000_000)
			period := store.CapPeriodMonthly.Start(time.Now())
			if kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
				AmountMicros: 100_000, RequestID: "unknown", Holder: "me", Lease: time.Minute}); err != nil || !kr.Reserved {
				t.Fatalf("reserve: %+v %v", kr, err)
			}

			// The settlement's transaction, up to its COMMIT, as SettleKeyReservationBeyond
			// writes it.
			settler, err := pgx.Connect(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			defer settler.Close(ctx)
			tx, err := settler.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			for _, q := range []string{
				`SELECT 1 FROM key_reservations WHERE key_id = $1 AND request_id = 'unknown' FOR UPDATE`,
				`SELECT 1 FROM key_budgets WHERE key_id = $1 FOR UPDATE`,
				`UPDATE key_reservations SET settled_at = now(), settled_micros = 300000 WHERE key_id = $1 AND request_id = 'unknown'`,
				`UPDATE key_budgets SET spent_micros = spent_micros + 300000, reserved_micros = reserved_micros - 100000 WHERE key_id = $1`,
			} {
				if _, err := tx.Exec(ctx, q, key); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}

			written := make(chan error, 1)
			go func() {
				now := time.Now()
				_, err := st.WriteUsage(ctx, "", []store.UsageRecord{{AccountID: acct, RequestID: "unknown", APIKeyID: key,
					Model: "m", Route: "/v1/messages", CostMicros: 100_000, Status: "completed", StartedAt: now, FinishedAt: now,
					SettleKey: true}})
				written <- err
			}()
			waitForLockWaiters(t, cs, 1)
			select {
			case err := <-written:
				t.Fatalf("the writer returned (%v) while the settlement held the reservation", err)
			default:
			}
			if commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := <-written; err != nil {
				t.Fatal(err)
			}
			b, err := st.GetKeyBudget(ctx, key, period)
			if err != nil {
				t.Fatal(err)
			}
			if b.SpentMicros != 100_000 || b.ReservedMicros != 0 {
				t.Errorf("budget %+v, want the 100,000 billed spent and nothing reserved", b)
			}
			if _, usage, err := st.UsageTotals(ctx, acct); err != nil || usage != 100_000 {
				t.Errorf("usage %d (%v), want the 100,000 billed", usage, err)
			}
		})
	}
}

// waitForLockWaiters waits until n sessions of the test's database wait for a lock.
func waitForLockWaiters(t *testing.T, cs string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 10 s, want %d", waiting, n)
		}
	}
}

// TestKeyReservationCountsWhatTheLedgerBilled: a capped key's reservation ends counting the
// bill of the usage record the ledger holds for its request id, whichever attempt settled it.
// A settlement beyond the reservation whose outcome was unknown committed 300,000; the ledger
// then bills another attempt's record of the request id (a retry served by another process)
// at 250,000, and the writer moves the reservation to that bill. A record refused as a duplicate
// leaves the bill of the record written first; a request id billed to another key counts
// nothing against this one.
func TestKeyReservationCountsWhatTheLedgerBilled(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	acct := fundedAccount(t, st, 10_000_000)
	key := cappedKey(t, st, acct, 5_000_000)
	other := cappedKey(t, st, acct, 5_000_000)
	period := store.CapPeriodMonthly.Start(time.Now())
	spent := func() int64 {
		t.Helper()
		b, err := st.GetKeyBudget(ctx, key, period)
		if err != nil {
			t.Fatal(err)
		}
		if b.ReservedMicros != 0 {
			t.Fatalf("budget %+v: want nothing reserved", b)
		}
		return b.SpentMicros
	}
	write := func(request string, apiKey uuid.UUID, cost int64) {
		t.Helper()
		now := time.Now()
		if _, err := st.WriteUsage(ctx, "", []store.UsageRecord{{AccountID: acct, RequestID: request, APIKeyID: apiKey,
			Model: "m", Route: "/v1/messages", CostMicros: cost, Status: "completed", StartedAt: now, FinishedAt: now,
			SettleKey: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
		AmountMicros: 100_000, RequestID: "retried", Holder: "me", Lease: time.Minute}); err != nil || !kr.Reserved {
		t.Fatalf("reserve: %+v %v", kr, err)
	}
	if charged, err := st.SettleKeyReservationBeyond(ctx, key, "retried", 100_000, 200_000, 5_000_000); err != nil || charged != 200_000 {
		t.Fatalf("settle beyond: %d, %v", charged, err)
	}
	write("retried", key, 250_000)
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d once the retry's record is billed, want its 250,000", got)
	}
	write("retried", key, 100_000) // the first attempt's record, a duplicate
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d after the duplicate, want the 250,000 billed", got)
	}

	// Billed to another key: this key's reservation of the request id counts nothing.
	if kr, err := st.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: period, CapMicros: 5_000_000,
		AmountMicros: 100_000, RequestID: "other-key", Holder: "me", Lease: time.Minute}); err != nil || !kr.Reserved {
		t.Fatalf("reserve: %+v %v", kr, err)
	}
	write("other-key", other, 40_000)
	write("other-key", key, 60_000) // refused as a duplicate
	if got := spent(); got != 250_000 {
		t.Fatalf("the key counts %d, want 250,000: the request id was billed to another key", got)
	}
}
