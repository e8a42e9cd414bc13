//go:build linux || darwin || freebsd || netbsd || openbsd

package upstreamconn

import "syscall"

// peerSpoke reports whether the upstream has sent anything on the idle connection since its
// last response was read: data, or the end of the stream (it closed the connection). It peeks
// at the socket without blocking and without consuming; a connection it cannot inspect is
// reported as having spoken, so it is not reused.
func (c *conn) peerSpoke() bool {
	if c.br.Buffered() > 0 {
		return true
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	spoke := true
	var one [1]byte
	err = raw.Read(func(fd uintptr) bool {
		for {
			_, _, rerr := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if rerr == syscall.EINTR {
				continue
			}
			// EAGAIN: nothing waiting, the connection is quiet. Anything else (a byte, the end
			// of the stream with n == 0, an error) means it must not be reused.
			spoke = rerr != syscall.EAGAIN && rerr != syscall.EWOULDBLOCK
			return true // never wait for readability
		}
	})
	return spoke || err != nil
}
