package chaos

import (
	"context"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/store"
)

// books is what the database says after the run.
type books struct {
	// usage and ledger count the usage records and usage ledger entries per request id.
	usage, ledger map[string]int
	accounts      []accountBooks
	// heldMicros and holds are the credit still held, and by how many holds.
	heldMicros int64
	holds      int
	// records are the usage records, read as the gateway reads them (store.UsageRecords), by
	// request id; accountOf names each record's account.
	records   map[string]store.UsageRecord
	accountOf map[string]string
	// keys are the capped keys' budgets, by key name.
	keys map[string]keyBooks
	// keyReservations counts the key reservations still live (neither settled nor reaped, with
	// an amount), and keyReservedMicros what the key budgets still count as reserved.
	keyReservations   int
	keyReservedMicros int64
}

// keyBooks is what the database says of a capped key: its cap, the most its usage records
// charge in one cap period, and what its budgets count as spent (over every period) against
// what its usage records charge.
type keyBooks struct {
	capMicros, periodSpendMicros, budgetSpentMicros, usageMicros int64
}

// accountBooks is one account's balance against its ledger.
type accountBooks struct {
	name                  string
	balance, ledger, held int64
}

// readBooks reads the books from the database at url.
func readBooks(ctx context.Context, url string) (*books, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	b := &books{usage: map[string]int{}, ledger: map[string]int{}}
	if err := countBy(ctx, conn, `SELECT request_id, count(*) FROM usage_records GROUP BY request_id`, b.usage); err != nil {
		return nil, err
	}
	if err := countBy(ctx, conn, `SELECT substr(idempotency_key, 7), count(*) FROM credit_ledger WHERE reason = 'usage' GROUP BY idempotency_key`, b.ledger); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT a.name, a.balance_micros, a.held_micros, COALESCE((SELECT sum(l.amount_micros) FROM credit_ledger l WHERE l.account_id = a.id), 0)::bigint FROM accounts a ORDER BY a.name`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var a accountBooks
		if err := rows.Scan(&a.name, &a.balance, &a.held, &a.ledger); err != nil {
			return nil, err
		}
		b.accounts = append(b.accounts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*), COALESCE(sum(amount_micros), 0)::bigint FROM credit_holds WHERE amount_micros > 0`).Scan(&b.holds, &b.heldMicros); err != nil {
		return nil, err
	}
	if err := readKeyBooks(ctx, conn, b); err != nil {
		return nil, err
	}
	if err := readRecords(ctx, url, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readKeyBooks reads the capped keys' budgets and what their usage records charge, and the key
// reservations still live.
func readKeyBooks(ctx context.Context, conn *pgx.Conn, b *books) error {
	b.keys = map[string]keyBooks{}
	// A key's spend in a period: its usage records started in the period (UTC days or months,
	// or one period for ever), as billing's CapPeriod.Start counts them.
	rows, err := conn.Query(ctx, `
		SELECT k.name, k.credit_cap_micros,
		       COALESCE((SELECT max(p.spent) FROM (
		           SELECT sum(u.cost_micros) AS spent FROM usage_records u WHERE u.api_key_id = k.id
		           GROUP BY CASE k.cap_period WHEN 'daily' THEN date_trunc('day', u.started_at AT TIME ZONE 'UTC')
		                                      WHEN 'monthly' THEN date_trunc('month', u.started_at AT TIME ZONE 'UTC')
		                                      ELSE 'epoch'::timestamp END) p), 0)::bigint,
		       COALESCE((SELECT sum(kb.spent_micros) FROM key_budgets kb WHERE kb.key_id = k.id), 0)::bigint,
		       COALESCE((SELECT sum(u.cost_micros) FROM usage_records u WHERE u.api_key_id = k.id), 0)::bigint
		FROM api_keys k WHERE k.credit_cap_micros IS NOT NULL`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var k keyBooks
		if err := rows.Scan(&name, &k.capMicros, &k.periodSpendMicros, &k.budgetSpentMicros, &k.usageMicros); err != nil {
			return err
		}
		b.keys[name] = k
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM key_reservations WHERE NOT reaped AND settled_at IS NULL AND amount_micros > 0`).Scan(&b.keyReservations); err != nil {
		return err
	}
	return conn.QueryRow(ctx, `SELECT COALESCE(sum(reserved_micros), 0)::bigint FROM key_budgets`).Scan(&b.keyReservedMicros)
}

// readRecords reads every account's usage records through the store, as the gateway's own
// pages and tests read them.
func readRecords(ctx context.Context, url string, b *books) error {
	st, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id::text, name FROM accounts`)
	if err != nil {
		return err
	}
	names := map[uuid.UUID]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return err
		}
		u, err := uuid.Parse(id)
		if err != nil {
			return err
		}
		names[u] = name
	}
	if err := rows.Err(); err != nil {
		return err
	}
	b.records, b.accountOf = map[string]store.UsageRecord{}, map[string]string{}
	for id, name := range names {
		recs, err := st.UsageRecords(ctx, id, math.MaxInt32)
		if err != nil {
			return fmt.Errorf("chaos: usage records of %s: %w", name, err)
		}
		for _, r := range recs {
			b.records[r.RequestID], b.accountOf[r.RequestID] = r, name
		}
	}
	return nil
}

// expiredKeyReservations counts the key reservations whose lease has expired and that no
// process has reaped yet.
func expiredKeyReservations(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM key_reservations WHERE expires_at < now() AND NOT reaped AND settled_at IS NULL AND amount_micros > 0`).Scan(&n)
	return n, err
}

// meanCost is the mean cost of the usage records of whole answers so far, and the largest
// (0, 0 when there are none).
func meanCost(ctx context.Context, url string) (mean, most int64, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT COALESCE(avg(cost_micros), 0)::bigint, COALESCE(max(cost_micros), 0)::bigint FROM usage_records WHERE status = 'ok'`).Scan(&mean, &most)
	return mean, most, err
}

// expiredHolds counts the holds whose lease has expired and that no process has released yet.
func expiredHolds(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM credit_holds WHERE expires_at < now() AND amount_micros > 0`).Scan(&n)
	return n, err
}

func countBy(ctx context.Context, conn *pgx.Conn, query string, into map[string]int) error {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		into[id] = n
	}
	return rows.Err()
}
