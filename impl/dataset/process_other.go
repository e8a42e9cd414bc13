//go:build !linux

package dataset

import (
	"os"
	"syscall"
)

// engineExecutable is the binary an engine process runs: this process's.
func engineExecutable() (string, error) { return os.Executable() }

// engineProcAttr is empty off Linux: an engine process outlives a parent that is killed (it
// still exits when its stdin closes).
func engineProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// limitMemory does nothing off Linux, where RLIMIT_DATA does not bound mapped memory.
func limitMemory(int64) error { return nil }

// residentBytes is unknown off Linux.
func residentBytes() int64 { return 0 }

// takeProtocolOutput returns the engine's protocol output, a duplicate of fd 1, and points fd 1
// at fd 2 (stderr), so that stray output of the process goes to its log rather than into a
// frame (see the Linux version).
func takeProtocolOutput() (*os.File, error) {
	fd, err := syscall.Dup(1)
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.Dup2(2, 1); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "dataset engine protocol"), nil
}

// keepDescriptorsFromEngines does nothing off Linux, where the process's descriptors are not
// listed in /proc; Go opens its own close-on-exec.
func keepDescriptorsFromEngines() {}
