package main

import (
	"os"
	"syscall"
)

// reexec replaces the process's image with the same binary, the same arguments and env. It
// returns only on failure.
func reexec(env []string) error {
	return syscall.Exec("/proc/self/exe", os.Args, env)
}
