//go:build !linux

package redistest

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent death
// signal; Main still stops the server when the tests end normally.
func setParentDeathSignal(*exec.Cmd) {}
