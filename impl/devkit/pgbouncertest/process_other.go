//go:build !unix

package pgbouncertest

import "syscall"

// processAttr starts pgbouncer as the test's own user, with nothing to kill it if the test
// process dies first.
func processAttr() (attr *syscall.SysProcAttr, otherUser bool, err error) {
	return &syscall.SysProcAttr{}, false, nil
}
