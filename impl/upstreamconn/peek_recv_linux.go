package upstreamconn

import (
	"syscall"
	"unsafe"
)

// recv peeks at one byte without waiting. EAGAIN means nothing is waiting: the connection is
// quiet. Anything else (a byte, the end of the stream, an error) means it must not be reused.
// The call never blocks (MSG_DONTWAIT), so it is made as a raw system call: without the
// scheduler's bookkeeping around a call that may block, which on an idle process also wakes
// the runtime's monitor thread on every request.
func (p *socketPeek) recv(fd uintptr) bool {
	for {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.one[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		p.spoke = errno != syscall.EAGAIN && errno != syscall.EWOULDBLOCK
		return true // never wait for readability
	}
}
