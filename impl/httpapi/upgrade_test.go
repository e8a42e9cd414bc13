package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// rawExchange writes raw requests on one TCP connection to the gateway, as a WebSocket client
// does its handshake, and reads one response after each.
type rawExchange struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func dialRaw(t *testing.T, g *apitest.Gateway) *rawExchange {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawExchange{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// roundTrip sends head (request line and header fields, CRLF-separated, without the blank
// line) and returns the response with its body read.
func (x *rawExchange) roundTrip(method, head string) (*http.Response, []byte) {
	x.t.Helper()
	_ = x.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(x.conn, head+"\r\n\r\n"); err != nil {
		x.t.Fatal(err)
	}
	res, err := http.ReadResponse(x.r, &http.Request{Method: method})
	if err != nil {
		x.t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		x.t.Fatalf("read body: %v", err)
	}
	return res, body
}

// wsHandshake is the opening handshake of RFC 6455 section 4.1 with the headers Codex CLI
// sends on its Responses WebSocket (a bearer key and the responses_websockets beta).
func wsHandshake(path, authorization string) string {
	lines := []string{
		"GET " + path + " HTTP/1.1",
		"Host: 127.0.0.1",
		"Connection: Upgrade",
		"Upgrade: websocket",
		"Sec-WebSocket-Version: 13",
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
		"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits",
		"OpenAI-Beta: responses_websockets=2026-02-06",
	}
	if authorization != "" {
		lines = append(lines, "Authorization: "+authorization)
	}
	return strings.Join(lines, "\r\n")
}

// TestResponsesWebSocketHandshake: the WebSocket handshake on /v1/responses is authenticated as
// the POST is: without a key or with an unknown one it is refused 401 in the OpenAI envelope,
// naming nothing of any account, and the connection is closed, as after every 401 (trial h5:
// connections without a key held open took every file descriptor; a client falling back to
// POST opens another); with a valid key it switches protocols (101). The code before the
// WebSocket mode answered every handshake 426.
func TestResponsesWebSocketHandshake(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "ws-probe", 0, 1_000_000)
	for _, c := range []struct{ name, authorization string }{
		{"no key", ""},
		{"unknown key", "Bearer tgk_notakeynotakeynotakeynotakeynotakeynotakeynotake"},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := dialRaw(t, g)
			res, body := x.roundTrip("GET", wsHandshake("/v1/responses", c.authorization))
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", res.StatusCode, body)
			}
			for _, h := range []string{"Upgrade", "Sec-WebSocket-Accept"} {
				if v := res.Header.Get(h); v != "" {
					t.Errorf("header %s: %q, want none", h, v)
				}
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if res.Header.Get("X-Request-Id") == "" {
				t.Error("no x-request-id")
			}
			var env struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, body)
			}
			if env.Error.Type != "authentication_error" || env.Error.Code == nil || *env.Error.Code != "invalid_api_key" {
				t.Errorf("envelope: %s", body)
			}
			if strings.Contains(string(body), "ws-probe") || strings.Contains(string(body), tenant.Account.ID.String()) {
				t.Errorf("the refusal names the account: %s", body)
			}

			// The connection closes after the 401: a client falling back to POST opens another.
			if !res.Close {
				t.Error("the connection stays open after the 401")
			}
		})
	}
	t.Run("valid key", func(t *testing.T) {
		res, body := dialRaw(t, g).roundTrip("GET", wsHandshake("/v1/responses", "Bearer "+tenant.Key))
		if res.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(res.Header.Get("Upgrade"), "websocket") ||
			res.Header.Get("Sec-WebSocket-Accept") == "" {
			t.Fatalf("status %d, headers %v: %s; want 101 with the WebSocket accept", res.StatusCode, res.Header, body)
		}
	})
}

// TestOnlyTheResponsesUpgradeIsServed: a plain GET on /v1/responses is still a 405, and an
// upgrade request elsewhere is answered as that path answers a GET.
func TestOnlyTheResponsesUpgradeIsServed(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	for _, c := range []struct {
		name, head string
		status     int
		allow      string
	}{
		{"plain GET", "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1", http.StatusMethodNotAllowed, "POST"},
		{"Upgrade without Connection: Upgrade", "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket",
			http.StatusMethodNotAllowed, "POST"},
		{"upgrade to another protocol", "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: h2c",
			http.StatusMethodNotAllowed, "POST"},
		{"WebSocket on chat completions", wsHandshake("/v1/chat/completions", ""), http.StatusMethodNotAllowed, "POST"},
		{"WebSocket on an unknown path", wsHandshake("/v1/responses/ws", ""), http.StatusNotFound, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := dialRaw(t, g).roundTrip("GET", c.head)
			if res.StatusCode != c.status || res.Header.Get("Allow") != c.allow {
				t.Errorf("status %d, Allow %q: %s; want %d, Allow %q", res.StatusCode, res.Header.Get("Allow"), body, c.status, c.allow)
			}
		})
	}
}
