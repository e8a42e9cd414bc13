package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdinIsTerminal reports whether the process's standard input is a terminal, where a person
// can answer a question: a pipe, a file or /dev/null (a character device too, as CI's empty
// standard input is) is not.
func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}
