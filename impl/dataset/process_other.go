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
