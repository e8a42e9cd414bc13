//go:build darwin || freebsd || netbsd || openbsd

package upstreamconn

import "syscall"

// recv peeks at one byte without waiting. EAGAIN means nothing is waiting: the connection is
// quiet. Anything else (a byte, the end of the stream, an error) means it must not be reused.
func (p *socketPeek) recv(fd uintptr) bool {
	for {
		_, _, err := syscall.Recvfrom(int(fd), p.one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EINTR {
			continue
		}
		p.spoke = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true // never wait for readability
	}
}
