//go:build dev

package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/sim"
)

// TestRelayCommand: both kinds of relay the bench runs forward a request to the simulator and
// stop when their context ends; -bytes refuses an upstream that is not http://host:port.
func TestRelayCommand(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	for _, mode := range [][]string{nil, {"-bytes"}} {
		addr := freeAddr()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runRelay(ctx, append(mode, "-listen", addr, "-upstream", up.URL)) }()
		if err := waitListening(addr, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		res, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(b), `"chat.completion"`) {
			t.Fatalf("%v: %d %s", mode, res.StatusCode, b)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%v: relay ended with %v", mode, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%v: relay still running after its context ended", mode)
		}
	}
	var usage usageError
	if err := runRelay(context.Background(), []string{"-bytes", "-listen", freeAddr(), "-upstream", "https://example.com"}); !errors.As(err, &usage) {
		t.Errorf("-bytes with an https upstream: %v, want a usage error", err)
	}
}
