package main

import (
	"net"
	"sync"
)

// limitConnections returns a listener that holds at most n of l's connections open: Accept
// waits for one to close when n are, and the new ones wait in the kernel's queue meanwhile
// (server.max_connections). It is golang.org/x/net/netutil.LimitListener's design, kept here
// because LimitListener's connections hide the TCP connection's CloseWrite, which h1server and
// net/http use to half-close a connection whose request body was left unread, so that the
// client reads the answer (a 401 or a 413 to an upload, say) instead of a reset.
func limitConnections(l net.Listener, n int) net.Listener {
	return &connLimit{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

// connLimit is the listener of limitConnections.
type connLimit struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Accept waits for room, then accepts a connection that gives its room back when closed.
func (l *connLimit) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
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
