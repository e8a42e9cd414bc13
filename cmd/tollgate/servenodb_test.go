package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestServeWithoutDatabaseURL (operator trial s10h5, item 2): `tollgate serve` with no
// DATABASE_URL took the API and metrics addresses and logged "metrics listening" before it
// said "DATABASE_URL is not set", so that with an address busy (another gateway, the default
// 127.0.0.1:9090 of a second one) the operator was told of the address instead. It now says
// what is missing first, exit status 2, having taken no address.
func TestServeWithoutDatabaseURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	err = runServe(context.Background(), []string{"-listen", busy.Addr().String(), "-metrics-listen", "off"}, false)
	if exitStatus(err) != 2 || !strings.Contains(err.Error(), "DATABASE_URL is not set") {
		t.Errorf("serve without DATABASE_URL, its address busy: %v (exit status %d)", err, exitStatus(err))
	}
}
