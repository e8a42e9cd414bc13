package upstreamconn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"time"
)

// conn is one TCP connection to an upstream with its buffers.
type conn struct {
	nc net.Conn
	// lr is what br reads from: the connection, limited while a response head is read.
	lr   headLimit
	br   *bufio.Reader
	bw   *bufio.Writer
	addr string
	// idleSince is when the connection went back to the pool.
	idleSince time.Time
	// interrupt closes the connection, which fails its blocked and future reads and writes,
	// when a request's context is cancelled. It is built once so that registering it with
	// context.AfterFunc on every request costs no closure.
	interrupt func()
	// peek is the state of peerSpoke's look at the socket, made on first use (nil on
	// platforms where the socket is not inspected).
	peek *socketPeek
}

func newConn(nc net.Conn, addr string) *conn {
	c := &conn{nc: nc, lr: headLimit{r: nc, n: unlimited}, bw: bufio.NewWriterSize(nc, connBufferSize), addr: addr}
	c.br = bufio.NewReaderSize(&c.lr, connBufferSize)
	c.interrupt = c.close
	return c
}

func (c *conn) close() { _ = c.nc.Close() }

// unlimited is headLimit's budget outside response heads.
const unlimited = math.MaxInt64

// errHeadLimit is what headLimit's reads return once its budget is spent; exchange reports it
// as ErrResponseHeaderTooLarge.
var errHeadLimit = errors.New("upstreamconn: response head limit reached")

// headLimit reads from r at most n more bytes, then fails with errHeadLimit. It sits under the
// connection's buffered reader, so that the limit counts every byte taken from the connection
// while a response head is read, 1xx responses and read-ahead included, as net/http's
// Transport counts MaxResponseHeaderBytes.
type headLimit struct {
	r io.Reader
	n int64
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeadLimit
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// getConn returns the most recently used idle connection to addr, or a new one. reused reports
// whether it came from the pool.
func (t *Transport) getConn(ctx context.Context, addr string) (c *conn, reused bool, err error) {
	if c := t.takeIdle(addr); c != nil {
		return c, true, nil
	}
	c, err = t.dial(ctx, addr)
	return c, false, err
}

// dial opens a new connection to addr.
func (t *Transport) dial(ctx context.Context, addr string) (*conn, error) {
	d := net.Dialer{Timeout: t.dialTimeout(), KeepAlive: t.keepAlive()}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConn(nc, addr), nil
}

// takeIdle removes and returns the most recently used idle connection to addr that has not
// outlived IdleTimeout, closing the ones that have; nil when there is none.
func (t *Transport) takeIdle(addr string) *conn {
	limit := t.idleTimeout()
	t.mu.Lock()
	s := t.idle[addr]
	if s == nil || len(s.conns) == 0 {
		t.mu.Unlock()
		return nil
	}
	now := time.Now()
	last := len(s.conns) - 1
	c := s.conns[last]
	s.conns[last] = nil
	s.conns = s.conns[:last]
	if now.Sub(c.idleSince) < limit {
		t.mu.Unlock()
		if c.peerSpoke() {
			// Bytes nobody asked for (a stray response, a body longer than announced) or the
			// end of the stream arrived while the connection was idle: never hand them to the
			// next request. Try the next idle connection.
			c.close()
			return t.takeIdle(addr)
		}
		return c
	}
	// The newest idle connection is too old, so all the older ones below it are too.
	stale := append(s.conns, c)
	s.conns = nil
	t.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
	return nil
}

// putIdle returns c to the pool, or closes it when the pool of its host is full or c holds
// bytes nobody asked for.
func (t *Transport) putIdle(c *conn) {
	limit := t.maxIdlePerHost()
	if c.br.Buffered() > 0 || limit < 0 {
		c.close()
		return
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string]*idleStack)
	}
	s := t.idle[c.addr]
	if s == nil {
		s = &idleStack{}
		t.idle[c.addr] = s
	}
	if len(s.conns) >= limit {
		t.mu.Unlock()
		c.close()
		return
	}
	// Taken under the lock so that every stack is ordered by idleSince.
	c.idleSince = time.Now()
	s.conns = append(s.conns, c)
	if !t.pruneScheduled {
		t.pruneScheduled = true
		if t.pruneTimer == nil {
			t.pruneTimer = time.AfterFunc(t.idleTimeout(), t.pruneIdle)
		} else {
			t.pruneTimer.Reset(t.idleTimeout())
		}
	}
	t.mu.Unlock()
}

// pruneIdle closes the connections idle for longer than IdleTimeout and schedules itself for
// when the oldest remaining one will be.
func (t *Transport) pruneIdle() {
	limit := t.idleTimeout()
	var stale []*conn
	t.mu.Lock()
	now := time.Now()
	var oldest time.Time
	for addr, s := range t.idle {
		n := 0
		for n < len(s.conns) && now.Sub(s.conns[n].idleSince) >= limit {
			n++
		}
		if n > 0 {
			stale = append(stale, s.conns[:n]...)
			kept := copy(s.conns, s.conns[n:])
			clear(s.conns[kept:])
			s.conns = s.conns[:kept]
		}
		if len(s.conns) == 0 {
			delete(t.idle, addr)
			continue
		}
		if oldest.IsZero() || s.conns[0].idleSince.Before(oldest) {
			oldest = s.conns[0].idleSince
		}
	}
	if oldest.IsZero() {
		t.pruneScheduled = false
	} else {
		t.pruneTimer.Reset(oldest.Add(limit).Sub(now))
	}
	t.mu.Unlock()
	for _, c := range stale {
		c.close()
	}
}
