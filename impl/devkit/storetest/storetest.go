// Package storetest opens the store of a test: a fresh database of the throwaway PostgreSQL
// cluster (pgtest), migrated, closed when the test ends. The tests that used to open and
// migrate it by hand, each its own copy of the same lines, call Open instead.
package storetest

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// Open returns a migrated store on a database of the test's own, closed when the test ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}
