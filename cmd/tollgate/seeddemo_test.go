package main

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestSeedDemoMakesTheKeyAFailedRunDidNot: when make run's first run makes the demo account
// but not its key (here a real refusal of the database: a constraint, added in the test's
// throwaway database, that refuses a key named demo), that run fails, and the next run finds
// the demo account without a key and makes one, and returns it to be printed; the key works.
// Runs after that print no key, and neither does a run after the demo key was revoked (a key
// is shown once; `admin key create demo` makes another). Before, a later run found the account
// and printed no key, and a newcomer's make run never showed a key again.
func TestSeedDemoMakesTheKeyAFailedRunDidNot(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	svc := &accounts.Service{Store: st, Config: config.Default()}
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `ALTER TABLE api_keys ADD CONSTRAINT refuse_demo_key CHECK (name <> 'demo')`); err != nil {
		t.Fatal(err)
	}
	if key, err := seedDemo(ctx, svc); err == nil {
		t.Fatalf("first run: seedDemo returned %q and no error although the key could not be made", key)
	}
	acct, err := st.GetAccountByName(ctx, "demo")
	if err != nil {
		t.Fatalf("the first run's demo account: %v", err)
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE api_keys DROP CONSTRAINT refuse_demo_key`); err != nil {
		t.Fatal(err)
	}

	// The next run makes the key and returns it to be printed.
	key, err := seedDemo(ctx, svc)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if key == "" {
		t.Fatal("second run: the demo account has no key, and none was made or printed")
	}
	hash, err := apikey.Parse(key)
	if err != nil {
		t.Fatalf("second run printed %q: %v", key, err)
	}
	k, err := st.ActiveAPIKeyByHash(ctx, hash[:])
	if err != nil || k.AccountID != acct.ID {
		t.Fatalf("the printed key is not an active key of the demo account: %+v, %v", k, err)
	}

	// Later runs print nothing and make no key: one key was made and shown.
	if key, err := seedDemo(ctx, svc); err != nil || key != "" {
		t.Errorf("third run: %q, %v; want no key (it was shown once)", key, err)
	}
	if _, err := st.RevokeAccountAPIKey(ctx, acct.ID, k.ID, nil); err != nil {
		t.Fatal(err)
	}
	if key, err := seedDemo(ctx, svc); err != nil || key != "" {
		t.Errorf("a run after the demo key was revoked: %q, %v; want no key", key, err)
	}
	if keys, err := st.ListAPIKeys(ctx, acct.ID); err != nil || len(keys) != 1 {
		t.Errorf("the demo account has %d keys (%v), want the one made", len(keys), err)
	}
	var accounts int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE name = 'demo'`).Scan(&accounts); err != nil || accounts != 1 {
		t.Errorf("%d demo accounts (%v), want 1", accounts, err)
	}
}
