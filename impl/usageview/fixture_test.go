package usageview_test

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/queries"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a migrated database of the test's own, with the store that writes usage the way
// the gateway does and the service under test.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	url   string
	st    *store.Store
	pool  *pgxpool.Pool
	svc   *usageview.Service
	now   time.Time
	reqNo int
}

func newFixture(t testing.TB, now time.Time) *fixture {
	t.Helper()
	ctx := context.Background()
	url := pgtest.ConnString(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(ctx, t, pool)
	f := &fixture{t: t, ctx: ctx, url: url, st: st, pool: pool, now: now}
	f.svc = usageview.New(pool, usageview.Options{Now: func() time.Time { return f.now }})
	return f
}

// migrate applies the numbered migrations of queries/migrations in order, as store.Migrate
// does before it turns to River's (the agents' job queue, which the Usage page never reads).
func migrate(ctx context.Context, t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	files, err := fs.Glob(queries.Migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, file := range files {
		script, err := fs.ReadFile(queries.Migrations, file)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Conn().PgConn().Exec(ctx, string(script)).ReadAll()
		conn.Release()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

// account creates an account with credit enough for any test.
func (f *fixture) account(name string) uuid.UUID {
	f.t.Helper()
	a, err := f.st.CreateAccount(f.ctx, name, "default")
	if err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := f.st.Append(f.ctx, store.LedgerChange{AccountID: a.ID, AmountMicros: 1 << 40, Reason: store.ReasonGrant, IdempotencyKey: "grant"}); err != nil {
		f.t.Fatal(err)
	}
	return a.ID
}

// key creates a key of the account (its hash is made up: no request is ever authenticated).
func (f *fixture) key(account uuid.UUID, name string) uuid.UUID {
	f.t.Helper()
	hash := make([]byte, 32)
	id := uuid.New()
	copy(hash, id[:])
	k, err := f.st.CreateAPIKey(f.ctx, store.NewAPIKey{AccountID: account, Name: name, Hash: hash, DisplayPrefix: "tgk_" + name[:min(4, len(name))]})
	if err != nil {
		f.t.Fatal(err)
	}
	return k.ID
}

// write writes and bills usage records the way the gateway's batching writer does; a record
// without a RequestID gets a fresh one.
func (f *fixture) write(records ...store.UsageRecord) {
	f.t.Helper()
	for i := range records {
		if records[i].RequestID == "" {
			f.reqNo++
			records[i].RequestID = fmt.Sprintf("req-%06d", f.reqNo)
		}
		if records[i].FinishedAt.IsZero() {
			records[i].FinishedAt = records[i].StartedAt.Add(250 * time.Millisecond)
		}
	}
	res, err := f.st.WriteUsage(f.ctx, "usageview-test", records)
	if err != nil {
		f.t.Fatal(err)
	}
	if res.Written != len(records) {
		f.t.Fatalf("wrote %d of %d usage records", res.Written, len(records))
	}
}

// bulkSpec describes rows loaded with generate_series: Rows rows over Span up to End, two in
// three for Main and one in three for Other (interleaved, as a shared table holds them), on
// Keys keys per account (one row in twenty without a key), five models and one rare model
// (one row in a thousand), three routes, and 1% failed and 2% incomplete requests.
type bulkSpec struct {
	Main, Other uuid.UUID
	Rows        int
	Keys        int
	End         time.Time
	Span        time.Duration
	// Priced gives every row what a record billed per kind carries (migration 0012): cache
	// counts, a price of about 250 bytes and the cost of each kind (bulkPrice).
	Priced bool
	// Ledger writes each account's credit ledger as the usage writer would have: a grant
	// before the first request, then one usage entry per row, stamped with its start time.
	Ledger bool
}

// bulkModels are the models of bulk rows, after rareModel.
var bulkModels = []string{"service-flint", "service-sonnet", "service-haiku", "fusion-1", "service-opus"}

const rareModel = "rare-model"

// bulkLoad loads the rows in one statement and vacuums and analyzes the table, as autovacuum
// would after a load. It returns the keys of Main.
func (f *fixture) bulkLoad(s bulkSpec) []uuid.UUID {
	f.t.Helper()
	ctx := f.ctx
	keys := func(acct uuid.UUID) []uuid.UUID {
		rows, err := f.pool.Query(ctx, `
			INSERT INTO api_keys (account_id, name, key_hash, display_prefix)
			SELECT $1::uuid, 'bulk-key-' || g, sha256(($1::uuid::text || ':' || g)::bytea), 'tgk_b' || g
			FROM generate_series(1, $2::int) g RETURNING id`, acct, s.Keys)
		if err != nil {
			f.t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			f.t.Fatal(err)
		}
		return ids
	}
	mainKeys, otherKeys := keys(s.Main), keys(s.Other)
	// The months of the span get their partitions first, as a deployment that ran through them
	// has them (the gateway makes each month's ahead of time).
	for m := s.End.Add(-s.Span).UTC().AddDate(0, -1, 0); !m.After(s.End.AddDate(0, 1, 0)); m = m.AddDate(0, 1, 0) {
		if _, err := f.svc.CreatePartition(ctx, time.Date(m.Year(), m.Month(), 1, 0, 0, 0, 0, time.UTC)); err != nil {
			f.t.Fatal(err)
		}
	}
	stepMicros := s.Span.Microseconds() / int64(s.Rows)
	_, err := f.pool.Exec(ctx, `
		INSERT INTO usage_records (account_id, request_id, api_key_id, model, route, provider, upstream_model,
		                           input_tokens, output_tokens, cost_micros, status, started_at, finished_at,
		                           cache_read_tokens, cache_write_5m_tokens, reasoning_tokens, service_tier, price,
		                           input_cost_micros, cache_savings_micros)
		SELECT CASE WHEN g % 3 = 0 THEN $2::uuid ELSE $1::uuid END,
		       'bulk-' || g,
		       CASE WHEN g % 20 = 0 THEN NULL
		            WHEN g % 3 = 0 THEN ($4::uuid[])[1 + (g * 7919) % cardinality($4::uuid[])]
		            ELSE ($3::uuid[])[1 + (g * 7919) % cardinality($3::uuid[])] END,
		       CASE WHEN g % 1000 = 7 THEN $5::text ELSE ($6::text[])[1 + (g * 31) % cardinality($6::text[])] END,
		       (ARRAY['/v1/chat/completions', '/v1/responses', '/v1/messages'])[1 + g % 3],
		       'sim', 'expert-' || (g % 4),
		       500 + g % 1000, 100 + g % 300, 100 + (g * 13) % 5000,
		       CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 50 = 1 THEN 'incomplete' ELSE 'completed' END,
		       $7::timestamptz - ($8::bigint - g) * $9::bigint * interval '1 microsecond',
		       $7::timestamptz - ($8::bigint - g) * $9::bigint * interval '1 microsecond' + (50 + g % 2000) * interval '1 millisecond',
		       CASE WHEN $10 THEN (500 + g % 1000) / 5 ELSE 0 END, CASE WHEN $10 THEN (500 + g % 1000) / 10 ELSE 0 END,
		       CASE WHEN $10 THEN (100 + g % 300) / 4 ELSE 0 END, CASE WHEN $10 THEN 'standard' ELSE '' END,
		       CASE WHEN $10 THEN $11::jsonb END, CASE WHEN $10 THEN 100 + (g * 13) % 5000 ELSE 0 END,
		       CASE WHEN $10 THEN (500 + g % 1000) / 5 * 27 / 10 ELSE 0 END
		FROM generate_series(1, $8::bigint) g`,
		s.Main, s.Other, mainKeys, otherKeys, rareModel, bulkModels, s.End, int64(s.Rows), stepMicros, s.Priced, bulkPrice)
	if err != nil {
		f.t.Fatal(err)
	}
	if s.Ledger {
		f.ledgerBulk(s.End.Add(-s.Span - time.Hour))
	}
	// An autovacuum worker's ANALYZE of the fresh rows holds a snapshot that keeps VACUUM from
	// marking their pages all-visible (which index-only scans need): vacuum until it could.
	for try := 0; ; try++ {
		if _, err := f.pool.Exec(ctx, `VACUUM ANALYZE usage_records`); err != nil {
			f.t.Fatal(err)
		}
		var pages, visible int64
		if err := f.pool.QueryRow(ctx, `SELECT relpages, relallvisible FROM pg_class WHERE oid = 'usage_records'::regclass`).Scan(&pages, &visible); err != nil {
			f.t.Fatal(err)
		}
		if visible >= pages*99/100 || try == 50 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := f.pool.Exec(ctx, `ANALYZE api_keys; ANALYZE credit_ledger`); err != nil {
		f.t.Fatal(err)
	}
	return mainKeys
}

// bulkPrice is the price of priced bulk rows: Sonnet 4.5's, as a record keeps it. A priced
// bulk row has a fifth of its input read from the cache and a tenth written to it, and its
// whole cost as the uncached input's (which keeps usage_records_cost_reproducible true).
const bulkPrice = `{"input":3000000,"cache_read":300000,"cache_write_5m":3750000,"cache_write_1h":6000000,"output":15000000,` +
	`"long_context":{"above_input_tokens":200000,"input":6000000,"cache_read":600000,"cache_write_5m":7500000,` +
	`"cache_write_1h":12000000,"output":22500000},"catalog":"claude-sonnet-4-5","effective":"2025-09-29"}`

// ledgerBulk writes every account's credit ledger for the loaded rows: a grant stamped at
// granted, then one usage entry per row in the order of the rows' start times, each stamped
// with its start time, with the running balance.
func (f *fixture) ledgerBulk(granted time.Time) {
	f.t.Helper()
	_, err := f.pool.Exec(f.ctx, `
		INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note, created_at)
		SELECT account_id, $2::bigint, $2::bigint, 'grant', 'bulk-grant', '', $1::timestamptz
		FROM (SELECT DISTINCT account_id FROM usage_records) a ORDER BY account_id`, granted, int64(1)<<50)
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = f.pool.Exec(f.ctx, `
		INSERT INTO credit_ledger (account_id, amount_micros, balance_after_micros, reason, idempotency_key, note, created_at)
		SELECT account_id, -cost_micros,
		       $1::bigint - SUM(cost_micros) OVER (PARTITION BY account_id ORDER BY started_at, id),
		       'usage', 'usage:' || request_id, '', started_at
		FROM usage_records ORDER BY started_at, id`, int64(1)<<50)
	if err != nil {
		f.t.Fatal(err)
	}
}

// tracedService is a Service on a pool of its own that hands every statement it sends, with
// its arguments, to last, so that a test can EXPLAIN exactly what a call ran.
type tracedService struct {
	svc  *usageview.Service
	pool *pgxpool.Pool
	last []traced
}

type traced struct {
	sql  string
	args []any
}

func (f *fixture) traced() *tracedService {
	f.t.Helper()
	cfg, err := pgxpool.ParseConfig(f.url)
	if err != nil {
		f.t.Fatal(err)
	}
	ts := &tracedService{}
	cfg.ConnConfig.Tracer = tracer(func(sql string, args []any) { ts.last = append(ts.last, traced{sql, args}) })
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(pool.Close)
	ts.pool = pool
	ts.svc = usageview.New(pool, usageview.Options{Now: func() time.Time { return f.now }})
	return ts
}

type tracer func(sql string, args []any)

func (t tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t(d.SQL, d.Args)
	return ctx
}

func (tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of a traced statement as a prepared statement's
// generic plan (what a statement prepared by pgx's statement cache gets after its fifth run,
// when the planner finds it no worse), or as the custom plan of its arguments.
func explain(ctx context.Context, t testing.TB, pool *pgxpool.Pool, q traced, generic bool) string {
	t.Helper()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var lines []string
	collect := func(rows pgx.Rows, err error) {
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		lines = got
	}
	if !generic {
		collect(conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q.sql, q.args...))
		return strings.Join(lines, "\n")
	}
	desc, err := conn.Conn().Prepare(ctx, "", q.sql)
	if err != nil {
		t.Fatal(err)
	}
	types := make([]string, len(desc.ParamOIDs))
	params := make([]string, len(desc.ParamOIDs))
	for i, oid := range desc.ParamOIDs {
		typ, ok := conn.Conn().TypeMap().TypeForOID(oid)
		if !ok {
			t.Fatalf("parameter %d: unknown type %d", i+1, oid)
		}
		types[i] = typ.Name
		params[i] = literal(t, q.args[i])
	}
	if _, err := conn.Exec(ctx, "PREPARE usageview_explained ("+strings.Join(types, ", ")+") AS "+q.sql); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "DEALLOCATE usageview_explained") //nolint:errcheck // the connection's own statement
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode") //nolint:errcheck
	collect(conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE usageview_explained ("+strings.Join(params, ", ")+")"))
	return strings.Join(lines, "\n")
}

// literal is a statement argument as an SQL literal (EXPLAIN EXECUTE takes no parameters).
func literal(t testing.TB, arg any) string {
	t.Helper()
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := arg.(type) {
	case uuid.UUID:
		return quote(v.String())
	case time.Time:
		return quote(v.Format(time.RFC3339Nano))
	case pgtype.Date:
		return quote(v.Time.Format(time.DateOnly))
	case string:
		return quote(v)
	case int64, int32, int:
		return fmt.Sprint(v)
	case []uuid.UUID:
		parts := make([]string, len(v))
		for i, id := range v {
			parts[i] = id.String()
		}
		return quote("{" + strings.Join(parts, ",") + "}")
	}
	t.Fatalf("no literal for %T", arg)
	return ""
}
