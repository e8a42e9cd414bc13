package main

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/impl/addrlimit"
)

// limitConnections returns a listener that holds at most n of l's connections open, and at most
// perAddress of one client address's (an IPv4 address or an IPv6 /64; 0: no such bound). At n,
// Accept waits for one to close, and the new ones wait in the kernel's queue meanwhile
// (server.max_connections); a connection of an address that holds perAddress already is closed
// as soon as it is accepted (server.max_connections_per_address), so that one address cannot
// take every connection and leave every other client's waiting (trial h16 D1: 8,300
// connections from one address, each kept alive by a 404 a minute, and no tenant could
// connect). It is golang.org/x/net/netutil.LimitListener's design, kept here because
// LimitListener's connections hide the TCP connection's CloseWrite, which h1server and
// net/http use to half-close a connection whose request body was left unread, so that the
// client reads the answer (a 401 or a 413 to an upload, say) instead of a reset.
//
// The connections of an address in trusted (server.trusted_proxies and loopback: the load
// balancers and proxies in front, which carry every client's connections) are not held to
// perAddress.
// Connections closed for the share are counted (Refused) and logged to log, at most once
// every refusalLogEvery.
func limitConnections(l net.Listener, n, perAddress int, trusted []netip.Prefix, log *slog.Logger) *connLimit {
	cl := &connLimit{Listener: l, done: make(chan struct{}), perAddress: perAddress, byAddress: map[netip.Prefix]int{},
		trusted: trusted, log: log}
	if n > 0 {
		cl.sem = make(chan struct{}, n)
	}
	return cl
}

// connLimit is the listener of limitConnections.
type connLimit struct {
	net.Listener
	sem       chan struct{} // nil: no bound of all connections
	done      chan struct{}
	closeOnce sync.Once

	perAddress int
	trusted    []netip.Prefix // addresses not held to perAddress
	log        *slog.Logger
	refused    atomic.Int64 // connections closed for their address's share

	mu        sync.Mutex
	byAddress map[netip.Prefix]int // open connections by client address
	loggedAt  time.Time            // the last refusal logged
}

// refusalLogEvery is how often, at most, a refusal for an address's share is logged.
const refusalLogEvery = 10 * time.Second

// Refused is how many connections were closed at once for their address's share.
func (l *connLimit) Refused() int64 { return l.refused.Load() }

// Accept waits for room, then accepts a connection that gives its room back when closed.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		if l.sem != nil {
			select {
			case l.sem <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.freeRoom()
			return nil, err
		}
		addr, ok := l.admit(c)
		if !ok {
			// The address holds its share: closed at once, before a byte is read.
			_ = c.Close()
			l.freeRoom()
			l.refused.Add(1)
			l.noteRefusal(addr)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.leave(addr); l.freeRoom() }}, nil
	}
}

// freeRoom gives back a room of the bound of all connections.
func (l *connLimit) freeRoom() {
	if l.sem != nil {
		<-l.sem
	}
}

// admit counts c against its client address's share, and reports false (counting nothing)
// when the address holds perAddress connections already. A connection without an IP address
// is not counted.
func (l *connLimit) admit(c net.Conn) (netip.Prefix, bool) {
	if l.perAddress <= 0 || c.RemoteAddr() == nil {
		return netip.Prefix{}, true
	}
	addr := addrlimit.Key(c.RemoteAddr().String())
	if !addr.IsValid() || l.exempt(c.RemoteAddr()) {
		return netip.Prefix{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddress[addr] >= l.perAddress {
		return addr, false
	}
	l.byAddress[addr]++
	return addr, true
}

// exempt reports whether the connection's address is a trusted proxy's.
func (l *connLimit) exempt(remote net.Addr) bool {
	if len(l.trusted) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().WithZone("").Unmap()
	for _, p := range l.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// noteRefusal logs a refusal for addr's share, unless one was logged within refusalLogEvery.
func (l *connLimit) noteRefusal(addr netip.Prefix) {
	if l.log == nil {
		return
	}
	l.mu.Lock()
	now := time.Now()
	due := now.Sub(l.loggedAt) >= refusalLogEvery
	if due {
		l.loggedAt = now
	}
	l.mu.Unlock()
	if due {
		l.log.Warn("a client address holds its share of the API connections: a new connection of it was closed (if it is a load balancer or proxy of yours that appends to X-Forwarded-For, list it in server.trusted_proxies)",
			"address", addr.String(), "max_connections_per_address", l.perAddress, "refused_total", l.refused.Load())
	}
}

// leave gives back a connection's place in its address's share.
func (l *connLimit) leave(addr netip.Prefix) {
	if !addr.IsValid() || l.perAddress <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddress[addr] <= 1 {
		delete(l.byAddress, addr)
	} else {
		l.byAddress[addr]--
	}
}

// Close closes the listener and ends an Accept waiting for room.
func (l *connLimit) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn is a connection of connLimit: its first Close gives its room back.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and gives its room back (once).
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the connection when it can (a TCP connection): see limitConnections.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
