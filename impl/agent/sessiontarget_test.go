package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
)

// TestSessionCommandsAddressTheirSession: a message or a stop sent to a session by its id (a
// console page of that session) acts on it only while it is its slot's live session; when the
// slot's live session is another one, it is a conflict and nothing is done to that other
// session. Trial h13 D6: the console's buttons acted on whatever session was live in a slot of
// the same name, and told the member it was the one on the page.
func TestSessionCommandsAddressTheirSession(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	res, err := svc.Spawn(ctx, tn.p, "main", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	live := waitSession(t, svc, tn.p, res.SessionID, agent.StateReady)
	other := uuid.New() // a session that is not the slot's live one
	var conflict *agent.ConflictError
	if _, err := svc.SendSessionMessage(ctx, tn.p, "main", other, "For the other session."); !errors.As(err, &conflict) {
		t.Fatalf("a message to a session that is not live in the slot: %v", err)
	}
	if _, err := svc.StopSession(ctx, tn.p, "main", other); !errors.As(err, &conflict) {
		t.Fatalf("a stop of a session that is not live in the slot: %v", err)
	}
	if after := waitSession(t, svc, tn.p, res.SessionID, agent.StateReady); after.Turns != live.Turns || after.State != agent.StateReady {
		t.Fatalf("the live session was acted on: %+v", after)
	}
	if _, err := svc.StopSession(ctx, tn.p, "main", uuid.MustParse(res.SessionID)); err != nil {
		t.Fatalf("a stop of the live session by its id: %v", err)
	}
	waitSession(t, svc, tn.p, res.SessionID, agent.StateStopped)
}

// TestMessageAboveTheContextWindowIsRefused: a message (or a spawn's prompt) that alone is above
// the context window of the session's model is refused with 400 naming it, and the session goes
// on: its turn's model call would be refused, and would fail the session. Trial h13 D8: a
// 262,144-character message of emoji was accepted, and failed its session.
func TestMessageAboveTheContextWindowIsRefused(t *testing.T) {
	w := newWorld(t, nil)
	n := w.start()
	svc := n.gw.Agents
	ctx := context.Background()
	tn := w.tenant(n, "acme", 5_000_000)
	huge := strings.Repeat("😀", 250_000) // 1,000,000 bytes: about 250,000 tokens, above service-flint's 200,000
	if _, err := svc.Spawn(ctx, tn.p, "main", huge, ""); apierror.As(err) == nil || apierror.As(err).Param != "prompt" {
		t.Fatalf("a spawn whose prompt is above the window: %v", err)
	}
	res, err := svc.Spawn(ctx, tn.p, "main", "Say hello.", "")
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, svc, tn.p, res.SessionID, agent.StateReady)
	if _, err := svc.SendMessage(ctx, tn.p, "main", huge, ""); apierror.As(err) == nil || apierror.As(err).Param != "text" {
		t.Fatalf("a message above the window: %v", err)
	}
	if _, err := svc.SendMessage(ctx, tn.p, "main", "And goodbye.", ""); err != nil {
		t.Fatalf("a message after the refused one: %v", err)
	}
	if s := waitSession(t, svc, tn.p, res.SessionID, agent.StateReady, agent.StateFailed); s.State != agent.StateReady {
		t.Fatalf("the session after a refused message: %+v", s)
	}
}
