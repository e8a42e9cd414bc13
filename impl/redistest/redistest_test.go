package redistest_test

import (
	"context"
	"os"
	"testing"

	"github.com/tollgate/tollgate/impl/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestURLServesRedis(t *testing.T) {
	c := redistest.NewClient(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	key := redistest.Prefix(t) + "k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	t.Cleanup(func() { c.Del(context.Background(), key) })
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want \"v\"", got, err)
	}
}

func TestURLIsStable(t *testing.T) {
	a, b := redistest.URL(t), redistest.URL(t)
	if a != b {
		t.Fatalf("URL changed within one process: %q then %q", a, b)
	}
	if u := os.Getenv("REDIS_URL"); u != "" && a != u {
		t.Fatalf("URL = %q, want REDIS_URL %q", a, u)
	}
}

func TestPrefixUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p := redistest.Prefix(t)
		if seen[p] {
			t.Fatalf("Prefix returned %q twice", p)
		}
		seen[p] = true
	}
	t.Run("sub", func(t *testing.T) {
		if p := redistest.Prefix(t); seen[p] {
			t.Fatalf("subtest Prefix %q repeats", p)
		}
	})
}

func TestShutdownThenURLRestarts(t *testing.T) {
	if os.Getenv("REDIS_URL") != "" {
		t.Skip("REDIS_URL names a server this package does not own")
	}
	redistest.URL(t)
	redistest.Shutdown()
	c := redistest.NewClient(t)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after Shutdown and a new URL: %v", err)
	}
}
