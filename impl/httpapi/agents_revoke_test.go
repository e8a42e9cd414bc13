package httpapi_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sse"
)

// TestAgentEventsEndWhenTheKeyIsRevoked: a session's event stream opened with a key ends once
// the key is revoked (at the next heartbeat or event at the latest), rather than following the
// session for as long as it lives; the same key then gets 401 on a new stream.
func TestAgentEventsEndWhenTheKeyIsRevoked(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Heartbeat: 50 * time.Millisecond})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	a.spawn("main", scriptPrompt)
	a.waitState("main", "ready") // the session lives on, idle: its stream would follow it

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := a.openEvents(ctx, "main", "", nil)
	defer res.Body.Close()
	r := sse.NewReader(res.Body)
	if _, err := readEvents(t, r, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accounts.Revoke(context.Background(), tn.Account.ID, tn.KeyID); err != nil {
		t.Fatal(err)
	}
	// The rest of the log may still come; then the stream must end, not idle on heartbeats.
	_, err := readEvents(t, r, -1)
	if ctx.Err() != nil {
		t.Fatal("the stream of a revoked key was still open 10 s after the revocation")
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("the stream ended with %v", err)
	}
	if status, _, body := a.do("GET", "/v1/agents/main/events", "", nil); status != 401 {
		t.Fatalf("a new stream with the revoked key: %d %s", status, body)
	}
}
