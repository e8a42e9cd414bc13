package redistest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child if the test process
// dies without running Main's cleanup, as on a panic or a test timeout.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
