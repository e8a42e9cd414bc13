package browser_test

import (
	"os"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// TestMain shares one browser between the tests and stops it, and the throwaway PostgreSQL
// cluster, when they are done.
func TestMain(m *testing.M) {
	browsertest.Begin()
	code := m.Run()
	browsertest.Shutdown()
	if err := pgtest.Shutdown(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}
