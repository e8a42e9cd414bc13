package jaegertest

import (
	"sync"

	"github.com/tollgate/tollgate/impl/devkit/toolbuild"
)

// jaegerPackage is the jaeger v2 command, pinned in tools/jaeger/go.mod.
const jaegerPackage = "github.com/jaegertracing/jaeger/cmd/jaeger"

// BinaryEnv names a prebuilt jaeger binary to use instead of building one.
const BinaryEnv = "TOLLGATE_JAEGER"

var binary struct {
	once sync.Once
	path string
	err  error
}

// BinaryPath returns the jaeger binary: $TOLLGATE_JAEGER when set, else the one built from
// tools/jaeger/go.mod on first use (under a file lock, so that concurrent test processes
// build it once) and cached in the Go build cache's directory.
func BinaryPath() (string, error) {
	binary.once.Do(func() {
		binary.path, binary.err = toolbuild.Binary(toolbuild.Tool{Name: "jaeger", Package: jaegerPackage, Env: BinaryEnv})
	})
	return binary.path, binary.err
}
