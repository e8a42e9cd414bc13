package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestUnknownPathsForBrowsersAndClients: a person's browser (Accept naming text/html) that asks
// for a path nobody serves gets the console's "not found" page, in its layout, with a link
// home, whether signed in or not; API clients keep the JSON envelope exactly as before: one
// that does not accept HTML, one with an Authorization header, a POST, every path under /v1/
// and /api/, and a known path asked with a method it is not served for (405). Before, the
// browser got the API's JSON 404.
func TestUnknownPathsForBrowsersAndClients(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "member")
	const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	b := e.browser(t)
	ask := func(method, path string, hdr map[string]string) page {
		t.Helper()
		return b.do(method, path, nil, hdr)
	}
	isPage := func(p page) bool {
		return p.Status == http.StatusNotFound && strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") &&
			strings.Contains(p.Body, "There is no such page.") && strings.Contains(p.Body, `<a href="/">Home</a>`) &&
			strings.Contains(p.Body, `href="/static/`) && p.Header.Get("Content-Security-Policy") != ""
	}
	// envelope is the JSON 404 the API answers a path nobody serves.
	envelope := func(p page, method, path string) bool {
		t.Helper()
		var body struct {
			Error struct {
				Message, Type string
				Code          *string
			}
		}
		if p.Status != http.StatusNotFound || !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal([]byte(p.Body), &body) != nil {
			return false
		}
		return strings.HasPrefix(body.Error.Message, "Invalid URL ("+method+" "+path+")") && body.Error.Type == "invalid_request_error" &&
			body.Error.Code != nil && *body.Error.Code == "not_found"
	}

	html := map[string]string{"Accept": browserAccept}
	if p := ask(http.MethodGet, "/no/such/page", html); !isPage(p) {
		t.Errorf("a browser at /no/such/page: %d %s %.600s", p.Status, p.Header.Get("Content-Type"), p.Body)
	}
	if p := ask(http.MethodHead, "/settings", html); p.Status != http.StatusNotFound || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
		t.Errorf("a browser's HEAD of /settings: %d %s", p.Status, p.Header.Get("Content-Type"))
	}
	b.signIn(e, aliceEmail, alicePass)
	if p := ask(http.MethodGet, "/billing", html); !isPage(p) || !strings.Contains(p.Body, aliceEmail) {
		t.Errorf("a signed-in browser at /billing (the page shows who is signed in): %d %.1500s", p.Status, p.Body)
	}

	// API clients: the envelope, byte for byte what a client that accepts JSON gets.
	plain := ask(http.MethodGet, "/no/such/page", map[string]string{"Accept": "application/json"})
	if !envelope(plain, http.MethodGet, "/no/such/page") {
		t.Fatalf("a client accepting JSON at /no/such/page: %d %s %.600s", plain.Status, plain.Header.Get("Content-Type"), plain.Body)
	}
	for _, c := range []struct {
		name, method, path string
		hdr                map[string]string
	}{
		{"no Accept", http.MethodGet, "/no/such/page", nil},
		{"Accept */*", http.MethodGet, "/no/such/page", map[string]string{"Accept": "*/*"}},
		{"text/html refused", http.MethodGet, "/no/such/page", map[string]string{"Accept": "text/html;q=0, application/json"}},
		{"an API key", http.MethodGet, "/no/such/page", map[string]string{"Accept": browserAccept, "Authorization": "Bearer tgk_x"}},
		{"a POST", http.MethodPost, "/no/such/page", html},
		{"under /v1/", http.MethodGet, "/v1/no/such/page", html},
		{"under /api/", http.MethodGet, "/api/no/such/page", html},
		{"/v1 itself", http.MethodGet, "/v1", html},
	} {
		p := ask(c.method, c.path, c.hdr)
		if !envelope(p, c.method, c.path) {
			t.Errorf("%s: %s %s: %d %s %.600s", c.name, c.method, c.path, p.Status, p.Header.Get("Content-Type"), p.Body)
		}
		if c.path == "/no/such/page" && c.method == http.MethodGet && p.Body != plain.Body {
			t.Errorf("%s: the envelope differs from a JSON client's:\n%s\n%s", c.name, p.Body, plain.Body)
		}
	}
	// A known path asked with a method it is not served for stays the API's 405.
	if p := ask(http.MethodGet, "/v1/chat/completions", html); p.Status != http.StatusMethodNotAllowed ||
		!strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") {
		t.Errorf("a browser's GET of /v1/chat/completions: %d %s %.300s", p.Status, p.Header.Get("Content-Type"), p.Body)
	}
}
