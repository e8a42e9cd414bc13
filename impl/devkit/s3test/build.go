package s3test

import (
	"sync"

	"github.com/tollgate/tollgate/impl/devkit/toolbuild"
)

// weedPackage is the package of SeaweedFS's command, pinned in tools/weed/go.mod.
const weedPackage = "github.com/seaweedfs/seaweedfs/weed"

// BinaryEnv names a prebuilt weed binary to use instead of building one.
const BinaryEnv = "TOLLGATE_WEED"

var binary struct {
	once sync.Once
	path string
	err  error
}

// BinaryPath returns the path of the weed binary: $TOLLGATE_WEED when set, else the one built
// from tools/weed/go.mod, which it builds on first use into the Go build cache's directory
// (tollgate-weed/<hash of go.mod and go.sum>/weed) and reuses afterwards, across test
// processes and runs. Concurrent test processes build it once (a file lock).
func BinaryPath() (string, error) {
	binary.once.Do(func() {
		binary.path, binary.err = toolbuild.Binary(toolbuild.Tool{Name: "weed", Package: weedPackage, Env: BinaryEnv})
	})
	return binary.path, binary.err
}
