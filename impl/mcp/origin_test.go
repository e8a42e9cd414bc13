package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestOriginIsValidated: the endpoint validates Origin, as the MCP transport requires against
// DNS rebinding (2025-11-25: 403 for an invalid one). No Origin (command-line and desktop
// clients), the gateway's own origin and a listed one are served; another site's, "null" and
// an unlisted port of the same host are refused 403 with a JSON-RPC error. On the code before,
// every Origin was served.
func TestOriginIsValidated(t *testing.T) {
	endpoint := newTestServer(t, newFakeDatasets(), Options{AllowedOrigins: []string{"https://Inspector.example.com/"}})
	own, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		origin string
		host   string // the Host header, when not the endpoint's
		want   int
	}{
		{"", "", http.StatusOK},
		{"http://" + own.Host, "", http.StatusOK},
		{"http://localhost:" + own.Port(), "localhost:" + own.Port(), http.StatusOK},
		{"https://inspector.example.com", "", http.StatusOK},
		{"http://evil.example", "", http.StatusForbidden},
		{"null", "", http.StatusForbidden},
		{"http://" + own.Hostname() + ":1", "", http.StatusForbidden},
		{"https://inspector.example.com.evil.example", "", http.StatusForbidden},
		// DNS rebinding: the attacker's name resolves to the gateway, and the browser sends it
		// as both Host and Origin (trial h9 D8: served, as the two were equal).
		{"http://evil.example:" + own.Port(), "evil.example:" + own.Port(), http.StatusForbidden},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint,
			strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"ping"}`))
		if err != nil {
			t.Fatal(err)
		}
		if c.host != "" {
			req.Host = c.host
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer x")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Origin %q: %d %s, want %d", c.origin, resp.StatusCode, body, c.want)
			continue
		}
		if c.want == http.StatusForbidden {
			var msg rpcBody
			// The refused request's id, as a JSON-RPC response carries it (h4: it was null).
			if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" || string(msg.ID) != "7" || msg.Error == nil ||
				msg.Error.Code != codeInvalidRequest || !strings.Contains(msg.Error.Message, "mcp_allowed_origins") {
				t.Errorf("Origin %q: the refusal is not a JSON-RPC error naming the setting: %s", c.origin, body)
			}
		}
	}
}
