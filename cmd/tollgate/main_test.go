package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeTestBinary()
	if err := pgtest.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
