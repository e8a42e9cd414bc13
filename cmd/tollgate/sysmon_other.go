//go:build !linux

package main

import "errors"

// reexec is not done outside Linux: the runtime's default stays.
func reexec([]string) error { return errors.New("only done on Linux") }
