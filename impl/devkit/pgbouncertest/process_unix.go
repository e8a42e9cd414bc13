//go:build unix

package pgbouncertest

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// processAttr is how pgbouncer is started: as the "postgres" OS user when the test runs as root,
// which pgbouncer refuses (otherUser then says so), and, on Linux, killed by the kernel if the
// test process dies without running its cleanup (a panic, a test timeout).
func processAttr() (attr *syscall.SysProcAttr, otherUser bool, err error) {
	attr = &syscall.SysProcAttr{}
	setParentDeathSignal(attr)
	if os.Geteuid() != 0 {
		return attr, false, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, false, fmt.Errorf("pgbouncer refuses to run as root, and there is no postgres OS user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, false, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, false, err
	}
	attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return attr, true, nil
}
