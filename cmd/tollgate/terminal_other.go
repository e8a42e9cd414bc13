//go:build !linux

package main

import "os"

// stdinIsTerminal reports whether the process's standard input is a character device, which a
// terminal is; off Linux, /dev/null counts as one too.
func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
