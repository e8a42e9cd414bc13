package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/httpapi"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/sim"
)

// dialResponses opens the Responses WebSocket with key, as Codex CLI does.
func dialResponses(t *testing.T, g *apitest.Gateway, key string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+key)
	h.Set("OpenAI-Beta", "responses_websockets=2026-02-06")
	c, res, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(g.URL, "http://")+"/v1/responses", &websocket.DialOptions{HTTPHeader: h})
	if c != nil {
		c.SetReadLimit(64 << 20)
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, res, err
}

// openMessage dials the Responses WebSocket with key and begins a text message on it (within
// 30 s), for a test to write by parts: the connection and the message's writer.
func openMessage(t *testing.T, g *apitest.Gateway, key string) (*websocket.Conn, io.WriteCloser) {
	t.Helper()
	conn, _, err := dialResponses(t, g, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	w, err := conn.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	return conn, w
}

// socketEvent is one message the gateway sent on the socket.
type socketEvent struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Response struct {
		ID     string            `json:"id"`
		Output []json.RawMessage `json:"output"`
	} `json:"response"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	} `json:"error"`
	raw []byte
}

// terminal reports whether ev ends a response on the socket.
func (ev socketEvent) terminal() bool {
	switch ev.Type {
	case "response.completed", "response.failed", "response.incomplete", "error":
		return true
	}
	return false
}

// sendCreate sends a response.create message with the fields of body.
func sendCreate(t *testing.T, c *websocket.Conn, body map[string]any) {
	t.Helper()
	body["type"] = "response.create"
	msg, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		t.Fatalf("send response.create: %v", err)
	}
}

// readResponse reads the socket's messages up to and including the terminal one of a response.
func readResponse(t *testing.T, c *websocket.Conn) []socketEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var evs []socketEvent
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d events: %v", len(evs), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("a %v message", typ)
		}
		var ev socketEvent
		if err := json.Unmarshal(data, &ev); err != nil || ev.Type == "" {
			t.Fatalf("a message that is not an event with a type (%v): %s", err, data)
		}
		ev.raw = data
		evs = append(evs, ev)
		if ev.terminal() {
			return evs
		}
	}
}

func typesOf(evs []socketEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// sseTypes posts body to /v1/responses and returns the types of the stream's events.
func sseTypes(t *testing.T, g *apitest.Gateway, key string, body map[string]any) []string {
	t.Helper()
	body["stream"] = true
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", g.URL+"/v1/responses", strings.NewReader(string(raw)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST /v1/responses: %d: %s", res.StatusCode, b)
	}
	var types []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var ev socketEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("SSE data is not JSON: %s", data)
			}
			types = append(types, ev.Type)
		}
	}
	return types
}

// userMessage is an input item of a user's text.
func userMessage(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": text}
}

// chatFlintConfig is the default configuration with service-flint served by its chat expert
// only.
func chatFlintConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := passthroughConfig(t)
	for i := range cfg.Models {
		if cfg.Models[i].ID == "service-flint" {
			cfg.Models[i].Experts = cfg.Models[i].Experts[:1]
			if cfg.Models[i].Experts[0].Provider != "sim-openai-chat" {
				t.Fatalf("service-flint's first expert is %s", cfg.Models[i].Experts[0].Provider)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestResponsesWebSocketThreeTurns: three turns on one socket, each sending only its new input
// with the previous response's id, on a Responses upstream and on a chat upstream behind
// service-flint. Each turn's events are the ones the SSE stream gives for the same whole
// request, the upstream receives the whole conversation, and each response is billed once.
// On the code before the WebSocket mode the handshake is answered 426 and the dial fails.
func TestResponsesWebSocketThreeTurns(t *testing.T) {
	for _, c := range []struct {
		name, model   string
		upstreamRoute sim.Route
		cfg           func(*testing.T) *config.Config
	}{
		{"responses upstream", "test-responses", sim.RouteResponses, passthroughConfig},
		{"chat upstream behind service-flint", "service-flint", sim.RouteChat, chatFlintConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := apitest.Start(t, apitest.Options{Config: c.cfg(t)})
			tenant := g.NewTenant(t, "ws-turns", 0, 100_000_000)
			other := g.NewTenant(t, "sse-turns", 0, 100_000_000)
			conn, res, err := dialResponses(t, g, tenant.Key)
			if err != nil {
				status := 0
				if res != nil {
					status = res.StatusCode
				}
				t.Fatalf("dial: %v (status %d)", err, status)
			}
			var whole []any // the conversation so far, as the POST would send it
			prev := ""
			texts := []string{"first turn about apples", "second turn about pears", "third turn about plums"}
			for i, text := range texts {
				msg := map[string]any{"model": c.model, "instructions": "be brief", "store": false,
					"input": []any{userMessage(text)}, "max_output_tokens": 64}
				if prev != "" {
					msg["previous_response_id"] = prev
				}
				sendCreate(t, conn, msg)
				evs := readResponse(t, conn)
				last := evs[len(evs)-1]
				if last.Type != "response.completed" {
					t.Fatalf("turn %d ended with %s: %s", i+1, last.Type, last.raw)
				}
				if last.Response.ID == "" || last.Response.ID == prev || len(last.Response.Output) == 0 {
					t.Fatalf("turn %d: response id %q (previous %q), %d output items", i+1, last.Response.ID, prev, len(last.Response.Output))
				}
				// What the upstream got is the whole conversation.
				rec := g.Sim.LastRequest()
				if rec.Route != c.upstreamRoute {
					t.Errorf("turn %d went to the %q upstream route", i+1, rec.Route)
				}
				for _, earlier := range texts[:i+1] {
					if !strings.Contains(string(rec.Body), earlier) {
						t.Errorf("turn %d: the upstream request lacks %q: %s", i+1, earlier, rec.Body)
					}
				}
				// The same whole request as a POST streams the same events.
				whole = append(whole, userMessage(text))
				want := sseTypes(t, g, other.Key, map[string]any{"model": c.model, "instructions": "be brief", "store": false,
					"input": whole, "max_output_tokens": 64})
				if got := typesOf(evs); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("turn %d: socket events\n%v\nSSE events\n%v", i+1, got, want)
				}
				for _, item := range last.Response.Output {
					whole = append(whole, item)
				}
				prev = last.Response.ID
			}
			if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
				t.Errorf("close: %v", err)
			}
			waitSettled(t, g, tenant.Account, 3)
			recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
			if err != nil || len(recs) != 3 {
				t.Fatalf("usage records %d (%v), want 3", len(recs), err)
			}
			for _, r := range recs {
				if r.Route != "/v1/responses" || r.Status != "ok" || r.Model != c.model || r.OutputTokens <= 0 || r.CostMicros <= 0 {
					t.Errorf("usage record %+v", r)
				}
			}
		})
	}
}

// TestResponsesWebSocketBadKey: a handshake with an unknown key is refused 401 in the OpenAI
// envelope, as the POST is (the code before the WebSocket mode answered every key 426).
func TestResponsesWebSocketBadKey(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	_, res, err := dialResponses(t, g, "tgk_notakeynotakeynotakeynotakeynotakeynotakeynotake")
	if err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial with a bad key: %v, %+v; want a 401", err, res)
	}
	var env struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(res.Body)
	if json.Unmarshal(b, &env) != nil || env.Error.Type != "invalid_request_error" && env.Error.Type != "authentication_error" {
		t.Errorf("body %s", b)
	}
}

// TestResponsesWebSocketHandshakesAreCountedUnderTheirRoute: the socket's handshakes, accepted
// (101, counted when the socket ends) and refused (401), are counted under the route label
// "GET /v1/responses", and a path the gateway does not serve under "unmatched": before, both
// were "/", so an operator could not tell refused sockets from stray 404s (trial h10 D7).
func TestResponsesWebSocketHandshakesAreCountedUnderTheirRoute(t *testing.T) {
	m := metrics.New()
	g := apitest.Start(t, apitest.Options{Metrics: m})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	if _, res, err := dialResponses(t, g, "tgk_notakeynotakeynotakeynotakeynotakeynotakeynotake"); err == nil || res == nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial with a bad key: %v; want a 401", err)
	}
	c, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	if res, err := http.Get(g.URL + "/v1/nowhere"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /v1/nowhere: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	series := func(route, status string) string {
		return `tollgate_http_requests_total{route="` + route + `",status="` + status + `"}`
	}
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, m, series("GET /v1/responses", "101")) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the accepted handshake was not counted under GET /v1/responses")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := scrape(t, m, series("GET /v1/responses", "401")); n != 1 {
		t.Errorf("refused handshakes under GET /v1/responses: %v, want 1", n)
	}
	if n := scrape(t, m, series("unmatched", "404")); n != 1 {
		t.Errorf("404s under unmatched: %v, want 1", n)
	}
	// The socket's life is not the gateway's added time (trial h8 D20); the refused handshake's is.
	if n := scrape(t, m, `tollgate_added_seconds_count{route="GET /v1/responses"}`); n != 1 {
		t.Errorf("added-time observations under GET /v1/responses: %v, want 1 (the 401, not the socket)", n)
	}
	for _, status := range []string{"101", "401", "404"} {
		if n := scrape(t, m, series("/", status)); n != 0 {
			t.Errorf(`%v requests counted under route="/" with status %s`, n, status)
		}
	}
}

// TestResponsesWebSocketUnknownPreviousResponse: an id the connection does not know gets the
// error event Codex answers by resending the whole input, and the socket serves on.
func TestResponsesWebSocketUnknownPreviousResponse(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-unknown", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "input": "hi", "previous_response_id": "resp_elsewhere"})
	evs := readResponse(t, conn)
	if len(evs) != 1 || evs[0].Type != "error" || evs[0].Status != http.StatusBadRequest || evs[0].Error.Code != "previous_response_not_found" {
		t.Fatalf("events %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "input": "hi"})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("after the refusal: %v", typesOf(evs))
	}
}

// TestResponsesWebSocketClientLeavesMidStream: a client that closes the socket during a
// response is billed for what was produced, once, as a client leaving an SSE stream is.
func TestResponsesWebSocketClientLeavesMidStream(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-leaves", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 2000, "input": "tell a long story [[sim words=1000 tps=50]]"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deltas := 0
	for deltas < 3 {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"response.output_text.delta"`) {
			deltas++
		}
	}
	if err := conn.Close(websocket.StatusNormalClosure, "bye"); err != nil && websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Logf("close: %v", err)
	}
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil || len(recs) != 1 || recs[0].Status != "client_disconnected" || recs[0].OutputTokens <= 0 || recs[0].OutputTokens >= 1000 {
		t.Fatalf("usage records %+v (%v), want one client_disconnected record with the output produced", recs, err)
	}
}

// TestResponsesWebSocketIdleClose: a socket without a message for the idle time is closed
// with 1000.
func TestResponsesWebSocketIdleClose(t *testing.T) {
	defer httpapi.SetResponsesSocketIdle(300 * time.Millisecond)()
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-idle", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = conn.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure {
		t.Fatalf("read: %v, want a 1000 close", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("closed after %v", d)
	}
}

// TestResponsesWebSocketRevokedKey: a key revoked while the socket is open serves no more
// responses: the next response.create gets a 401 error event and the socket closes with 1008.
func TestResponsesWebSocketRevokedKey(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-revoked", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Store.RevokeAccountAPIKey(context.Background(), tenant.Account.ID, tenant.KeyID, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		sendCreate(t, conn, map[string]any{"model": "service-flint", "input": "hi"})
		evs := readResponse(t, conn)
		if evs[0].Type == "error" && evs[0].Status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still serves: %v", typesOf(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = conn.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Fatalf("after the 401: %v, want a 1008 close", err)
	}
}

// TestResponsesWebSocketWarmup: a response.create with "generate": false (Codex's prewarm)
// completes at once with no output and no usage record, and the next request continues from
// it with only its new input.
func TestResponsesWebSocketWarmup(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-warmup", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "generate": false, "input": []any{userMessage("context from the warmup")}})
	evs := readResponse(t, conn)
	if got := strings.Join(typesOf(evs), " "); got != "response.created response.completed" || len(evs[1].Response.Output) != 0 {
		t.Fatalf("warmup events %s: %s", got, evs[len(evs)-1].raw)
	}
	requests := g.Sim.TotalRequests()
	if requests != 0 {
		t.Errorf("the warmup went upstream (%d requests)", requests)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "previous_response_id": evs[1].Response.ID, "input": []any{userMessage("the real question")}})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("after the warmup: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
	if body := string(g.Sim.LastRequest().Body); !strings.Contains(body, "context from the warmup") || !strings.Contains(body, "the real question") {
		t.Errorf("the upstream request lacks the warmup's input: %s", body)
	}
	waitSettled(t, g, tenant.Account, 1)
}

// TestResponsesWebSocketGenerateIsABoolean: "generate" is a boolean. One of another kind ("no",
// "false", 0) is refused with the socket's error event (status 400, param generate), nothing
// goes upstream and the socket serves on; true and null (as absent) generate, false warms up.
// On the old code anything but the literal false was taken as true: an answer was generated,
// and billed, for a client that may have asked for none.
func TestResponsesWebSocketGenerateIsABoolean(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-generate", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, generate := range []any{"no", "false", 0, map[string]any{}} {
		before := g.Sim.TotalRequests()
		sendCreate(t, conn, map[string]any{"model": "service-flint", "generate": generate, "input": "hi"})
		evs := readResponse(t, conn)
		var ev struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		last := evs[len(evs)-1]
		_ = json.Unmarshal(last.raw, &ev)
		if len(evs) != 1 || last.Type != "error" || last.Status != http.StatusBadRequest || ev.Error.Param != "generate" ||
			!strings.Contains(last.Error.Message, "expected a boolean") {
			t.Errorf("generate %#v: events %v: %s; want one error event, status 400, param generate", generate, typesOf(evs), last.raw)
		}
		if n := g.Sim.TotalRequests() - before; n != 0 {
			t.Errorf("generate %#v: %d requests went upstream", generate, n)
		}
	}
	for _, c := range []struct {
		generate any
		upstream int
	}{{true, 1}, {nil, 1}, {false, 0}} {
		before := g.Sim.TotalRequests()
		sendCreate(t, conn, map[string]any{"model": "service-flint", "generate": c.generate, "input": "hi", "max_output_tokens": 16})
		if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
			t.Errorf("generate %v: %v: %s", c.generate, typesOf(evs), evs[len(evs)-1].raw)
		}
		if n := g.Sim.TotalRequests() - before; n != c.upstream {
			t.Errorf("generate %v: %d requests went upstream, want %d", c.generate, n, c.upstream)
		}
	}
}

// TestResponsesWebSocketQueuedMessageGivesBackItsBudget: a large response.create waiting
// behind a running response holds its share of the body budget; when the socket ends before it
// is served (the client leaves; a third message closes the socket with 1008), the share is
// given back. On the code before, each such socket kept 32 MiB of the budget until the process
// ended, and after two of them another tenant's 2 MiB POST was refused 503.
func TestResponsesWebSocketQueuedMessageGivesBackItsBudget(t *testing.T) {
	g, m := budgetGateway(t, 64)
	tenant := g.NewTenant(t, "ws-queued", 0, 1_000_000_000_000)
	inUse := func() float64 { return metricValue(scrapeOpenMetrics(t, m), "tollgate_body_budget_in_use_bytes ") }
	large := map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": strings.Repeat("lorem ipsum ", (20<<20)/12)}
	for _, end := range []string{"the client leaves", "a third message"} {
		conn, _, err := dialResponses(t, g, tenant.Key)
		if err != nil {
			t.Fatal(err)
		}
		sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 2000, "input": "tell a long story [[sim words=1000 tps=50]]"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, _, err := conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		sendCreate(t, conn, large)
		// Read whole: what it holds has stopped growing.
		last := 0.0
		waitUntil(t, end+": the queued message read whole, holding its budget", func() bool {
			now := inUse()
			settled := now >= 19<<20 && now == last
			last = now
			time.Sleep(100 * time.Millisecond)
			return settled
		})
		if end == "the client leaves" {
			conn.CloseNow()
		} else {
			sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "one too many"})
		}
		waitUntil(t, end+": the budget given back", func() bool { return inUse() == 0 })
	}
	a := postJSON(t, &http.Client{Timeout: 30 * time.Second}, g.URL+"/v1/chat/completions", g.NewTenant(t, "ws-other", 0, 1_000_000_000_000).Key,
		`{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":"`+strings.Repeat("lorem ipsum ", (2<<20)/12)+`"}]}`)
	// Its prompt is over the model's context window: the answer is 400, not the spent budget's 503.
	if a.status == http.StatusServiceUnavailable {
		t.Errorf("another tenant's 2 MiB POST afterwards: %d %s", a.status, a.body[:min(len(a.body), 300)])
	}
}

// TestResponsesWebSocketMemoryIsBounded: what the sockets remember for previous_response_id is
// bounded across sockets: an account's sockets together hold at most a quarter of the pool
// (half the body budget: 32 MiB here, 8 MiB an account). A tenant that sends free warmups of
// 3 MiB on three sockets keeps what fits, its sockets forgetting their oldest first; a warmup
// that finds no room is not remembered, and a request naming it gets
// previous_response_not_found. Another tenant's socket remembers as before, and everything is
// given back when the sockets end. On the code before, every warmup was remembered (up to
// 64 MiB a socket, on any number of sockets).
func TestResponsesWebSocketMemoryIsBounded(t *testing.T) {
	g, m := budgetGateway(t, 64)
	hoarder := g.NewTenant(t, "ws-hoarder", 0, 1_000_000_000)
	other := g.NewTenant(t, "ws-neighbour", 0, 1_000_000_000)
	inUse := func() float64 {
		return metricValue(scrapeOpenMetrics(t, m), "tollgate_responses_socket_memory_in_use_bytes ")
	}
	warmUp := func(conn *websocket.Conn, previous, text string) string {
		t.Helper()
		body := map[string]any{"model": "service-flint-base", "generate": false, "input": []any{userMessage(text)}}
		if previous != "" {
			body["previous_response_id"] = previous
		}
		sendCreate(t, conn, body)
		evs := readResponse(t, conn)
		if evs[len(evs)-1].Type != "response.completed" {
			t.Fatalf("warmup: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
		}
		return evs[len(evs)-1].Response.ID
	}
	big := strings.Repeat("a", 3<<20)
	var sockets []*websocket.Conn
	var ids []string
	for range 3 {
		conn, _, err := dialResponses(t, g, hoarder.Key)
		if err != nil {
			t.Fatal(err)
		}
		sockets = append(sockets, conn)
		ids = append(ids, warmUp(conn, "", big))
	}
	// Two of 3 MiB fit in 8 MiB: the third socket's warmup found no room and is not remembered.
	if got := inUse(); got < 6<<20 || got > 8<<20 {
		t.Errorf("the hoarder's sockets remember %.1f MiB, want 6 MiB of its 8", got/(1<<20))
	}
	if v := metricValue(scrapeOpenMetrics(t, m), "tollgate_responses_socket_memory_forgotten_total "); v != 1 {
		t.Errorf("forgotten responses: %v, want 1", v)
	}
	sendCreate(t, sockets[2], map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "previous_response_id": ids[2], "input": []any{userMessage("and now?")}})
	if evs := readResponse(t, sockets[2]); evs[len(evs)-1].Type != "error" || evs[len(evs)-1].Error.Code != "previous_response_not_found" {
		t.Errorf("a request naming the warmup not remembered: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
	// The first socket continues its own conversation (6 MiB with what it follows): it forgets
	// its oldest to make room, and still finds none beside the second socket's 3 MiB.
	warmUp(sockets[0], ids[0], big)
	if got := inUse(); got < 3<<20 || got > 3<<20+1024 {
		t.Errorf("after a chained warmup the hoarder's sockets remember %.1f MiB, want the second socket's 3", got/(1<<20))
	}
	if v := metricValue(scrapeOpenMetrics(t, m), "tollgate_responses_socket_memory_forgotten_total "); v != 2 {
		t.Errorf("forgotten responses: %v, want 2", v)
	}
	// The neighbour is not crowded out.
	conn, _, err := dialResponses(t, g, other.Key)
	if err != nil {
		t.Fatal(err)
	}
	id := warmUp(conn, "", "the neighbour's context "+strings.Repeat("b", 200<<10))
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "previous_response_id": id, "input": []any{userMessage("the neighbour's question")}})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Errorf("the neighbour's request after its warmup: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
	if body := string(g.Sim.LastRequest().Body); !strings.Contains(body, "the neighbour's context") {
		t.Errorf("the neighbour's upstream request lacks its warmup's input")
	}
	for _, c := range append(sockets, conn) {
		c.CloseNow()
	}
	waitUntil(t, "the sockets' memory given back", func() bool { return inUse() == 0 })
}

// TestResponsesWebSocketClosedSocketServesNothingMore: a third response.create while one
// streams and one waits closes the socket (1008), and a binary message does (1003); the close
// waits up to five seconds for the client's answer, which this client never sends (it stops
// reading). The response in flight finishes meanwhile; the message waiting must not be served
// (trial h4: it was sent upstream and billed, though the client never got a byte of it).
func TestResponsesWebSocketClosedSocketServesNothingMore(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-closed", 0, 1_000_000_000_000)
	for _, end := range []string{"a third message", "a binary message"} {
		g.Sim.Reset()
		conn, _, err := dialResponses(t, g, tenant.Key)
		if err != nil {
			t.Fatal(err)
		}
		sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 200, "input": "first [[sim words=20 tps=40]]"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, _, err := conn.Read(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "waiting"})
		if end == "a third message" {
			sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "one too many"})
		} else {
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := conn.Write(wctx, websocket.MessageBinary, []byte{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			wcancel()
		}
		// The first response (about half a second) ends well within the close's five seconds.
		time.Sleep(6 * time.Second)
		if n := g.Sim.Requests("sim-general"); n != 1 {
			t.Errorf("%s: the upstream saw %d requests, want the first one only", end, n)
		}
		conn.CloseNow()
	}
}

// TestResponsesWebSocketMessageTooBig: a message above the body limit (32 MiB) closes the
// socket with 1009, as the WebSocket library's own limit would (trial h4: the gateway's limit,
// the same bound, tripped first and the connection was dropped without a close frame).
func TestResponsesWebSocketMessageTooBig(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-big", 0, 1_000_000_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big := []byte(`{"type":"response.create","model":"service-flint-base","input":"` + strings.Repeat("a", 33<<20) + `"}`)
	_ = conn.Write(ctx, websocket.MessageText, big) // the gateway may close before it is all sent
	_, _, err = conn.Read(ctx)
	if status := websocket.CloseStatus(err); status != websocket.StatusMessageTooBig {
		t.Errorf("read after a 33 MiB message: %v (close status %d), want 1009", err, status)
	}
}

// TestResponsesWebSocketContinuesAnIncompleteResponse: a response cut at max_output_tokens
// (response.incomplete) can be continued by its id, as OpenAI's can (trial h4: only a
// response.completed was remembered, and the next turn got previous_response_not_found).
func TestResponsesWebSocketContinuesAnIncompleteResponse(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-incomplete", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "a long one [[sim words=100]]"})
	evs := readResponse(t, conn)
	last := evs[len(evs)-1]
	if last.Type != "response.incomplete" || last.Response.ID == "" {
		t.Fatalf("first turn: %v: %s", typesOf(evs), last.raw)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "go on", "previous_response_id": last.Response.ID})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type == "error" {
		t.Fatalf("continuing the incomplete response: %s", evs[len(evs)-1].raw)
	}
}

// TestResponsesWebSocketStalledMessageIsCutOff: a response.create message whose client stops
// sending half-way, after its first MiB, holds its share of the body budget only as long as a
// stalled upload's body would (the body read timeout, shortened here): then the socket is
// closed and the share given back. On the code before it held it until the socket's idle time
// (5 minutes) ended the socket.
func TestResponsesWebSocketStalledMessageIsCutOff(t *testing.T) {
	defer httpapi.SetResponsesSocketStall(500 * time.Millisecond)()
	g, m := budgetGateway(t, 64)
	tenant := g.NewTenant(t, "ws-stalled", 0, 1_000_000_000_000)
	inUse := func() float64 { return metricValue(scrapeOpenMetrics(t, m), "tollgate_body_budget_in_use_bytes ") }
	conn, w := openMessage(t, g, tenant.Key)
	if _, err := io.WriteString(w, `{"type":"response.create","model":"service-flint-base","input":"`+strings.Repeat("lorem ipsum ", (1<<20)/12)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the message's first MiB admitted", func() bool { return inUse() > 0 })
	start := time.Now()
	waitUntil(t, "the stalled message's share given back", func() bool { return inUse() == 0 })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the share was given back after %v", d)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if _, _, err := conn.Read(rctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("read on the stalled socket: %v, want it closed", err)
	}
}

// TestResponsesWebSocketPipelinedTurns: a client that keeps one response.create waiting while
// one runs (as the socket allows) and sends its next as soon as the running one's terminal
// event arrives is served every turn: from the client's side the response it was waiting on is
// the one running then. On the code before, a message was counted as running until the
// gateway had settled it after its last event, so that next message, arriving meanwhile,
// found the queue full and the socket was closed with 1008.
func TestResponsesWebSocketPipelinedTurns(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-pipelined", 0, 1_000_000_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	turn := func(i int) map[string]any {
		return map[string]any{"model": "service-flint-base", "max_output_tokens": 64, "input": fmt.Sprintf("turn %d [[sim words=5 tps=100]]", i)}
	}
	const turns = 12
	sendCreate(t, conn, turn(0))
	sendCreate(t, conn, turn(1))
	for i := 0; i < turns; i++ {
		evs := readResponse(t, conn)
		if last := evs[len(evs)-1]; last.Type != "response.completed" {
			t.Fatalf("turn %d ended with %s: %s", i, last.Type, last.raw)
		}
		if i+2 < turns {
			sendCreate(t, conn, turn(i+2))
		}
	}
	waitSettled(t, g, tenant.Account, turns)
}

// TestResponsesWebSocketRefusesInvalidUTF8: a response.create whose input is a string that is
// not valid UTF-8 is refused with a 400 error event naming input, as the POST refuses it
// (issue 23: strict, never served with U+FFFD in place of its bytes), and nothing goes
// upstream; so is a message whose member name is not valid UTF-8. The socket serves on. On the
// code before, the message's string input was decoded, its bad bytes replaced with U+FFFD, and
// the request served and billed.
func TestResponsesWebSocketRefusesInvalidUTF8(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-utf8", 0, 100_000_000)
	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	post := postJSON(t, &http.Client{Timeout: 30 * time.Second}, g.URL+"/v1/responses", tenant.Key,
		"{\"model\":\"service-flint-base\",\"input\":\"caf\xe9\"}")
	if post.status != http.StatusBadRequest || !strings.Contains(string(post.body), `"param":"input"`) {
		t.Fatalf("the POST of the same body: %d %s", post.status, post.body)
	}
	for _, c := range []struct{ name, msg, param string }{
		{"string input", "{\"type\":\"response.create\",\"model\":\"service-flint-base\",\"input\":\"caf\xe9\"}", "input"},
		{"member name", "{\"type\":\"response.create\",\"model\":\"service-flint-base\",\"input\":\"hi\",\"caf\xe9\":1}", ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := conn.Write(ctx, websocket.MessageText, []byte(c.msg)); err != nil {
			t.Fatal(err)
		}
		cancel()
		evs := readResponse(t, conn)
		var ev struct {
			Error struct {
				Param *string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(evs[0].raw, &ev)
		if evs[0].Type != "error" || evs[0].Status != http.StatusBadRequest || !strings.Contains(evs[0].Error.Message, "UTF-8") ||
			(c.param != "") != (ev.Error.Param != nil) || ev.Error.Param != nil && *ev.Error.Param != c.param {
			t.Errorf("%s: %v: %s", c.name, typesOf(evs), evs[len(evs)-1].raw)
		}
	}
	if n := g.Sim.TotalRequests(); n != 0 {
		t.Errorf("the upstream saw %d requests", n)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "max_output_tokens": 16, "input": "café"})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("valid text afterwards: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
}

// TestResponsesWebSocketHandshakeRefusalsAreInTheEnvelope: a handshake with a valid key that
// the WebSocket library refuses (no Sec-WebSocket-Key, a version other than 13, an Origin of
// another host) is answered in the OpenAI error envelope with the library's status, as every
// refusal of /v1/responses is. On the code before, the library's own plain-text answer went
// out ("WebSocket protocol violation: missing Sec-WebSocket-Key").
func TestResponsesWebSocketHandshakeRefusalsAreInTheEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-handshake", 0, 100_000_000)
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
		typ    string
	}{
		{"no key", map[string]string{"Sec-WebSocket-Version": "13"}, http.StatusBadRequest, "invalid_request_error"},
		{"version 8", map[string]string{"Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusBadRequest, "invalid_request_error"},
		{"another origin", map[string]string{"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
			"Origin": "https://elsewhere.example"}, http.StatusForbidden, "permission_error"},
	} {
		req, _ := http.NewRequest("GET", g.URL+"/v1/responses", nil)
		req.Header.Set("Authorization", "Bearer "+tenant.Key)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var env struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if res.StatusCode != c.status || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(b, &env) != nil || env.Error.Type != c.typ || env.Error.Message == "" {
			t.Errorf("%s: %d %s: %s", c.name, res.StatusCode, res.Header.Get("Content-Type"), b)
		}
	}
}

// TestResponsesWebSocketArrivingMessageIsNotIdle: a socket whose client is sending a message,
// steadily but for longer than the idle time, is not closed as idle: the message is served.
// On the code before, the idle timer ran until a message had arrived whole, and the socket was
// closed with 1000 ("idle for too long") while its client was still sending.
func TestResponsesWebSocketArrivingMessageIsNotIdle(t *testing.T) {
	defer httpapi.SetResponsesSocketIdle(300 * time.Millisecond)()
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-arriving", 0, 100_000_000)
	conn, w := openMessage(t, g, tenant.Key)
	if _, err := io.WriteString(w, `{"type":"response.create","model":"service-flint-base","max_output_tokens":16,"input":"`); err != nil {
		t.Fatal(err)
	}
	// Writer buffers: each flush of a chunk is a frame of its own.
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		if _, err := io.WriteString(w, strings.Repeat("slow ", 1000)); err != nil {
			t.Fatalf("sending the message: %v", err)
		}
	}
	if _, err := io.WriteString(w, `"}`); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("the slowly sent message: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
}

// TestResponsesWebSocketShowsTheFittedBound: a response.create without max_output_tokens on an
// account whose credit does not cover the model's whole bound is fitted to the credit; the
// socket has no head per response to carry x-tollgate-fitted-output-bound, so the response
// objects say it as OpenAI gives the bound in effect: response.created's (and the terminal
// event's) response.max_output_tokens is the bound the upstream was sent, the one the usage
// record keeps as fitted_output_tokens, on a Responses upstream and on a chat upstream behind
// service-flint. Before, a translated stream's response objects said null.
func TestResponsesWebSocketShowsTheFittedBound(t *testing.T) {
	for _, c := range []struct {
		name, model string
		credit      int64
		cfg         func(*testing.T) *config.Config
	}{
		{"responses upstream", "test-responses", 5_000, passthroughConfig},
		{"chat upstream behind service-flint", "service-flint", 500_000, chatFlintConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := apitest.Start(t, apitest.Options{Config: c.cfg(t)})
			tenant := g.NewTenant(t, "ws-fitted", 0, c.credit)
			conn, _, err := dialResponses(t, g, tenant.Key)
			if err != nil {
				t.Fatal(err)
			}
			sendCreate(t, conn, map[string]any{"model": c.model, "store": false, "input": []any{userMessage("hi")}})
			evs := readResponse(t, conn)
			if last := evs[len(evs)-1]; last.Type != "response.completed" && last.Type != "response.incomplete" {
				t.Fatalf("ended with %s: %s", last.Type, last.raw)
			}
			sent := sentBound(t, g)
			rec := latestUsage(t, g, tenant.Account, 1)
			if sent == 0 || rec.FittedOutputTokens != int64(sent) {
				t.Fatalf("the upstream was sent %d, the record's fitted_output_tokens is %d: not fitted", sent, rec.FittedOutputTokens)
			}
			for _, ev := range []socketEvent{evs[0], evs[len(evs)-1]} {
				var obj struct {
					Response struct {
						MaxOutputTokens *int `json:"max_output_tokens"`
					} `json:"response"`
				}
				if err := json.Unmarshal(ev.raw, &obj); err != nil || obj.Response.MaxOutputTokens == nil || *obj.Response.MaxOutputTokens != sent {
					t.Errorf("%s: response.max_output_tokens %v, want the fitted %d: %.400s", ev.Type, obj.Response.MaxOutputTokens, sent, ev.raw)
				}
			}
		})
	}
}
