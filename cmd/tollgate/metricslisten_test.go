package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/metrics"
)

// TestMetricsListenerBoundsItsConnections: the metrics listener (/readyz, /metrics) holds at
// most 256 connections, and a connection left idle after its request is closed after the idle
// time. Before, it had neither bound: a client that reached it (the balancer's network) could
// keep a connection open for ever after one request each, until the process had no file
// descriptor left, for the API listener's connections either.
func TestMetricsListenerBoundsItsConnections(t *testing.T) {
	const (
		bound = 256
		extra = 44
	)
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	errc := make(chan error, 1)
	srv := serveMetrics(addr, false, metrics.New(), health.New(slog.New(slog.DiscardHandler)), slog.New(slog.DiscardHandler), errc)
	if srv == nil {
		t.Fatal("the metrics listener did not start")
	}
	t.Cleanup(func() { _ = srv.Close() })
	if srv.IdleTimeout <= 0 || srv.IdleTimeout > 2*time.Minute {
		t.Errorf("idle timeout %v, want one of at most two minutes", srv.IdleTimeout)
	}

	// bound+extra clients each ask for /healthz on a connection of their own and keep it.
	var (
		mu       sync.Mutex
		answered int
		wg       sync.WaitGroup
	)
	conns := make([]net.Conn, bound+extra)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
		wg.Go(func() {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			mu.Lock()
			answered++
			mu.Unlock()
		})
	}
	wg.Wait()
	if answered != bound {
		t.Errorf("%d of %d connections kept open at once were served; want the bound, %d", answered, len(conns), bound)
	}
	// Once some are closed, the others are served.
	for _, c := range conns[:extra+1] {
		c.Close()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("after connections were closed: %v %v", res, err)
	}
}
