package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/store"
)

// TestStreamEventsAreNotHeldBack: each event reaches the client before the upstream sends the
// next one. The upstream here sends its first chunk and then waits until the client, reading
// through the gateway, has received that chunk's text; a gateway that buffered events would
// leave both waiting until the guard below fails the test.
func TestStreamEventsAreNotHeldBack(t *testing.T) {
	seen := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string, usage bool) {
			fin := "null"
			if finish != "" {
				fin = fmt.Sprintf("%q", finish)
			}
			u := ""
			if usage {
				u = `,"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"up\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]%s}\n\n", delta, fin, u)
		}
		chunk("first-word", "", false)
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-r.Context().Done():
			return
		}
		chunk(" second-word", "stop", false)
		chunk("", "stop", true)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(upstream.Close)

	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "held", Kind: "openai-chat", BaseURL: upstream.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "held-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "held", Model: "up"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "held-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// No heartbeat during the test: a heartbeat would flush held events too.
	g := apitest.Start(t, apitest.Options{Config: cfg, Heartbeat: time.Hour})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)

	// A guard against a hang, not a measurement.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"held-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	res, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatalf("no answer while the upstream waits for its first event to be seen (%v)", err)
	}
	defer res.Body.Close()
	var got strings.Builder
	sc := bufio.NewScanner(res.Body)
	released := false
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
		if !released && strings.Contains(sc.Text(), "first-word") {
			released = true
			close(seen)
		}
	}
	if !released {
		t.Fatalf("the first event never reached the client before the upstream's next one (%v):\n%s", ctx.Err(), got.String())
	}
	if !strings.Contains(got.String(), "second-word") || !strings.HasSuffix(got.String(), "data: [DONE]\n\n") {
		t.Errorf("the stream did not finish:\n%s", got.String())
	}
}

// TestStalledStreamClientIsLetGo: a client that stops reading a stream (its receive window
// closed, its connection open) holds it at most four heartbeat intervals after a write began to
// wait: the stream then ends as a client that left, billed for what it produced
// (client_disconnected), and its upstream and reservation are let go while the client still
// holds its connection. Trial h16 D2: such a client held its upstream stream and its
// worst-case reservation for as long as it liked.
func TestStalledStreamClientIsLetGo(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Heartbeat: 200 * time.Millisecond})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000_000)
	u, _ := url.Parse(g.URL)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"model":"service-flint-base","stream":true,"max_tokens":64000,"messages":[{"role":"user","content":"Go on. [[sim words=150000]]"}]}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tenant.Key, len(body), body)
	if _, err := io.ReadFull(c, make([]byte, 300)); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing more, and keeps its connection.
	rec := latestUsageWithin(t, g, tenant.Account, 1, 30*time.Second)
	if rec.Status != "client_disconnected" || rec.OutputTokens <= 0 || rec.OutputTokens >= 150_000 {
		t.Errorf("a stalled client's stream: %+v", rec)
	}
	checkBooks(t, g, tenant.Account, 1_000_000_000)
}

// latestUsageWithin is latestUsage with a longer wait.
func latestUsageWithin(t *testing.T, g *apitest.Gateway, account store.Account, n int64, wait time.Duration) store.UsageRecord {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		records, _, err := g.Store.UsageTotals(context.Background(), account.ID)
		if err != nil {
			t.Fatal(err)
		}
		if records >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no usage record within %v: the stalled stream still runs", wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return latestUsage(t, g, account, n)
}
