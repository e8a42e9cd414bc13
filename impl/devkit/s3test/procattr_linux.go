package s3test

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group (Stop and Freeze signal the group) and
// makes the kernel kill it if the test process dies first.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
