package dataset

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// engineProcAttr has an engine process killed when the thread of its parent that started it
// exits (with the parent, in practice), and in a process group of its own, so that a signal
// to the gateway's group (a terminal's ^C) reaches the gateway, which then closes it.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// engineExecutable is the binary an engine process runs: this very process's, through
// /proc/self/exe, which stays the running binary's even when an upgrade has replaced the file at
// its path (os.Executable's path would then start the new version, whose protocol may differ).
func engineExecutable() (string, error) { return "/proc/self/exe", nil }

// limitMemory bounds the process's data segment (RLIMIT_DATA: since Linux 4.7 every private
// writable mapping, so the heaps of Go and of DuckDB and the threads' stacks) to bound bytes:
// an allocation past it fails, and the engine reports an error or dies, never the gateway. It
// also makes the process the kernel's first choice when the machine or the container (whose
// cgroup it shares with the gateway) runs out of memory (oom_score_adj 1000, which any process
// may raise for itself).
func limitMemory(bound int64) error {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	return syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(bound), Max: uint64(bound)})
}

// residentBytes is the process's resident memory (VmRSS), or 0 when it cannot be read.
func residentBytes() int64 { return statusBytes("self", "VmRSS:") }

// statusBytes reads a field given in kB from /proc/<pid>/status, in bytes (0 when unknown).
func statusBytes(pid, field string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// takeProtocolOutput returns the engine's protocol output, a duplicate of fd 1 (the pipe the
// parent reads frames from), and points fd 1 at fd 2 (stderr): whatever else in the process
// writes to its standard output (DuckDB's C++ code, a library's fmt.Println, os.Stdout) then
// goes to the engine's log, which the parent keeps the tail of, instead of into a frame, where
// it would leave the parent reading garbage. The duplicate is closed on exec.
func takeProtocolOutput() (*os.File, error) {
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	if err := unix.Dup3(2, 1, 0); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "dataset engine protocol"), nil
}

// keepDescriptorsFromEngines marks every descriptor of this process above 2 close-on-exec, so
// that an engine process started next inherits none: exec.Cmd passes only the descriptors it
// is given, but a descriptor this process inherited without close-on-exec (from whatever
// started the gateway: a shell's, a supervisor's) or that a C library opened without it would
// pass on to every engine, within reach of code running there. The gateway's own descriptors
// (Go opens every one close-on-exec) are unchanged, and close-on-exec changes nothing for this
// process itself.
func keepDescriptorsFromEngines() {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
