package store_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestPoolSessionsAreBounded: every connection of a store's pool sets the session bounds that
// end a session whose client went silent (idle_in_transaction_session_timeout, the server's
// TCP keepalives and tcp_user_timeout), with no server configuration; a bound the database URL
// names is the URL's. Before, nothing set them: a backend idle in a transaction waited for its
// lost client for as long as the kernel's keepalive (about two hours), its locks held.
func TestPoolSessionsAreBounded(t *testing.T) {
	ctx := context.Background()
	cs := pgtest.ConnString(t)
	st, err := store.Open(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The TCP settings read 0 over a Unix socket (the test server's), whatever the session
	// asked for: their values are checked where PostgreSQL keeps what the session set.
	want := map[string]string{
		"idle_in_transaction_session_timeout": "10s",
		"tcp_keepalives_idle":                 "15s",
		"tcp_keepalives_interval":             "5s",
		"tcp_keepalives_count":                "3",
		"tcp_user_timeout":                    "30s",
	}
	for name, value := range want {
		var source string
		if err := st.Pool().QueryRow(ctx, `SELECT source FROM pg_settings WHERE name = $1`, name).Scan(&source); err != nil {
			t.Fatal(err)
		}
		if name == "idle_in_transaction_session_timeout" {
			var got string
			if err := st.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != value {
				t.Errorf("%s is %s, want %s", name, got, value)
			}
		}
		if source != "client" {
			t.Errorf("%s comes from %q, want the session's start-up (client)", name, source)
		}
	}

	short, err := store.Open(ctx, withParam(cs, "idle_in_transaction_session_timeout", "30s"))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	var got string
	if err := short.Pool().QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "30s" {
		t.Errorf("with the URL's idle_in_transaction_session_timeout=30s, the session has %s", got)
	}
}

// TestDatasetUploadLockOutlivesTheIdleBound: the transaction that holds an account's dataset
// upload lock idles while the file is stored, for as long as a large upload takes: it lifts
// the pool's idle_in_transaction_session_timeout for itself and keeps its lock past the bound,
// where an ordinary transaction's session is ended (the bound set to 1 s in the URL here).
func TestDatasetUploadLockOutlivesTheIdleBound(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, withParam(pgtest.ConnString(t), "idle_in_transaction_session_timeout", "1s"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := tx.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("an ordinary transaction idle past the 1 s bound went on")
	}
	_ = tx.Rollback(ctx)

	account := uuid.New()
	unlock, err := st.LockDatasetUploads(ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	// Another upload of the account, from another session, still finds the lock taken.
	other, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = other.Exec(waitCtx, `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7318204919))`, "dataset-uploads:"+account.String())
	cancel()
	if err == nil {
		t.Error("the upload lock was free 1.5 s after it was taken: its transaction was ended by the idle bound")
	}
	unlock()
}

// withParam adds a parameter to a connection string, in either of its forms.
func withParam(cs, name, value string) string {
	if strings.HasPrefix(cs, "postgres://") || strings.HasPrefix(cs, "postgresql://") {
		u, err := url.Parse(cs)
		if err == nil {
			q := u.Query()
			q.Set(name, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return strings.TrimSpace(cs) + " " + name + "=" + value
}
