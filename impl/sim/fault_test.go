package sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// wire describes one format for the tests that run against all three.
type wire struct {
	name      string
	path      string
	model     string
	anthropic bool
	body      func(prompt string, stream bool) map[string]any
	// isContent reports a content event (a text delta).
	isContent func(t *testing.T, ev event) bool
}

var wires = []wire{
	{
		name: "chat", path: chatPath, model: "sim-general",
		body: func(p string, s bool) map[string]any { return chatBody(p, map[string]any{"stream": s}) },
		isContent: func(t *testing.T, ev event) bool {
			if ev.Data == "[DONE]" || strings.Contains(ev.Data, `"error"`) {
				return false
			}
			c := ev.JSON(t)
			ch, _ := c["choices"].([]any)
			if len(ch) == 0 {
				return false
			}
			d := ch[0].(map[string]any)["delta"].(map[string]any)
			return has(d, "content") && !has(d, "role")
		},
	},
	{
		name: "responses", path: responsesPath, model: "sim-reasoner",
		body:      func(p string, s bool) map[string]any { return responsesBody(p, map[string]any{"stream": s}) },
		isContent: func(_ *testing.T, ev event) bool { return ev.Name == "response.output_text.delta" },
	},
	{
		name: "messages", path: messagesPath, model: "sim-sonnet", anthropic: true,
		body:      func(p string, s bool) map[string]any { return messagesBody(p, map[string]any{"stream": s}) },
		isContent: func(_ *testing.T, ev event) bool { return ev.Name == "content_block_delta" },
	},
}

// checkEnvelope checks a pre-stream error body in the format's envelope and returns its type.
func checkEnvelope(t *testing.T, w wire, resp *http.Response) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", w.name, ct)
	}
	m := decode(t, readAll(t, resp))
	if w.anthropic {
		keys(t, "envelope", m, "type", "error", "request_id")
		keys(t, "error", m["error"], "type", "message")
		if m["type"] != "error" {
			t.Errorf("type %v", m["type"])
		}
		return path(t, m, "error.type").(string)
	}
	keys(t, "envelope", m, "error")
	keys(t, "error", m["error"], "message", "type", "param", "code")
	return path(t, m, "error.type").(string)
}

func TestStatusFaults(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, w := range wires {
		for _, c := range []struct {
			directive  string
			status     int
			retryAfter string
			retryMs    string
			openAIType string
			anthType   string
		}{
			{"[[sim fault=429 retry_after=2]]", 429, "2", "2000", "requests", "rate_limit_error"},
			{"[[sim fault=429]]", 429, "", "", "requests", "rate_limit_error"},
			{"[[sim fault=429 retry_after=0.25]]", 429, "1", "250", "requests", "rate_limit_error"},
			{"[[sim fault=502]]", 502, "", "", "server_error", "api_error"},
			{"[[sim fault=529]]", 529, "", "", "server_error", "overloaded_error"},
			{"[[sim fault=500]]", 500, "", "", "server_error", "api_error"},
			{"[[sim fault=503]]", 503, "", "", "server_error", "overloaded_error"},
			{"[[sim fault=400]]", 400, "", "", "invalid_request_error", "invalid_request_error"},
		} {
			for _, streaming := range []bool{false, true} {
				resp := post(t, srv, w.path, w.body("hello "+c.directive, streaming))
				if resp.StatusCode != c.status {
					t.Errorf("%s %s stream=%v: status %d", w.name, c.directive, streaming, resp.StatusCode)
				}
				if got := resp.Header.Get("Retry-After"); got != c.retryAfter {
					t.Errorf("%s %s: Retry-After %q, want %q", w.name, c.directive, got, c.retryAfter)
				}
				wantMs := c.retryMs
				if w.anthropic {
					wantMs = ""
				}
				if got := resp.Header.Get("Retry-After-Ms"); got != wantMs {
					t.Errorf("%s %s: retry-after-ms %q, want %q", w.name, c.directive, got, wantMs)
				}
				typ := checkEnvelope(t, w, resp)
				want := c.openAIType
				if w.anthropic {
					want = c.anthType
				}
				if typ != want {
					t.Errorf("%s %s: error type %q, want %q", w.name, c.directive, typ, want)
				}
			}
		}
	}
	resp := post(t, srv, chatPath, chatBody("[[sim fault=429 should_retry=false]]", nil))
	readAll(t, resp)
	if resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("x-should-retry %q", resp.Header.Get("X-Should-Retry"))
	}
}

func TestMidstreamFault(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			_, evs := stream(t, srv, w.path, w.body("hello [[sim fault=midstream after=3]]", true))
			content := 0
			for _, ev := range evs {
				if w.isContent(t, ev) {
					content++
				}
			}
			if content != 3 {
				t.Errorf("%d content events before the error, want 3", content)
			}
			last := evs[len(evs)-1]
			switch w.name {
			case "chat":
				if last.Name != "" {
					t.Errorf("event: line on the chat error")
				}
				m := last.JSON(t)
				keys(t, "in-band", m, "error")
				keys(t, "error", m["error"], "message", "type", "param", "code")
				if path(t, m, "error.type") != "server_error" {
					t.Errorf("error %v", m)
				}
				for _, ev := range evs {
					if ev.Data == "[DONE]" {
						t.Errorf("[DONE] after the error")
					}
				}
			case "responses":
				errEv, failed := evs[len(evs)-2], last
				e := errEv.JSON(t)
				keys(t, "error event", e, "type", "sequence_number", "code", "message", "param")
				if errEv.Name != "error" || e["code"] != "server_error" || num(t, e["sequence_number"]) != len(evs)-2 {
					t.Errorf("error event %s", errEv.Raw)
				}
				f := failed.JSON(t)
				if failed.Name != "response.failed" || num(t, f["sequence_number"]) != len(evs)-1 ||
					path(t, f, "response.status") != "failed" || path(t, f, "response.error.code") != "server_error" {
					t.Errorf("response.failed %s", failed.Raw)
				}
				keys(t, "response.error", path(t, f, "response.error"), "code", "message")
				if words(path(t, f, "response.output.0.content.0.text").(string)) != 3 {
					t.Errorf("partial output %v", path(t, f, "response.output"))
				}
				checkResponsesStream(t, evs)
			case "messages":
				m := last.JSON(t)
				if last.Name != "error" {
					t.Errorf("last event %q", last.Name)
				}
				keys(t, "in-band", m, "type", "error")
				keys(t, "error", m["error"], "type", "message")
				if m["type"] != "error" || path(t, m, "error.type") != "overloaded_error" {
					t.Errorf("error %v", m)
				}
			}

			// status= picks the error type; after= beyond the reply fires before the end.
			_, evs = stream(t, srv, w.path, w.body("hello [[sim fault=midstream after=100 status=429]]", true))
			last = evs[len(evs)-1]
			switch w.name {
			case "chat":
				if path(t, last.JSON(t), "error.code") != "rate_limit_exceeded" {
					t.Errorf("429 in-band %s", last.Data)
				}
			case "responses":
				if path(t, last.JSON(t), "response.error.code") != "rate_limit_exceeded" {
					t.Errorf("429 in-band %s", last.Data)
				}
			case "messages":
				if path(t, last.JSON(t), "error.type") != "rate_limit_error" {
					t.Errorf("429 in-band %s", last.Data)
				}
			}

			// Without streaming the fault is an HTTP error.
			resp := post(t, srv, w.path, w.body("hello [[sim fault=midstream]]", false))
			want := 500
			if w.anthropic {
				want = 529
			}
			if resp.StatusCode != want {
				t.Errorf("non-streaming midstream: status %d", resp.StatusCode)
			}
			checkEnvelope(t, w, resp)
		})
	}
}

func TestDropFault(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			resp := post(t, srv, w.path, w.body("hello [[sim fault=drop after=2]]", true))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			evs, err := parseSSE(t, resp.Body)
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("stream ended with %v, want unexpected EOF", err)
			}
			content := 0
			for _, ev := range evs {
				if w.isContent(t, ev) {
					content++
				}
			}
			if content != 2 {
				t.Errorf("%d content events before the drop", content)
			}

			resp = post(t, srv, w.path, w.body("hello [[sim fault=drop]]", false))
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("non-streaming drop: status %d, err %v", resp.StatusCode, err)
			}

			for _, streaming := range []bool{true, false} {
				resp, err := tryPost(srv, w.path, w.body("hello [[sim fault=drop_before]]", streaming))
				if err == nil {
					resp.Body.Close()
					t.Errorf("drop_before: got status %d, want a connection error", resp.StatusCode)
				}
			}
		})
	}
}

func TestStallFaults(t *testing.T) {
	const stall = 300 * time.Millisecond
	_, srv := newServer(t, Options{})
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp := post(t, srv, w.path, w.body("hello [[sim fault=stall ms=300]]", true))
			headers := time.Since(start)
			_, err := parseSSE(t, resp.Body)
			resp.Body.Close()
			total := time.Since(start)
			if err != nil || headers >= stall || total < stall {
				t.Errorf("stall: headers after %v, done after %v, err %v", headers, total, err)
			}

			// after=2: two content events, then the gap.
			resp = post(t, srv, w.path, w.body("hello [[sim fault=stall ms=300 after=2]]", true))
			evs, times := timedEvents(t, resp)
			var at []time.Time
			for i, ev := range evs {
				if w.isContent(t, ev) {
					at = append(at, times[i])
				}
			}
			// The client notes arrival times, so allow for its own scheduling delay.
			if len(at) != DefaultWords || at[2].Sub(at[1]) < stall-100*time.Millisecond || at[1].Sub(at[0]) >= stall/2 {
				t.Errorf("content events at %v", at)
			}

			start = time.Now()
			resp = post(t, srv, w.path, w.body("hello [[sim fault=stall_before ms=300]]", true))
			headers = time.Since(start)
			if _, err := parseSSE(t, resp.Body); err != nil || headers < stall {
				t.Errorf("stall_before: headers after %v, err %v", headers, err)
			}
			resp.Body.Close()

			start = time.Now()
			resp = post(t, srv, w.path, w.body("hello [[sim fault=stall ms=300]]", false))
			if readAll(t, resp); resp.StatusCode != http.StatusOK || time.Since(start) < stall {
				t.Errorf("non-streaming stall: %d after %v", resp.StatusCode, time.Since(start))
			}
		})
	}
}

// timedEvents parses a stream and notes when each event arrived.
func timedEvents(t *testing.T, resp *http.Response) ([]event, []time.Time) {
	t.Helper()
	defer resp.Body.Close()
	pr, pw := io.Pipe()
	var times []time.Time
	done := make(chan struct{})
	var evs []event
	go func() {
		defer close(done)
		evs, _ = parseSSE(t, pr)
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			now := time.Now()
			chunk := buf[:n]
			for range strings.Count(string(chunk), "\n\n") {
				times = append(times, now)
			}
			if _, werr := pw.Write(chunk); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	pw.Close()
	<-done
	if len(evs) != len(times) {
		t.Fatalf("%d events, %d arrival times", len(evs), len(times))
	}
	return evs, times
}

func TestTimesCounter(t *testing.T) {
	s, srv := newServer(t, Options{})
	for _, w := range wires {
		// The counter is per directive text: an unknown key (tag=) tells them apart.
		directive := "hello [[sim fault=429 times=2 tag=" + w.name + "]]"
		var got []int
		for range 4 {
			resp := post(t, srv, w.path, w.body(directive, false))
			readAll(t, resp)
			got = append(got, resp.StatusCode)
		}
		if got[0] != 429 || got[1] != 429 || got[2] != 200 || got[3] != 200 {
			t.Errorf("%s: statuses %v", w.name, got)
		}
		if n := s.Requests(w.model); n != 4 {
			t.Errorf("%s: Requests = %d", w.name, n)
		}
	}
	// Another directive text has its own counter; Reset starts them again.
	resp := post(t, srv, chatPath, chatBody("other [[sim fault=502 times=1]]", nil))
	readAll(t, resp)
	if resp.StatusCode != 502 {
		t.Errorf("fresh directive: %d", resp.StatusCode)
	}
	s.Reset()
	if s.Requests("sim-general") != 0 || s.TotalRequests() != 0 {
		t.Errorf("Reset kept counts")
	}
	resp = post(t, srv, chatPath, chatBody("other [[sim fault=502 times=1]]", nil))
	readAll(t, resp)
	if resp.StatusCode != 502 {
		t.Errorf("after Reset: %d", resp.StatusCode)
	}
}

func TestEnqueue(t *testing.T) {
	s, srv := newServer(t, Options{})
	s.Enqueue("up-a", Fault{Kind: FaultStatus, Status: 503, RetryAfter: 3 * time.Second})
	s.Enqueue("up-a", Fault{Kind: FaultMidstream, After: 1})
	body := func(model string) map[string]any {
		return map[string]any{"model": model, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	}
	// Another model is unaffected.
	_, evs := stream(t, srv, chatPath, body("up-b"))
	if evs[len(evs)-1].Data != "[DONE]" {
		t.Errorf("up-b failed")
	}
	resp := post(t, srv, chatPath, body("up-a"))
	readAll(t, resp)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("first: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	_, evs = stream(t, srv, chatPath, body("up-a"))
	if last := evs[len(evs)-1]; !strings.HasPrefix(last.Data, `{"error":`) || len(evs) != 3 {
		t.Errorf("second: %d events, last %s", len(evs), last.Data)
	}
	_, evs = stream(t, srv, chatPath, body("up-a"))
	if evs[len(evs)-1].Data != "[DONE]" {
		t.Errorf("third failed")
	}
	// Enqueued faults take precedence over directives, and work on every route.
	s.Enqueue("sim-sonnet", Fault{Kind: FaultStatus, Status: 529})
	resp = post(t, srv, messagesPath, messagesBody("[[sim fault=429]]", nil))
	if resp.StatusCode != 529 || checkEnvelope(t, wires[2], resp) != "overloaded_error" {
		t.Errorf("enqueued on messages: %d", resp.StatusCode)
	}
	if s.Requests("up-a") != 3 || s.Requests("up-b") != 1 || s.TotalRequests() != 5 {
		t.Errorf("counts %d %d %d", s.Requests("up-a"), s.Requests("up-b"), s.TotalRequests())
	}
}

func TestAuth(t *testing.T) {
	_, open := newServer(t, Options{})
	for _, w := range wires {
		resp := post(t, open, w.path, w.body("hi", false), "Authorization", "Bearer whatever", "x-api-key", "nonsense")
		if readAll(t, resp); resp.StatusCode != http.StatusOK {
			t.Errorf("%s without a configured key: %d", w.name, resp.StatusCode)
		}
	}
	_, srv := newServer(t, Options{APIKey: "sk-sim-secret-key"})
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			good := []string{"Authorization", "Bearer sk-sim-secret-key"}
			other := []string{"x-api-key", "sk-sim-secret-key"}
			if w.anthropic {
				good, other = other, good
			}
			for _, c := range []struct {
				name   string
				header []string
				status int
			}{
				{"right", good, 200},
				{"none", nil, 401},
				{"wrong", []string{good[0], strings.Replace(good[1], "secret", "wrong", 1)}, 401},
				{"other format's header", other, 401},
			} {
				for _, streaming := range []bool{false, true} {
					resp := post(t, srv, w.path, w.body("hi", streaming), c.header...)
					if resp.StatusCode != c.status {
						t.Errorf("%s stream=%v: %d, want %d", c.name, streaming, resp.StatusCode, c.status)
					}
					if c.status != 200 {
						typ := checkEnvelope(t, w, resp)
						if want := map[bool]string{true: "authentication_error", false: "invalid_request_error"}[w.anthropic]; typ != want {
							t.Errorf("%s: type %q", c.name, typ)
						}
					} else {
						readAll(t, resp)
					}
				}
			}
		})
	}
	resp := post(t, srv, chatPath, chatBody("hi", nil), "Authorization", "Bearer sk-sim-wrong-key")
	if m := decode(t, readAll(t, resp)); path(t, m, "error.code") != "invalid_api_key" || strings.Contains(path(t, m, "error.message").(string), "wrong") {
		t.Errorf("wrong key: %v", m)
	}
}

func TestClientGoneStopsStream(t *testing.T) {
	s := New(Options{TokensPerSecond: 50})
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+chatPath,
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"[[sim words=100000]]"}]}`))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler kept streaming after the client went away")
	}
}

func TestPacing(t *testing.T) {
	_, srv := newServer(t, Options{FirstTokenLatency: 100 * time.Millisecond, TokensPerSecond: 50, DefaultWords: 6})
	start := time.Now()
	resp := post(t, srv, chatPath, chatBody("hi", map[string]any{"stream": true}))
	evs, times := timedEvents(t, resp)
	if len(evs) != 1+6+2 {
		t.Fatalf("%d events", len(evs))
	}
	first, last := times[1].Sub(start), times[6].Sub(start)
	if first < 100*time.Millisecond || last < 100*time.Millisecond+5*20*time.Millisecond {
		t.Errorf("first content after %v, last after %v", first, last)
	}
	if times[0].Sub(start) >= 100*time.Millisecond {
		t.Errorf("the opening chunk waited for the first-token latency")
	}
	// A directive overrides the pacing.
	start = time.Now()
	readAll(t, post(t, srv, chatPath, chatBody("hi [[sim tps=0 first_ms=0]]", nil)))
	if d := time.Since(start); d >= 100*time.Millisecond {
		t.Errorf("unpaced reply took %v", d)
	}
}
