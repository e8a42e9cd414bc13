package pgtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/impl/pgcluster"
)

// EnvDatabaseURL names the environment variable that points the package at
// an existing server instead of a throwaway cluster.
const EnvDatabaseURL = "TEST_DATABASE_URL"

// setupTimeout bounds starting the throwaway cluster (or reaching the
// TEST_DATABASE_URL server); opTimeout bounds creating or dropping one
// database.
const (
	setupTimeout = 2 * time.Minute
	opTimeout    = time.Minute
)

// server is where the test databases are created.
type server struct {
	// admin is a small pool on a database that is never dropped, used to
	// create and drop the test databases.
	admin *pgxpool.Pool
	// connString returns a connection string for database name.
	connString func(name string) string
	// cluster is the throwaway cluster, or nil for TEST_DATABASE_URL.
	cluster *pgcluster.Cluster
}

var (
	mu       sync.Mutex
	once     sync.Once
	shared   *server
	setupErr error
	closed   bool

	// setupLog receives the cluster's messages while the first test that
	// needs the server sets it up; afterwards they are dropped.
	setupLogMu sync.Mutex
	setupLog   testing.TB
)

// Main runs the tests of a package, then stops the throwaway cluster, if
// one was started, deletes its directory, and exits with the tests' status.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Shutdown stops the throwaway cluster, if one was started, and deletes its
// directory; with TEST_DATABASE_URL it only closes the package's connections.
// It is for a TestMain that cannot use Main (because it combines several
// helpers, say) and must run after m.Run. ConnString fails once Shutdown has
// been called; calling Shutdown again does nothing.
func Shutdown() error {
	mu.Lock()
	defer mu.Unlock()
	closed = true
	if shared == nil {
		return nil
	}
	s := shared
	shared = nil
	s.admin.Close()
	if s.cluster == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.cluster.Stop(ctx); err != nil { // Ephemeral: also deletes the data directory
		return fmt.Errorf("pgtest: stop the throwaway cluster: %w", err)
	}
	return nil
}

// getServer returns the shared server, setting it up on first use.
func getServer(t testing.TB) (*server, error) {
	once.Do(func() {
		setupLogMu.Lock()
		setupLog = t
		setupLogMu.Unlock()
		s, err := setup()
		setupLogMu.Lock()
		setupLog = nil
		setupLogMu.Unlock()
		mu.Lock()
		shared, setupErr = s, err
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if closed {
		return nil, errors.New("pgtest: the server was already shut down by Main or Shutdown")
	}
	return shared, setupErr
}

func logf(format string, args ...any) {
	setupLogMu.Lock()
	defer setupLogMu.Unlock()
	if setupLog != nil {
		setupLog.Logf(format, args...)
	}
}

// setup connects to TEST_DATABASE_URL's server or starts a throwaway
// cluster.
func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if base := os.Getenv(EnvDatabaseURL); base != "" {
		admin, err := newAdminPool(ctx, base)
		if err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", EnvDatabaseURL, err)
		}
		logf("pgtest: creating test databases on the %s server", EnvDatabaseURL)
		return &server{
			admin:      admin,
			connString: func(name string) string { return withDatabase(base, name) },
		}, nil
	}

	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	began := time.Now()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir:   dir,
		Ephemeral: true,
		Settings:  map[string]string{"shared_buffers": "32MB"},
		Logf:      logf,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logf("pgtest: throwaway cluster started in %s", time.Since(began).Round(time.Millisecond))
	admin, err := newAdminPool(ctx, cluster.ConnString("postgres"))
	if err != nil {
		_ = cluster.Stop(ctx)
		return nil, fmt.Errorf("pgtest: throwaway cluster: %w", err)
	}
	return &server{admin: admin, connString: cluster.ConnString, cluster: cluster}, nil
}

func newAdminPool(ctx context.Context, connString string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the server: %w", err)
	}
	return pool, nil
}

// ConnString returns a connection string to a fresh, empty database
// dedicated to the calling test, and drops that database when the test and
// its subtests have finished. It skips the test when PostgreSQL is neither
// installed nor named by TEST_DATABASE_URL, or fails it instead when the CI
// environment variable is "true".
func ConnString(t testing.TB) string {
	t.Helper()
	s, err := getServer(t)
	if err != nil {
		if errors.Is(err, pgcluster.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("pgtest: %v; or set %s to a server's connection string", err, EnvDatabaseURL)
		}
		t.Fatalf("pgtest: %v", err)
	}
	name := databaseName(t.Name())
	ident := pgx.Identifier{name}.Sanitize()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// template0 holds nothing but the system catalogs, and no session ever
	// connects to it, so concurrent creations never find it busy.
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.connString(name)
}

// Pool returns a pgxpool.Pool on a fresh, empty database dedicated to the
// calling test (see ConnString). The pool is closed, and the database
// dropped, when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cs := ConnString(t)
	pool, err := pgxpool.New(context.Background(), cs)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before the database's drop, registered earlier
	return pool
}

// databaseName makes a unique, valid database name that shows which test
// owns it: "t_" + the test's name, lower-cased and reduced to [a-z0-9_],
// then 12 random hex digits, 63 bytes at most.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return fmt.Sprintf("t_%s_%012x", b.String(), rand.Uint64()&(1<<48-1))
}

// withDatabase returns connString with its database replaced by name.
// connString is a postgres:// or postgresql:// URL or a key/value string.
func withDatabase(connString, name string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		if u, err := url.Parse(connString); err == nil {
			u.Path, u.RawPath = "/"+name, ""
			return u.String()
		}
	}
	// In a key/value string a later key overrides an earlier one.
	return strings.TrimSpace(connString) + " dbname=" + quoteDSNValue(name)
}

// quoteDSNValue quotes a value for a key/value connection string when needed.
func quoteDSNValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\r\n'\\") {
		return v
	}
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `'`, `\'`)
	return "'" + v + "'"
}
