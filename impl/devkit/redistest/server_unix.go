//go:build unix

package redistest

import (
	"syscall"
	"testing"
)

// Freeze stops the server process with SIGSTOP: the kernel still accepts
// connections to its port, but nothing answers, as with a hung server or a
// network that drops packets. Thaw undoes it.
func (s *Server) Freeze(t testing.TB) { s.signal(t, syscall.SIGSTOP) }

// Thaw resumes a server that Freeze stopped.
func (s *Server) Thaw(t testing.TB) { s.signal(t, syscall.SIGCONT) }

// signal sends sig to the running server.
func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		t.Fatalf("redistest: signal %v: the server is stopped", sig)
	}
	if err := s.cur.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redistest: signal %v: %v", sig, err)
	}
}
