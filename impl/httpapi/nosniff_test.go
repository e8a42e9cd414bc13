package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestErrorAnswersSayNosniff: every JSON error answer of the API says X-Content-Type-Options:
// nosniff, since its message may echo what the request sent (the 404 of an unknown path names
// the path, markup included), and a browser sent to a crafted address must not read it as a
// page: the 404 in the chat-completions and the Messages envelopes, the 401 of a request
// without a key (an API route, and /api/mcp's JSON-RPC error), and the answers to a refused
// head, on the lean path (both Content-Length and Transfer-Encoding) and on the path handed to
// net/http (a bare CR in a header value, another HTTP version, a head beyond the limit).
// None of them said it before.
func TestErrorAnswersSayNosniff(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	// The unknown paths are no operation of the OpenAPI document for g.Client to check.
	validating, plain := g.Client(t), &http.Client{Timeout: 30 * time.Second}
	const script = "/v1/%3Cscript%3Ealert(1)%3C/script%3E"
	requests := []struct {
		name, method, path, key string
		status                  int
		client                  *http.Client
	}{
		{"404, chat-completions envelope", http.MethodGet, script, tenant.Key, http.StatusNotFound, plain},
		{"404, Messages envelope", http.MethodPost, "/anthropic/v1/messages", tenant.Key, http.StatusNotFound, plain},
		{"401, an API route", http.MethodPost, "/v1/chat/completions", "", http.StatusUnauthorized, validating},
		{"401, /api/mcp", http.MethodPost, "/api/mcp", "", http.StatusUnauthorized, validating},
	}
	for _, tc := range requests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, g.URL+tc.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.key != "" {
				req.Header.Set("Authorization", "Bearer "+tc.key)
			}
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q %s, want %d in JSON", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q on %s, want nosniff", got, body)
			}
		})
	}
	heads := []struct {
		name, send string
		status     int
	}{
		{"lean path, both lengths", "POST " + script + " HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", http.StatusBadRequest},
		{"handed off, a bare CR", "POST " + script + " HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + tenant.Key + "\r\r\nContent-Length: 2\r\n\r\n{}", http.StatusBadRequest},
		{"handed off, another version", "POST /v1/messages HTTP/3.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", http.StatusHTTPVersionNotSupported},
		{"handed off, a head too large", "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Filler: " + strings.Repeat("f", 1<<20+16<<10) + "\r\nContent-Length: 2\r\n\r\n{}", http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tc := range heads {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := sendRaw(t, g.URL, tc.send)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q %s, want %d in JSON", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
			}
			if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q on %s, want nosniff", got, body)
			}
		})
	}
}
