package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnavailable: failures to reach the database, and the server's "cannot serve now" answers,
// are unavailability; the store's own errors and a refused query are not.
func TestUnavailable(t *testing.T) {
	// A real connection failure: no server listens on this socket.
	_, connectErr := Open(context.Background(), "host="+t.TempDir()+" port=5432 user=postgres dbname=x sslmode=disable connect_timeout=5")
	if connectErr == nil {
		t.Fatal("connected to nothing")
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not found", ErrNotFound, false},
		{"conflict", fmt.Errorf("create key: %w", ErrConflict), false},
		{"insufficient credit", ErrInsufficientCredit, false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"connection refused", connectErr, true},
		{"admin shutdown", fmt.Errorf("query: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"timeout", fmt.Errorf("lookup: %w", context.DeadlineExceeded), true},
		{"other", errors.New("something else"), false},
	}
	for _, c := range cases {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s (%v): %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
