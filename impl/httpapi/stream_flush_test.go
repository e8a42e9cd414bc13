package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
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
