package pgbouncertest

import "syscall"

// setParentDeathSignal makes the kernel kill pgbouncer if the test process dies without running
// its cleanup, as on a panic or a test timeout.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
