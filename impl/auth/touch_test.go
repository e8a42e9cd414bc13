package auth

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/devkit/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestLastUseIsTheTimeOfTheUse: a key's last use is written as the time of its latest request
// before the write, not as the time of the batched write (newcomer trial finding 7: a key
// revoked between its last request and the next write showed a use after its revocation);
// each key keeps its own time, and a failed write keeps the times for the next.
func TestLastUseIsTheTimeOfTheUse(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	svc := &accounts.Service{Store: st, Config: config.Default()}
	acct, err := svc.CreateAccount(ctx, "acme", "default")
	if err != nil {
		t.Fatal(err)
	}
	first, err := svc.CreateKey(ctx, acct.ID, "first", -1)
	if err != nil {
		t.Fatal(err)
	}
	second, err := svc.CreateKey(ctx, acct.ID, "second", -1)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	start := time.Date(2026, 12, 5, 1, 21, 30, 0, time.UTC)
	clock := start
	at := func(d time.Duration) { mu.Lock(); clock = start.Add(d); mu.Unlock() }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := New(st, changefeed.NewWithOptions(st, changefeed.Options{Logger: log}),
		Options{Logger: log, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	use := func(key string) {
		t.Helper()
		if _, err := a.Authenticate(ctx, "Bearer "+key); err != nil {
			t.Fatal(err)
		}
	}
	lastUsed := func(k accounts.NewKey) time.Time {
		t.Helper()
		got, err := st.GetAPIKey(ctx, k.Key.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LastUsedAt == nil {
			return time.Time{}
		}
		return got.LastUsedAt.UTC()
	}

	use(first.Plain)
	at(2 * time.Second)
	use(first.Plain)
	at(3 * time.Second)
	use(second.Plain)
	at(1 * time.Second) // a clock that steps back never moves a use back
	use(first.Plain)
	at(9 * time.Second) // the write, seconds after the uses
	a.writeTouches(ctx)
	if got, want := lastUsed(first), start.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("first key: last used %s, want %s (its latest request, not the write at %s)", got, want, start.Add(9*time.Second))
	}
	if got, want := lastUsed(second), start.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("second key: last used %s, want %s", got, want)
	}

	// A write that fails keeps each use's own time for the next one.
	at(12 * time.Second)
	use(second.Plain)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	at(19 * time.Second)
	a.writeTouches(cancelled)
	at(29 * time.Second)
	a.writeTouches(ctx)
	if got, want := lastUsed(second), start.Add(12*time.Second); !got.Equal(want) {
		t.Errorf("second key after a failed write: last used %s, want %s", got, want)
	}
	if got, want := lastUsed(first), start.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("first key, unused since: last used %s, want %s", got, want)
	}
}
