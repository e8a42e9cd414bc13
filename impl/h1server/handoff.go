package h1server

import (
	"net"
	"sync"
)

// handoffListener is the in-memory net.Listener through which connections reach the internal
// net/http server. Hand-offs are rare (they happen at most once per connection, for requests
// the lean path does not serve), so a channel is fine here.
type handoffListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newHandoffListener() *handoffListener {
	return &handoffListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next handed-off connection, or net.ErrClosed once the listener is closed.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and hand fail from now on.
func (l *handoffListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

// Addr returns a placeholder address: the listener has none of its own.
func (l *handoffListener) Addr() net.Addr { return handoffAddr{} }

// hand passes c to the internal server's accept loop and reports whether it was taken; it fails
// once the listener is closed (the server is shutting down), and the caller then closes c.
func (l *handoffListener) hand(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

type handoffAddr struct{}

func (handoffAddr) Network() string { return "h1server-handoff" }
func (handoffAddr) String() string  { return "h1server-handoff" }

// replayConn is a handed-off connection: reads return the bytes the lean path had already read
// (the start of the request it did not serve, and anything after it) before reading the
// connection again, so net/http sees the byte stream exactly as the client sent it.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes a TCP connection; net/http uses it (when present) to let the client read
// an error response before the connection is reset.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
