//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package upstreamconn

// socketPeek is unused on this platform.
type socketPeek struct{}

// peerSpoke reports whether bytes the next request did not ask for are already buffered; on
// this platform the socket itself is not inspected.
func (c *conn) peerSpoke() bool { return c.br.Buffered() > 0 }
