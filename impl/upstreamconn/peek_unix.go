//go:build linux || darwin || freebsd || netbsd || openbsd

package upstreamconn

import "syscall"

// peerSpoke reports whether the upstream has sent anything that was not read yet: on an idle
// connection, since its last response was read; while a request body is written, the start of
// an early answer. Data and the end of the stream (it closed the connection) both count. It
// peeks at the socket without blocking and without consuming; a connection it cannot inspect
// is reported as having spoken, so it is not reused.
func (c *conn) peerSpoke() bool {
	// Bytes already buffered cannot be here: putIdle does not pool such a connection, and
	// nothing is read while the request is written.
	if c.peek == nil {
		sc, ok := c.nc.(syscall.Conn)
		if !ok {
			return true
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		c.peek = &socketPeek{raw: raw}
		c.peek.fn = c.peek.recv
	}
	p := c.peek
	p.spoke = true
	if err := p.raw.Read(p.fn); err != nil {
		return true
	}
	return p.spoke
}

// socketPeek is what peerSpoke keeps per connection, so that a peek allocates nothing.
type socketPeek struct {
	raw   syscall.RawConn
	fn    func(fd uintptr) bool
	spoke bool
	one   [1]byte
}
