package redistest_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/devkit/redistest"
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

func TestServerStopStart(t *testing.T) {
	s := redistest.NewServer(t)
	c := s.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Stop(t)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a stopped server")
	}
	s.Start(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Start on the same port: %v", err)
	}
	// The server keeps nothing on disk: it restarts empty.
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after restart = %v, want redis.Nil", err)
	}
}

func TestServerFreezeThaw(t *testing.T) {
	s := redistest.NewServer(t)
	c := s.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1; o.ContextTimeoutEnabled = true })
	s.Freeze(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered by a frozen server")
	}
	s.Thaw(t)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after Thaw: %v", err)
	}
}

// TestNewServerOnListensOnTheGivenAddress: a server started on another address than loopback's
// usual one (127.0.0.2) answers there, and only there.
func TestNewServerOnListensOnTheGivenAddress(t *testing.T) {
	s := redistest.NewServerOn(t, "127.0.0.2")
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.2" || !strings.Contains(s.URL(), s.Addr()) {
		t.Fatalf("address %q, URL %q", s.Addr(), s.URL())
	}
	if err := s.NewClient(t, nil).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING at %s: %v", s.Addr(), err)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second); err == nil {
		c.Close()
		t.Errorf("the server also answers at 127.0.0.1:%s", port)
	}
}
