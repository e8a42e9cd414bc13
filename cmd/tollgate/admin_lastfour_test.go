package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// TestKeysMadeByTheCLIKeepTheirLastFour: a key made by `admin key create` and make run's demo
// key (seedDemo) are stored with their last four characters, so that `admin key list` and the
// Keys page show them as prefix…last four; disabling, enabling and revoking one name it so too
// (disable and enable named the prefix alone, "(tgk_AbCdEfGh…)", until the operator trial
// s10h5).
func TestKeysMadeByTheCLIKeepTheirLastFour(t *testing.T) {
	ctx := context.Background()
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	demo, err := seedDemo(ctx, &accounts.Service{Store: st, Config: config.Default()})
	if err != nil || demo == "" {
		t.Fatalf("seedDemo: %q, %v", demo, err)
	}
	mustAdmin(t, "account create acme")
	cli := strings.TrimSpace(mustAdmin(t, "key create acme -name ci -quiet"))
	if _, err := apikey.Parse(cli); err != nil {
		t.Fatalf("key create printed %q: %v", cli, err)
	}
	shown := func(plain string) string { return plain[:apikey.DisplayLen] + "…" + plain[len(plain)-4:] }
	for account, plain := range map[string]string{"demo": demo, "acme": cli} {
		acct, err := st.GetAccountByName(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := st.ListAPIKeys(ctx, acct.ID)
		if err != nil || len(keys) != 1 {
			t.Fatalf("%s's keys: %v, %v", account, keys, err)
		}
		if keys[0].DisplaySuffix != plain[len(plain)-4:] {
			t.Errorf("%s's key stored with the last four %q, want %q", account, keys[0].DisplaySuffix, plain[len(plain)-4:])
		}
		list := mustAdmin(t, "key list "+account)
		if !strings.Contains(list, shown(plain)) || strings.Contains(list, plain) {
			t.Errorf("key list %s must show %s and never the key:\n%s", account, shown(plain), list)
		}
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}`).FindString(mustAdmin(t, "key list acme"))
	for _, verb := range []string{"disable", "enable"} {
		if out := mustAdmin(t, "key "+verb+" "+id); !strings.Contains(out, "("+shown(cli)+") "+verb+"d") {
			t.Errorf("key %s: %s", verb, out)
		}
	}
	if out := mustAdmin(t, "key revoke "+id+" -yes"); !strings.Contains(out, "("+shown(cli)+")") {
		t.Errorf("key revoke: %s", out)
	}
}
