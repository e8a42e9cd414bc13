package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSocketDrainSignalSurvivesASecondShutdown: tollgate serve calls Shutdown again when the
// grace period is over, and http.Server runs its shutdown hooks on every call; the hook that
// tells open Responses sockets to drain closed its channel twice (trial h4: a panic at shutdown
// in any process that had opened a socket, cutting every stream without its settlement).
func TestSocketDrainSignalSurvivesASecondShutdown(t *testing.T) {
	srv := &http.Server{}
	r := httptest.NewRequest(http.MethodGet, "/v1/responses", nil)
	r = r.WithContext(context.WithValue(r.Context(), http.ServerContextKey, srv))
	draining := serverDraining(r)
	if again := serverDraining(r); again != draining {
		t.Fatal("two channels for one server")
	}
	for range 2 {
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Shutdown runs each hook in a goroutine of its own: wait for the signal, then give the
	// second call's hook the time to run (on the code before, its panic ended the test binary).
	select {
	case <-draining:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain signal is not closed after the shutdown")
	}
	time.Sleep(100 * time.Millisecond)
}
