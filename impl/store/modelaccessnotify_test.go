package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestModelAccessNotifiesEveryAccountARowLeaves: the gateways cache an account's model grants
// and its own upstream keys until tollgate_model_access_changed names the account. A grant or
// a key moved to another account by hand (an UPDATE of account_id) named only the new account,
// so the old one kept what it no longer has in every gateway for the cache's five minutes; now
// both are named. An insert names its account, a delete the account it left, and an update
// within one account that account once.
func TestModelAccessNotifiesEveryAccountARowLeaves(t *testing.T) {
	ctx := context.Background()
	cs := pgtest.ConnString(t)
	st := openStoreAt(t, cs)
	a := fundedAccount(t, st, 1)
	b := fundedAccount(t, st, 1)

	listener, err := pgx.Connect(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN "+store.ChannelModelAccessChanged); err != nil {
		t.Fatal(err)
	}
	// named returns the accounts notified by what run does, in any order.
	named := func(what string, run func() error) []string {
		t.Helper()
		if err := run(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			n, err := listener.WaitForNotification(wctx)
			cancel()
			if err != nil {
				break
			}
			got = append(got, n.Payload)
		}
		slices.Sort(got)
		return got
	}
	both := []string{a.String(), b.String()}
	slices.Sort(both)
	exec := func(q string, args ...any) func() error {
		return func() error { _, err := st.Pool().Exec(ctx, q, args...); return err }
	}

	for _, c := range []struct {
		what string
		run  func() error
		want []string
	}{
		{"a grant to a", func() error { return st.GrantModel(ctx, a, "m1") }, []string{a.String()}},
		{"the grant moved to b", exec(`UPDATE model_access SET account_id = $2 WHERE account_id = $1`, a, b), both},
		{"a's own key set", func() error {
			return st.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: a, Provider: "p", Sealed: []byte{1}, Hint: "…", SetBy: "test"})
		}, []string{a.String()}},
		{"a's key replaced in place", exec(`UPDATE account_upstream_keys SET hint = 'x' WHERE account_id = $1`, a), []string{a.String()}},
		{"a's key moved to b", exec(`UPDATE account_upstream_keys SET account_id = $2 WHERE account_id = $1`, a, b), both},
		{"b's key removed", exec(`DELETE FROM account_upstream_keys WHERE account_id = $1`, b), []string{b.String()}},
	} {
		if got := named(c.what, c.run); !slices.Equal(got, c.want) {
			t.Errorf("%s: notified %v, want %v", c.what, got, c.want)
		}
	}
}
