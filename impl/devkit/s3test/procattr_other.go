//go:build !linux

package s3test

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group (Stop and Freeze signal the group);
// without a parent death signal, Close stops it when the tests end normally.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// waitGroupStopped returns at once where /proc cannot tell whether the group has stopped.
func waitGroupStopped(pgid int) {}
