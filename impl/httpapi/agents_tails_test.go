package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sse"
)

// TestAgentLiveTailsAreBounded: an account follows at most agents.max_live_tails sessions live
// at once (2 here): with two events streams open, a third is refused before its headers with
// 429, Retry-After and the envelope's rate_limit_error saying so, and so is (with a tool error)
// a tail_agent_session that would wait for events, while one that does not wait is served;
// another account is not held back. A stream
// whose client leaves gives its tail back, and a new stream is then served. (Before, one key
// could hold any number of streams, each a connection and a database read at every event.)
func TestAgentLiveTailsAreBounded(t *testing.T) {
	cfg := config.Default()
	cfg.Agents.MaxLiveTails = 2
	g := apitest.Start(t, apitest.Options{Config: cfg, Heartbeat: 50 * time.Millisecond})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	g.AssignSlot(t, tn.Account.ID, "main")
	a := newAgentsClient(t, g, tn.Key)
	sess := a.spawn("main", scriptPrompt)
	a.waitState("main", "ready") // the session lives on, idle: its streams follow it

	open := func() (*http.Response, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		res := a.openEvents(ctx, "main", "", nil)
		if _, err := readEvents(t, sse.NewReader(res.Body), 1); err != nil {
			t.Fatal(err)
		}
		return res, cancel
	}
	first, leave := open()
	defer first.Body.Close()
	second, leave2 := open()
	defer second.Body.Close()
	defer leave2()

	// try opens a stream and answers its status, headers and, unless it is served, its body;
	// a stream served stays open until the test ends.
	try := func() (int, http.Header, []byte) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/v1/agents/main/events", nil)
		req.Header.Set("Authorization", "Bearer "+tn.Key)
		res, err := a.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			t.Cleanup(func() { res.Body.Close() })
			return res.StatusCode, res.Header, nil
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, body
	}
	status, h, body := try()
	var envelope struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &envelope)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || envelope.Error.Type != "rate_limit_error" ||
		!strings.Contains(envelope.Error.Message, "agents.max_live_tails") {
		t.Fatalf("a third stream: %d Retry-After %q %s, want 429 with Retry-After naming the bound", status, h.Get("Retry-After"), body)
	}
	cs := mcpSession(t, g, tn.Key)
	if text, isErr := mcpText(t, cs, "tail_agent_session", map[string]any{"session_id": sess.SessionID, "cursor": 1 << 40, "max_seconds": 1}); !isErr ||
		!strings.Contains(text, "agents.max_live_tails") {
		t.Fatalf("a waiting tail_agent_session beyond the bound: %v %s", isErr, text)
	}
	if text, isErr := mcpText(t, cs, "tail_agent_session", map[string]any{"session_id": sess.SessionID}); isErr {
		t.Fatalf("a tail_agent_session that does not wait: %s", text)
	}

	other := g.NewTenant(t, "globex", 0, 5_000_000)
	g.AssignSlot(t, other.Account.ID, "main")
	b := newAgentsClient(t, g, other.Key)
	b.spawn("main", scriptPrompt)
	b.waitState("main", "ready")
	ctx, cancel := context.WithCancel(context.Background())
	res := b.openEvents(ctx, "main", "", nil) // another account's stream is served
	res.Body.Close()
	cancel()

	// The first client leaves: its tail is given back (once the gateway sees it gone), and a
	// new stream is served.
	leave()
	first.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, _ := try()
		if status == http.StatusOK {
			break
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a stream after a client left: %d, want 200 within 10 s", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := g.Agents.LiveTails(tn.Account.ID); n != 2 {
		t.Errorf("%d live tails held, want 2 (the second stream and the new one)", n)
	}
}
