package replicas_test

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill a gateway process if the test binary dies without
// running its cleanups, as on a panic or a test timeout.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
