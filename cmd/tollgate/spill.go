package main

import (
	"os"
	"path/filepath"
)

// usageSpillDir is the default directory of the usage spill files (impl/usagespill), in which
// the meter keeps the usage records the database does not take until it does:
// $TOLLGATE_DATA_DIR/usage-spill (default .data/usage-spill). Each process of the directory
// takes a file of its own, so replicas on one host can share it.
func usageSpillDir() string {
	dataDir := os.Getenv("TOLLGATE_DATA_DIR")
	if dataDir == "" {
		dataDir = ".data"
	}
	return filepath.Join(dataDir, "usage-spill")
}
