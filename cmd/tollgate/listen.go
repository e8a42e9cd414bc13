package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// server is what serveUntilDone runs: net/http's server and impl/h1server's alike.
type server interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// serveUntilDone serves ln with srv until ctx ends, then shuts it down, giving open requests
// grace to finish before they are cut.
func serveUntilDone(ctx context.Context, srv server, ln net.Listener, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close() // streams still open after the grace period
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// freeAddr is a loopback address with a port free when it was asked for.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitListening waits until something accepts connections on addr.
func waitListening(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
