package chaos

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// books is what the database says after the run.
type books struct {
	// usage and ledger count the usage records and usage ledger entries per request id.
	usage, ledger map[string]int
	accounts      []accountBooks
	// heldMicros and holds are the credit still held, and by how many holds.
	heldMicros int64
	holds      int
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
	err = conn.QueryRow(ctx, `SELECT count(*), COALESCE(sum(amount_micros), 0)::bigint FROM credit_holds WHERE amount_micros > 0`).Scan(&b.holds, &b.heldMicros)
	return b, err
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
