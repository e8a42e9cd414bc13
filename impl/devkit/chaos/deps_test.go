package chaos

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// TestDatabaseCrashAndHang runs the run's own PostgreSQL through the faults the run injects:
// it is durable, a crash (pg_ctl stop -m immediate) keeps what was committed and the next
// start runs crash recovery, and a hang leaves connections open while no query is answered,
// until it is resumed.
func TestDatabaseCrashAndHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil { // the postgres OS user must reach it when we are root
		t.Fatal(err)
	}
	pg, err := startPostgres(ctx, root, t.Logf)
	if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = pg.resume()
		_ = pg.stop(context.WithoutCancel(ctx))
	}()
	conn, err := pgx.Connect(ctx, pg.url())
	if err != nil {
		t.Fatal(err)
	}
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "on" {
			t.Errorf("%s = %s; the run's database must be durable", setting, v)
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE acknowledged (n int); INSERT INTO acknowledged VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)

	pid := pg.cluster.PID()
	if err := pg.crash(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := procStat(strconv.Itoa(pid)); ok {
		t.Fatalf("the postmaster (pid %d) is still there after the crash", pid)
	}
	if err := pg.start(ctx); err != nil {
		t.Fatal(err)
	}
	serverLog, err := os.ReadFile(pg.cluster.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(serverLog), "not properly shut down") {
		t.Errorf("the start after the crash ran no crash recovery; server log:\n%s", serverLog)
	}
	conn, err = pgx.Connect(ctx, pg.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM acknowledged`).Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("after the crash: %d rows (%v); want the 3 committed", rows, err)
	}

	n, err := pg.hang()
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 { // the postmaster, this connection's backend and the server's own processes
		t.Errorf("the hang stopped %d processes; want the postmaster and its children", n)
	}
	qctx, qcancel := context.WithTimeout(ctx, time.Second)
	err = conn.QueryRow(qctx, `SELECT count(*) FROM acknowledged`).Scan(&rows)
	qcancel()
	if err == nil {
		t.Fatal("a query was answered by the hung database")
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	if c, err := pgx.Connect(cctx, pg.url()); err == nil {
		_ = c.Close(ctx)
		t.Error("a new connection was served by the hung database")
	}
	ccancel()
	if err := pg.resume(); err != nil {
		t.Fatal(err)
	}
	conn2, err := pgx.Connect(ctx, pg.url())
	if err != nil {
		t.Fatalf("after the hang: %v", err)
	}
	defer conn2.Close(context.WithoutCancel(ctx))
	if err := conn2.QueryRow(ctx, `SELECT count(*) FROM acknowledged`).Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("after the hang: %d rows (%v)", rows, err)
	}
}
