package apitest

import "net"

// SmallSendBuffers wraps l so that its connections have a small kernel send buffer (4 KiB):
// a client that stops reading then blocks the server's writes after a few kilobytes, as a
// stalled client does after megabytes, for the tests of what a server does with one.
func SmallSendBuffers(l net.Listener) net.Listener { return smallSendBuffers{l} }

type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}
