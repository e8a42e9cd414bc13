package redistest

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server of one test's own, which the test can stop and
// start again on the same port, or freeze, to play a Redis outage. Unlike
// URL it never uses REDIS_URL: it needs redis-server installed, and skips
// the test (or fails it when CI is "true") where it is not. It needs no
// TestMain: the test's cleanup stops it.
//
// The server keeps no data on disk, so a restarted server starts empty, as
// a Redis without persistence does after a crash.
type Server struct {
	path string
	host string
	port int
	url  string

	mu  sync.Mutex
	cur *server // nil while stopped
}

// NewServer starts a redis-server of t's own on a free loopback port and
// stops it when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	return NewServerOn(t, loopback)
}

// NewServerOn is NewServer on a free port of host, an address of the
// machine other than loopback (the bridge address of a test network whose
// hosts are its clients, say), in protected mode off.
func NewServerOn(t testing.TB, host string) *Server {
	t.Helper()
	path := serverPath(t, "for a test's own server")
	cur, err := startServer(path, host)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{path: path, host: host, port: cur.port, url: cur.url, cur: cur}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur != nil {
			s.cur.stop()
			s.cur = nil
		}
	})
	return s
}

// URL returns the server's URL, which stays the same across Stop and
// Start.
func (s *Server) URL() string { return s.url }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// NewClient returns a client of the server with opts applied to the
// options parsed from its URL (opts may be nil), closed when t ends.
func (s *Server) NewClient(t testing.TB, opts func(*redis.Options)) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(s.url)
	if err != nil {
		t.Fatalf("redistest: parse Redis URL: %v", err)
	}
	if opts != nil {
		opts(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server, as a crash would, and waits for it to exit. It
// does nothing if the server is stopped.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.cur.stop()
		s.cur = nil
	}
}

// Start starts a stopped server again on the same port, empty, and waits
// until it answers. It does nothing if the server is running. It fails t if
// the port was taken in the meantime.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		return
	}
	var err error
	// A few tries: the old server's port may take a moment to be free.
	for range 5 {
		var cur *server
		if cur, err = tryStart(s.path, s.host, s.port); err == nil {
			s.cur = cur
			return
		}
	}
	t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
}

// String describes the server for test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server on port %d", s.port) }
