package main

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestConnectionLimit: with -max-connections 2, two kept-alive connections fill the API
// listener: a third connection's request waits, unanswered, until one of them closes, and the
// metrics listener's /readyz answers meanwhile (trial h5: connections without a bound took
// every file descriptor, /readyz with them). A 401 closes its connection.
func TestConnectionLimit(t *testing.T) {
	env := serveEnv(t, pgtest.ConnString(t))
	p := startServe(t, env, "-max-connections", "2")
	p.waitReadyz(t, http.StatusOK, 30*time.Second)

	request := func(c net.Conn) *bufio.Reader {
		t.Helper()
		if _, err := c.Write([]byte("GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tgk_" + strings.Repeat("0", 43) + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		return bufio.NewReader(c)
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.api)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A 401 closes its connection: the caller holds nothing once answered.
	c := dial()
	res, err := http.ReadResponse(request(c), nil)
	if err != nil || res.StatusCode != http.StatusUnauthorized || !res.Close {
		t.Fatalf("a request with an unknown key: %v %v, want 401 and the connection closed", res, err)
	}
	c.Close()

	// Two connections kept alive, each answered once (a path no route has: 404, and the
	// connection stays open).
	held := []net.Conn{dial(), dial()}
	for _, h := range held {
		if _, err := h.Write([]byte("GET /no-such-route HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(h), nil)
		if err != nil || res.Close {
			t.Fatalf("a kept-alive connection: %v %v", res, err)
		}
		res.Body.Close()
	}
	third := dial()
	answered := make(chan error, 1)
	go func() {
		_, err := http.ReadResponse(request(third), nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a third connection was served while two were open (%v)", err)
	case <-time.After(time.Second):
	}
	if res, err := http.Get(p.metrics + "/readyz"); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("/readyz while the API listener is full: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	held[0].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Errorf("the third connection, once one closed: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the third connection was not served after one of the two closed")
	}
}

// TestLimitedConnectionHalfCloses: a connection of the limited listener half-closes as the TCP
// connection does (the peer reads the end while it can still send), and gives its room back
// when closed, once.
func TestLimitedConnectionHalfCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitConnections(ln, 1, 0, nil, nil)
	defer l.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("the limited connection has no CloseWrite")
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := peer.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the peer read %d bytes, %v after the half-close; want the end", n, err)
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Errorf("the peer cannot send after the half-close: %v", err)
	}
	c.Close()
	c.Close()
	if got := len(l.sem); got != 0 {
		t.Errorf("%d rooms taken after the close, want 0", got)
	}
}

// TestConnectionsPerAddress: with a share of two connections an address, a third connection
// from one address is closed as soon as it is accepted, while another address's is served;
// once one of the two closes, the address may connect again. Trial h16 D1: one address held
// every connection the listener allowed, and no tenant could connect.
func TestConnectionsPerAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := limitConnections(ln, 10, 2, []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}, nil)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// served reports whether the listener handed c's connection over (its peer is open), or
	// closed it at once (c reads the end).
	var servers []net.Conn // the server's side of the connections served, in order
	served := func(c net.Conn) bool {
		t.Helper()
		select {
		case s := <-accepted:
			t.Cleanup(func() { s.Close() })
			servers = append(servers, s)
			return true
		case <-time.After(500 * time.Millisecond):
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a refused connection read a byte")
		}
		return false
	}
	first, second := dial("127.0.0.1"), dial("127.0.0.1")
	if !served(first) || !served(second) {
		t.Fatal("the address's first two connections were not served")
	}
	if served(dial("127.0.0.1")) {
		t.Fatal("a third connection of one address was served beyond its share of two")
	}
	if !served(dial("127.0.0.2")) {
		t.Fatal("another address's connection was not served")
	}
	cl := l
	held := func() int {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		return cl.byAddress[netip.MustParsePrefix("127.0.0.1/32")]
	}
	if n := held(); n != 2 {
		t.Fatalf("127.0.0.1 holds %d connections, want 2", n)
	}
	// Closing one of the two served connections (the server's side, as h1server does when its
	// client leaves) gives the address its place back.
	servers[0].Close()
	if n := held(); n != 1 {
		t.Fatalf("127.0.0.1 holds %d connections after one closed, want 1", n)
	}
	if !served(dial("127.0.0.1")) {
		t.Fatal("the address could not connect again once one of its connections closed")
	}
	if n := cl.Refused(); n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
	// A trusted proxy's connections (a load balancer's, which carry every client's) are not
	// held to the share (the review of 98d6732: behind a balancer, every connection past the
	// share was closed and its client answered 502).
	for i := range 4 {
		if !served(dial("127.0.0.3")) {
			t.Fatalf("the trusted proxy's connection %d was refused", i+1)
		}
	}
}
