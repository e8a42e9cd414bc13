package accounts_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/devkit/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newService returns the key service over a migrated database of the test's own, with the
// built-in configuration whose plan "default" has the key quota maxKeys.
func newService(t *testing.T, maxKeys int) *accounts.Service {
	t.Helper()
	st := storetest.Open(t)
	cfg := config.Default()
	for i := range cfg.Plans {
		if cfg.Plans[i].Name == "default" {
			cfg.Plans[i].MaxKeys = maxKeys
		}
	}
	return &accounts.Service{Store: st, Config: cfg}
}

func newAccount(t *testing.T, svc *accounts.Service, name string) uuid.UUID {
	t.Helper()
	acct, err := svc.CreateAccount(context.Background(), name, "default")
	if err != nil {
		t.Fatal(err)
	}
	return acct.ID
}

// quotaRefusal says whether err is the key quota's refusal, on the field max_keys.
func quotaRefusal(err error) bool {
	var inv *accounts.InvalidError
	return errors.As(err, &inv) && inv.Field == "max_keys"
}

// TestKeyQuota: at the plan's max_keys a creation is refused as invalid on max_keys; disabled
// and expired keys count, revoked ones do not; another account has a quota of its own.
func TestKeyQuota(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 3)
	acme, globex := newAccount(t, svc, "acme"), newAccount(t, svc, "globex")
	var ids []uuid.UUID
	for range 3 {
		k, err := svc.CreateKey(ctx, acme, "k", -1)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.Key.ID)
	}
	if _, err := svc.Disable(ctx, acme, ids[0]); err != nil {
		t.Fatal(err)
	}
	_, err := svc.CreateKey(ctx, acme, "fourth", -1)
	if !quotaRefusal(err) {
		t.Fatalf("the fourth key of a quota of 3 (one disabled): err %v, want an InvalidError on max_keys", err)
	}
	if want := "at most 3 keys"; !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
	if _, err := svc.CreateKey(ctx, globex, "theirs", -1); err != nil {
		t.Fatalf("another account's first key: %v", err)
	}
	if _, err := svc.Revoke(ctx, acme, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKey(ctx, acme, "after-revoke", -1); err != nil {
		t.Fatalf("a key after one was revoked: %v", err)
	}
	if _, err := svc.CreateKey(ctx, acme, "fifth", -1); !quotaRefusal(err) {
		t.Fatalf("at the quota again: err %v, want the quota's refusal", err)
	}
	n, err := svc.Store.CountUnrevokedAPIKeys(ctx, acme)
	if err != nil || n != 3 {
		t.Fatalf("unrevoked keys = %d, %v; want 3", n, err)
	}
}

// TestNoKeyQuota: max_keys 0 sets no quota.
func TestNoKeyQuota(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 0)
	acme := newAccount(t, svc, "acme")
	for i := range 25 {
		if _, err := svc.CreateKey(ctx, acme, "k", -1); err != nil {
			t.Fatalf("key %d without a quota: %v", i+1, err)
		}
	}
}

// TestKeyQuotaRace: ten creations racing at one below the quota, from separate connections:
// exactly one is made and the nine others are refused by the quota, in each of five rounds (the
// winner is revoked before the next); the account ends at the quota.
func TestKeyQuotaRace(t *testing.T) {
	ctx := context.Background()
	const quota, racers, rounds = 10, 10, 5
	svc := newService(t, quota)
	acme := newAccount(t, svc, "acme")
	for range quota - 1 {
		if _, err := svc.CreateKey(ctx, acme, "k", -1); err != nil {
			t.Fatal(err)
		}
	}
	for round := range rounds {
		var (
			wg         sync.WaitGroup
			start      = make(chan struct{})
			mu         sync.Mutex
			made       []uuid.UUID
			refused    int
			unexpected []error
		)
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				k, err := svc.CreateKey(ctx, acme, "racer", -1)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					made = append(made, k.Key.ID)
				case quotaRefusal(err):
					refused++
				default:
					unexpected = append(unexpected, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(unexpected) > 0 || len(made) != 1 || refused != racers-1 {
			t.Fatalf("round %d: made %d, refused %d, other errors %v; want 1 made and %d refused", round, len(made), refused, unexpected, racers-1)
		}
		n, err := svc.Store.CountUnrevokedAPIKeys(ctx, acme)
		if err != nil || n != quota {
			t.Fatalf("round %d: unrevoked keys = %d, %v; want %d", round, n, err, quota)
		}
		if round < rounds-1 {
			if _, err := svc.Revoke(ctx, acme, made[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestKeysKeepTheirLastFour: every key the service makes is stored with its last four
// characters (never more of it than its prefix and those), as created, read back and listed.
func TestKeysKeepTheirLastFour(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 0)
	acme := newAccount(t, svc, "acme")
	k, err := svc.CreateKeyWith(ctx, acme, accounts.KeyOptions{Name: "ci", RPM: -1})
	if err != nil {
		t.Fatal(err)
	}
	last4 := k.Plain[len(k.Plain)-4:]
	if k.Key.DisplaySuffix != last4 {
		t.Fatalf("created with the last four %q, want %q", k.Key.DisplaySuffix, last4)
	}
	got, err := svc.GetKey(ctx, acme, k.Key.ID)
	if err != nil || got.DisplaySuffix != last4 {
		t.Fatalf("read back: %q, %v; want %q", got.DisplaySuffix, err, last4)
	}
	list, err := svc.ListKeys(ctx, acme)
	if err != nil || len(list) != 1 || list[0].DisplaySuffix != last4 || list[0].DisplayPrefix != k.Plain[:len(list[0].DisplayPrefix)] {
		t.Fatalf("listed: %+v, %v; want the last four %q", list, err, last4)
	}
}

// TestKeyNamesAndCapsAreChecked: a key's name is printable text of at most 100 characters (not
// bytes: a name of 100 accented letters is taken), with no control character and no
// bidirectional control, which would drive the operator's terminal or show a key's prefix
// backwards beside it; and an RPM cap beyond the database's integer is refused, where it was
// stored wrapped (2^32+1 became 1) or refused by the database as a dependency failure. Nothing
// refused made a key.
func TestKeyNamesAndCapsAreChecked(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 0)
	acct := newAccount(t, svc, "acme")
	field := func(err error) string {
		var inv *accounts.InvalidError
		if errors.As(err, &inv) {
			return inv.Field
		}
		return fmt.Sprint(err)
	}
	for _, c := range []struct {
		name string
		o    accounts.KeyOptions
		want string
	}{
		{"terminal escape", accounts.KeyOptions{Name: "x\x1b]0;owned\x07\x1b[2J", RPM: -1}, "name"},
		{"NUL", accounts.KeyOptions{Name: "a\x00b", RPM: -1}, "name"},
		{"not UTF-8", accounts.KeyOptions{Name: "a\xff\xfe", RPM: -1}, "name"},
		{"C1 control", accounts.KeyOptions{Name: "a\u0085b", RPM: -1}, "name"},
		{"right-to-left override", accounts.KeyOptions{Name: "ci \u202e", RPM: -1}, "name"},
		{"isolate", accounts.KeyOptions{Name: "ci \u2067x\u2069", RPM: -1}, "name"},
		{"101 characters", accounts.KeyOptions{Name: strings.Repeat("é", 101), RPM: -1}, "name"},
		{"RPM past 2^31", accounts.KeyOptions{Name: "big", RPM: 1 << 31}, "rpm"},
		{"RPM past 2^32", accounts.KeyOptions{Name: "big", RPM: 1<<32 + 1}, "rpm"},
	} {
		if _, err := svc.CreateKeyWith(ctx, acct, c.o); field(err) != c.want {
			t.Errorf("%s: %v, want a refusal of %s", c.name, err, c.want)
		}
	}
	keys, err := svc.Store.ListAPIKeys(ctx, acct)
	if err != nil || len(keys) != 0 {
		t.Fatalf("refused creations made keys: %d (%v)", len(keys), err)
	}
	k, err := svc.CreateKeyWith(ctx, acct, accounts.KeyOptions{Name: strings.Repeat("é", 100) + "", RPM: 60})
	if err != nil {
		t.Fatalf("a name of 100 accented letters: %v", err)
	}
	if _, err := svc.CreateKeyWith(ctx, acct, accounts.KeyOptions{Name: "emoji 👩‍💻 and 日本語", RPM: -1}); err != nil {
		t.Fatalf("a name with an emoji sequence and CJK: %v", err)
	}
	l := accounts.LimitsOf(k.Key)
	l.RPMLimit = 1<<32 + 1
	if _, err := svc.SetLimits(ctx, acct, k.Key.ID, l); field(err) != "rpm" {
		t.Errorf("SetLimits with an RPM cap past 2^32: %v", err)
	}
}

// TestPlanGoneMakesNoKeys: an account whose plan the configuration no longer has (renamed or
// removed) makes no keys, refused as invalid on plan, since the plan's quota and RPM limits are
// unknown; its plan put back, it makes them again. Configuration trial: renaming a plan lifted
// max_keys and max_rpm for its accounts.
func TestPlanGoneMakesNoKeys(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, 2)
	acme := newAccount(t, svc, "acme")
	for i := range svc.Config.Plans {
		if svc.Config.Plans[i].Name == "default" {
			svc.Config.Plans[i].Name = "standard" // renamed in the configuration
		}
	}
	var inv *accounts.InvalidError
	if _, err := svc.CreateKey(ctx, acme, "k", -1); !errors.As(err, &inv) || inv.Field != "plan" || !strings.Contains(inv.Message, `plan "default" is not in the gateway's configuration`) {
		t.Fatalf("a key of an account whose plan is gone: %v", err)
	}
	for i := range svc.Config.Plans {
		if svc.Config.Plans[i].Name == "standard" {
			svc.Config.Plans[i].Name = "default"
		}
	}
	if _, err := svc.CreateKey(ctx, acme, "k", -1); err != nil {
		t.Fatalf("its plan back: %v", err)
	}
}
