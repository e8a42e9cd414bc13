package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/metrics"
)

// TestAPIHandover: before the hand-over the API listener's handler answers every request 503
// with Retry-After, quoting what the process waits for: the API's routes in their envelope, the
// web console's pages (when it is served) in plain text, and counts them; after it, requests go
// to the gateway's handler, on the connection that got the 503 too (nothing is dropped).
func TestAPIHandover(t *testing.T) {
	ready := health.New(slog.New(slog.DiscardHandler))
	startup := ready.Condition("startup", health.Down, "starting")
	startup.Set(health.Down, "waiting for the database")
	h := newAPIHandover(startup, metrics.New(), true)
	srv := httptest.NewServer(h)
	defer srv.Close()

	var reused []bool
	get := func(path string) (*http.Response, string) {
		t.Helper()
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
		})
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}

	res, body := get("/v1/models")
	var env struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "2" || json.Unmarshal([]byte(body), &env) != nil ||
		env.Error.Code != "dependency_unavailable" || !strings.Contains(env.Error.Message, "waiting for the database") {
		t.Errorf("an API route before the hand-over: %d %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	res, body = get("/keys")
	if res.StatusCode != 503 || res.Header.Get("Retry-After") != "2" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") ||
		res.Header.Get("Cache-Control") != "no-store" || !strings.Contains(body, "the gateway is starting (waiting for the database). Try again") {
		t.Errorf("a web console page before the hand-over: %d %v %s", res.StatusCode, res.Header, body)
	}

	if n := h.handOver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "gateway "+r.URL.Path)
	})); n != 2 {
		t.Errorf("handOver counted %d requests answered 503, want 2", n)
	}
	for _, path := range []string{"/v1/models", "/keys"} {
		if res, body := get(path); res.StatusCode != 200 || body != "gateway "+path {
			t.Errorf("%s after the hand-over: %d %s", path, res.StatusCode, body)
		}
	}
	if len(reused) != 4 || reused[0] || !reused[1] || !reused[2] || !reused[3] {
		t.Errorf("connections reused %v: want one connection throughout", reused)
	}
}

// TestAPIHandoverWithoutConsole: when the web console is not served, its paths are the API's
// (as the gateway routes them): the 503 comes in the API's envelope.
func TestAPIHandoverWithoutConsole(t *testing.T) {
	ready := health.New(slog.New(slog.DiscardHandler))
	h := newAPIHandover(ready.Condition("startup", health.Down, "starting"), nil, false)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/keys", nil))
	if rec.Code != 503 || rec.Header().Get("Content-Type") != "application/json" ||
		!strings.Contains(rec.Body.String(), `"message":"the gateway is starting and cannot serve requests yet; retry in 2 seconds"`) {
		t.Errorf("%d %v %s", rec.Code, rec.Header(), rec.Body.String())
	}
}
