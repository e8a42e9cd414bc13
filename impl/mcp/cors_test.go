package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCORSForBrowserClients: a browser client of a listed origin gets its preflight answered
// 204 before authentication (which a preflight never carries), with the methods and headers
// the transport uses, and on the actual responses (a 401's included) the origin allowed and
// the session id and challenge exposed; another origin's preflight is 403 and its responses
// carry no CORS header; a request without Origin is untouched (trial h9 D11: the preflight was
// a 401 with no CORS header, so that no browser client could call the endpoint).
func TestCORSForBrowserClients(t *testing.T) {
	const listed = "https://inspector.example.com"
	mcpHandler := NewHandler(Options{AllowedOrigins: []string{listed}})
	authCalls := 0
	behindAuth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authCalls++
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	h := WithCORS(mcpHandler, behindAuth)
	do := func(method, origin string, preflight bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/api/mcp", strings.NewReader(`{}`))
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if preflight {
			r.Header.Set("Access-Control-Request-Method", "POST")
			r.Header.Set("Access-Control-Request-Headers", "authorization,content-type,mcp-protocol-version")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	pre := do(http.MethodOptions, listed, true)
	if pre.Code != http.StatusNoContent || pre.Header().Get("Access-Control-Allow-Origin") != listed ||
		!strings.Contains(pre.Header().Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(pre.Header().Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(pre.Header().Get("Access-Control-Allow-Headers"), "MCP-Protocol-Version") || authCalls != 0 {
		t.Errorf("preflight of a listed origin: %d %v (authentication called %d times)", pre.Code, pre.Header(), authCalls)
	}
	post := do(http.MethodPost, listed, false)
	if post.Code != http.StatusUnauthorized || post.Header().Get("Access-Control-Allow-Origin") != listed ||
		!strings.Contains(post.Header().Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") ||
		!strings.Contains(post.Header().Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("a listed origin's POST: %d %v", post.Code, post.Header())
	}
	if other := do(http.MethodOptions, "https://evil.example", true); other.Code != http.StatusForbidden || other.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", other.Code, other.Header())
	}
	if other := do(http.MethodPost, "https://evil.example", false); other.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's POST: %v", other.Header())
	}
	if plain := do(http.MethodPost, "", false); plain.Header().Get("Access-Control-Allow-Origin") != "" || plain.Header().Get("Vary") != "" {
		t.Errorf("a request without Origin: %v", plain.Header())
	}
}
