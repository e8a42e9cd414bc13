package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
)

// startRoute is one request of every kind the API serves, as TestServeAnswersWhileWaitingForDatabase
// sends it before and after the database is reachable.
type startRoute struct {
	name, method, path, body string
	family                   string // "openai", "anthropic" or "jsonrpc": the envelope of its errors
	billed                   bool   // a 200 has a usage record
	after                    int    // its status once the gateway serves (0: not sent then)
}

// startRoutes are the requests of the test: every route of the API, streamed and not.
var startRoutes = []startRoute{
	{"chat", "POST", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"hi [[sim words=5]]"}]}`, "openai", true, 200},
	{"chat stream", "POST", "/v1/chat/completions", `{"model":"service-flint-base","stream":true,"messages":[{"role":"user","content":"hi [[sim words=5]]"}]}`, "openai", true, 200},
	{"responses", "POST", "/v1/responses", `{"model":"service-flint-base","input":"hi [[sim words=5]]"}`, "openai", true, 200},
	{"messages", "POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":64,"messages":[{"role":"user","content":"hi [[sim words=5]]"}]}`, "anthropic", true, 200},
	{"count tokens", "POST", "/v1/messages/count_tokens", `{"model":"service-sonnet","messages":[{"role":"user","content":"hi"}]}`, "anthropic", false, 200},
	{"models", "GET", "/v1/models", "", "openai", false, 200},
	{"model", "GET", "/v1/models/service-flint", "", "openai", false, 200},
	{"credits", "GET", "/v1/credits", "", "openai", false, 200},
	{"agents", "GET", "/v1/agents", "", "openai", false, 200},
	{"agent events", "GET", "/v1/agents/main/events", "", "openai", false, 0},
	{"mcp", "POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "jsonrpc", false, 200},
}

// startAnswer is what the client of a startRoute got.
type startAnswer struct {
	status    int
	header    http.Header
	body      []byte
	requestID string
	took      time.Duration
}

// sendStartRoute sends r on p with key through c, failing the test on a transport error (a
// client timeout among them).
func sendStartRoute(t *testing.T, c *http.Client, p *serveProc, key string, r startRoute) startAnswer {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, p.base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.family == "jsonrpc" {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v (after %s)\n%s", r.name, err, time.Since(start).Round(time.Millisecond), tail(p.logs()))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", r.name, err)
	}
	return startAnswer{status: res.StatusCode, header: res.Header, body: b, requestID: res.Header.Get("x-request-id"), took: time.Since(start)}
}

// checkStartingAnswer checks that a is the 503 of a process waiting for its database, in the
// envelope of r's route, with Retry-After.
func checkStartingAnswer(t *testing.T, r startRoute, a startAnswer) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable {
		t.Errorf("%s while the database is unreachable: %d %s, want 503", r.name, a.status, a.body)
		return
	}
	if a.header.Get("Retry-After") != "2" || a.header.Get("retry-after-ms") != "2000" {
		t.Errorf("%s: Retry-After %q, retry-after-ms %q; want 2 and 2000", r.name, a.header.Get("Retry-After"), a.header.Get("retry-after-ms"))
	}
	if !strings.HasPrefix(a.requestID, "req_") {
		t.Errorf("%s: x-request-id %q", r.name, a.requestID)
	}
	const said = "waiting for the database"
	switch r.family {
	case "openai":
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || env.Error.Type != "service_unavailable_error" ||
			env.Error.Code == nil || *env.Error.Code != "dependency_unavailable" || !strings.Contains(env.Error.Message, said) {
			t.Errorf("%s: not the chat-completions 503 envelope: %s", r.name, a.body)
		}
	case "anthropic":
		var env struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || env.Type != "error" || env.Error.Type != "api_error" ||
			!strings.Contains(env.Error.Message, said) || env.RequestID != a.requestID || a.header.Get("request-id") != a.requestID {
			t.Errorf("%s: not the Messages 503 envelope: %s (request-id %q)", r.name, a.body, a.header.Get("request-id"))
		}
	case "jsonrpc":
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || env.JSONRPC != "2.0" || string(env.ID) != "null" ||
			env.Error.Code != -32003 || !strings.Contains(env.Error.Message, said) {
			t.Errorf("%s: not the JSON-RPC 503 error: %s", r.name, a.body)
		}
	}
}

// TestServeAnswersWhileWaitingForDatabase (issue 23 item 3): a process started while its
// database is down answers every route at once, 503 with Retry-After in the route's own
// envelope (each answer checked against the OpenAPI document), instead of leaving its clients
// to time out; once the database is back the same requests succeed; and nothing sent before
// (a client that sent its request and left at once among them) is run and billed afterwards.
//
// On the code before the hand-over, the API address was bound but not served until the
// database was reached: the first request below times out after 5 s, and the request of the
// client that left waited in the listener's backlog, to be run once the gateway served.
func TestServeAnswersWhileWaitingForDatabase(t *testing.T) {
	testBinary(t)
	pg := pgtest.NewOutage(t)
	db := pg.ConnString()
	key := setupAccount(t, db)
	mustAdmin(t, "slot assign acme main")
	pg.Stop()

	p := startServe(t, serveEnv(t, db))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.logs(), `"msg":"database not reachable; retrying"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no attempt to reach the database logged:\n%s", p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every answer is checked against the OpenAPI document; a client that waits gives up after 5 s.
	c := &http.Client{Transport: apitest.NewValidatingTransport(t, http.DefaultTransport), Timeout: 5 * time.Second}
	var refusedIDs []string
	for round := range 2 { // twice: the second time on connections kept alive
		for _, r := range startRoutes {
			a := sendStartRoute(t, c, p, key, r)
			checkStartingAnswer(t, r, a)
			if a.took > 2*time.Second {
				t.Errorf("%s (round %d): answered after %s, not at once", r.name, round, a.took)
			}
			refusedIDs = append(refusedIDs, a.requestID)
		}
	}
	// A client that sends its request and leaves at once, without reading the answer.
	conn, err := net.Dial("tcp", p.api)
	if err != nil {
		t.Fatal(err)
	}
	chat := startRoutes[0].body
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: "+p.api+"\r\nAuthorization: Bearer "+key+
		"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(chat))+"\r\n\r\n"+chat); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if code, body := p.readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting for the database") {
		t.Errorf("/readyz while the database is down: %d %s", code, body)
	}

	pg.Start()
	p.waitReadyz(t, http.StatusOK, 60*time.Second)
	billed := map[string]string{} // request id -> route name, of the 200s that are billed
	for _, r := range startRoutes {
		if r.after == 0 {
			continue
		}
		a := sendStartRoute(t, c, p, key, r)
		if a.status != r.after {
			t.Errorf("%s once the database is back: %d %s, want %d", r.name, a.status, a.body, r.after)
			continue
		}
		if r.billed {
			billed[a.requestID] = r.name
		}
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), `"msg":"requests answered 503 while starting"`) {
		t.Errorf("the hand-over does not log the requests answered while starting:\n%s", p.logs())
	}

	// The books: exactly the 200s are billed, nothing sent while the database was unreachable.
	b := readBooks(t, db)
	for id, name := range billed {
		if _, ok := b.status[id]; !ok {
			t.Errorf("%s (%s): no usage record", name, id)
		}
	}
	for id := range b.status {
		if _, ok := billed[id]; !ok {
			t.Errorf("usage record %s is not of a request answered 200 once the database was back: a request sent before ran afterwards", id)
		}
	}
	for _, id := range refusedIDs {
		if _, ok := b.status[id]; ok {
			t.Errorf("request %s, answered 503 while starting, has a usage record", id)
		}
	}
	if b.balance != b.ledgerSum || b.holds != 0 {
		t.Errorf("balance %d, ledger sum %d, holds left %d", b.balance, b.ledgerSum, b.holds)
	}
}

// TestServeStopsWhileWaitingForDatabase: a process waiting for its database answers at once
// (here without a key: nothing is checked before the 503), and SIGTERM then stops its API
// server and the process promptly and cleanly.
func TestServeStopsWhileWaitingForDatabase(t *testing.T) {
	db := "host=" + unusedDir(t, "tgs-") + " port=5433 user=postgres dbname=tollgate"
	p := startServe(t, serveEnv(t, db))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.logs(), `"msg":"database not reachable; retrying"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no attempt to reach the database logged:\n%s", p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/v1/models", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no answer while waiting for the database: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/v1/models while waiting: %d", res.StatusCode)
	}
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(t, 10*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs())
	}
	if !strings.Contains(p.logs(), "shutting down before the database was reached") {
		t.Errorf("logs:\n%s", p.logs())
	}
}
