package pgtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// checkFreshAndMark fails unless the test's database is empty, then creates
// a table in it. Two tests doing this in either order would see each other's
// table if they shared a database.
func checkFreshAndMark(t *testing.T) {
	ctx := context.Background()
	pool := Pool(t)
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("fresh database has %d tables", tables)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE marker (id int)"); err != nil {
		t.Fatal(err)
	}
}

func TestFreshDatabaseA(t *testing.T) { checkFreshAndMark(t) }

func TestFreshDatabaseB(t *testing.T) { checkFreshAndMark(t) }

func TestDatabaseDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("owner", func(t *testing.T) {
		conn := connect(t, ConnString(t))
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "t_testdatabasedroppedaftertest_owner_") {
			t.Errorf("database name %q does not show the test's name", name)
		}
		// The connection stays open: the drop must force it closed.
	})
	s, err := getServer(t)
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := s.admin.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestParallelDatabases(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			var name string
			conn := connect(t, ConnString(t))
			if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[name] {
				t.Errorf("database %s handed out twice", name)
			}
			seen[name] = true
		})
	}
}

// connect opens a connection that is left open on purpose: dropping the
// test's database WITH (FORCE) must end it.
func connect(t *testing.T, connString string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func TestDatabaseName(t *testing.T) {
	a, b := databaseName("TestX/sub test#1"), databaseName("TestX/sub test#1")
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if !strings.HasPrefix(a, "t_testx_sub_test_1_") {
		t.Fatalf("name %q", a)
	}
	long := databaseName(strings.Repeat("VeryLongTestName", 20))
	if len(long) > 63 {
		t.Fatalf("name %q is %d bytes", long, len(long))
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@db.example:5433/postgres?sslmode=disable", "postgres://u:p@db.example:5433/t_x?sslmode=disable"},
		{"postgresql:///postgres?host=/tmp/s", "postgresql:///t_x?host=/tmp/s"},
		{"postgres://u@h", "postgres://u@h/t_x"},
		{"host=/tmp/s user=postgres dbname=postgres", "host=/tmp/s user=postgres dbname=postgres dbname=t_x"},
	} {
		got := withDatabase(tc.in, "t_x")
		if got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("parse %q: %v", got, err)
			continue
		}
		if cfg.Database != "t_x" {
			t.Errorf("%q connects to database %q", got, cfg.Database)
		}
	}
}
