//go:build !linux

package replicas_test

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent death signal; the tests'
// cleanups still stop every gateway process when the tests end normally.
func setParentDeathSignal(*exec.Cmd) {}
