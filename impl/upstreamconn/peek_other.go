//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package upstreamconn

// socketPeek is unused on this platform.
type socketPeek struct{}

// peerSpoke reports nothing on this platform: the socket is not inspected (putIdle already
// refuses a connection with bytes buffered, and an early answer is found only once the
// upstream reads the body or closes the connection).
func (c *conn) peerSpoke() bool { return false }
