package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web"
)

// TestFavicon: every page links the embedded icon, and /favicon.ico (which browsers ask for
// where a response names no icon) is the application's, the same SVG, not the API's 404.
func TestFavicon(t *testing.T) {
	if !web.Owns("/favicon.ico") {
		t.Fatal("/favicon.ico is left to the API")
	}
	e := start(t, nil)
	b := e.browser(t)
	home := b.get("/")
	if home.Status != http.StatusOK || !strings.Contains(home.Body, `<link rel="icon" href="/static/favicon.svg"`) {
		t.Fatalf("the signed-out home page does not link the icon: %d %.300s", home.Status, home.Body)
	}
	for _, path := range []string{"/static/favicon.svg", "/favicon.ico"} {
		p := b.get(path)
		if p.Status != http.StatusOK || p.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(p.Body, "<svg") {
			t.Errorf("GET %s: %d %q %.80s", path, p.Status, p.Header.Get("Content-Type"), p.Body)
		}
	}
}
