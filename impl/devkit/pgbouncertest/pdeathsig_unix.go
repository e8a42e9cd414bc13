//go:build unix && !linux

package pgbouncertest

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent-death signal: a pgbouncer
// whose test process died is left running.
func setParentDeathSignal(*syscall.SysProcAttr) {}
