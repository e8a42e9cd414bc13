package config

import (
	"strings"
	"testing"
)

// TestDefaultMemoryLimit: three quarters of a cgroup limit; else a quarter of the physical
// memory between 256 MiB and 1 GiB; none when nothing is known.
func TestDefaultMemoryLimit(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, c := range []struct {
		cgroup, physical int64
		want             int
	}{
		{2 * gib, 64 * gib, 1536},
		{512 * mib, 0, 384},
		{0, 24 * gib, 1024},
		{0, 2 * gib, 512},
		{0, 512 * mib, 256},
		{0, 0, 0},
	} {
		if got := DefaultMemoryLimitMB(c.cgroup, c.physical); got != c.want {
			t.Errorf("cgroup %d MiB, physical %d MiB: %d MiB, want %d", c.cgroup/mib, c.physical/mib, got, c.want)
		}
	}
}

// TestBodyBudget: the budget is what is set, else a quarter of the memory limit (at least 32
// MiB), else 512 MiB; -1 is none; a budget below the largest body is refused.
func TestBodyBudget(t *testing.T) {
	for _, c := range []struct {
		budget, limit int
		want          int64
	}{
		{0, 1024, 256 << 20},
		{0, 100, 32 << 20},
		{0, 0, 512 << 20},
		{0, -1, 512 << 20},
		{64, 1024, 64 << 20},
		{-1, 1024, 0},
	} {
		s := Server{BodyBudgetMB: c.budget, MemoryLimitMB: c.limit}
		if got := s.BodyBudgetBytes(); got != c.want {
			t.Errorf("body_budget_mb %d, memory_limit_mb %d: %d bytes, want %d", c.budget, c.limit, got, c.want)
		}
	}
	for _, bad := range []string{"body_budget_mb: 16", "body_budget_mb: -2", "memory_limit_mb: -5"} {
		if _, err := Parse([]byte("server:\n  " + bad + "\n")); err == nil || !strings.Contains(err.Error(), strings.Split(bad, ":")[0]) {
			t.Errorf("%s: %v, want an error naming it", bad, err)
		}
	}
	if c, err := Parse([]byte("server:\n  body_budget_mb: 32\n  memory_limit_mb: -1\n")); err != nil || c.Server.BodyBudgetBytes() != 32<<20 {
		t.Errorf("body_budget_mb 32: %v", err)
	}
}

// TestConnectionLimit: the limit is what is set, else one per 128 KiB of the memory limit
// between 1,024 and 16,384, else 16,384; -1 is none.
func TestConnectionLimit(t *testing.T) {
	for _, c := range []struct{ set, limit, want int }{
		{0, 1024, 8192},
		{0, 64, 1024},
		{0, 8192, 16384},
		{0, 0, 16384},
		{0, -1, 16384},
		{500, 1024, 500},
		{-1, 1024, 0},
	} {
		s := Server{MaxConnections: c.set, MemoryLimitMB: c.limit}
		if got := s.ConnectionLimit(); got != c.want {
			t.Errorf("max_connections %d, memory_limit_mb %d: %d, want %d", c.set, c.limit, got, c.want)
		}
	}
}

// TestConnectionsPerAddress: one address's share of the API connections is an eighth of the
// connection limit by default (at least 64, at most the limit), what is set, or none.
func TestConnectionsPerAddress(t *testing.T) {
	for _, c := range []struct{ conns, perAddress, want int }{
		{0, 0, 1024},   // 8,192 at 1 GiB
		{100, 0, 64},   // at least 64
		{40, 0, 40},    // at most the limit
		{-1, 0, 0},     // no limit, no default share
		{-1, 50, 50},   // a share set without a limit
		{1000, 10, 10}, // set
		{1000, -1, 0},  // none
	} {
		s := Server{MaxConnections: c.conns, MaxConnectionsPerAddress: c.perAddress, MemoryLimitMB: 1024}
		if got := s.ConnectionsPerAddress(); got != c.want {
			t.Errorf("max_connections %d, max_connections_per_address %d: %d, want %d", c.conns, c.perAddress, got, c.want)
		}
	}
}

// TestTrustedProxies: server.trusted_proxies takes addresses and prefixes; anything else fails
// validation, naming the entry.
func TestTrustedProxies(t *testing.T) {
	s := Server{TrustedProxies: []string{"10.0.0.5", "10.0.0.0/16", "fd00::/8", "::ffff:192.0.2.1"}}
	got, err := s.TrustedProxyPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.5/32", "10.0.0.0/16", "fd00::/8", "192.0.2.1/32"}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %v, want %s", i, got[i], want[i])
		}
	}
	cfg := Default()
	cfg.Server.TrustedProxies = []string{"balancer.internal"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "balancer.internal") {
		t.Errorf("a host name: %v, want an error naming it", err)
	}
}
