package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web"
)

// TestRedirectToPublicURL shows that with Options.RedirectToPublicURL (tollgate dev) a GET of
// "/" or /signin… at another host than web.public_url's is sent there (303, path and query
// kept), that the public host itself and other paths and methods are served as before, and
// that without the option (serve, as the gateway builds it) nothing is redirected.
func TestRedirectToPublicURL(t *testing.T) {
	e := start(t, nil)
	pub, _ := url.Parse(e.URL)
	other := "127.0.0.1:" + pub.Port()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	on, err := web.New(web.Options{Store: e.Store, Config: e.Config, Logger: log, RedirectToPublicURL: true})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler, method, host, target string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://"+host+target, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, target := range []string{"/", "/signin", "/signin?next=%2Fkeys", "/signin/account"} {
		rec := serve(on, http.MethodGet, other, target)
		if want := e.URL + target; rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Errorf("on, GET %s at %s: %d %q, want 303 %q", target, other, rec.Code, rec.Header().Get("Location"), want)
		}
	}
	if rec := serve(on, http.MethodGet, pub.Host, "/signin"); rec.Code != http.StatusFound {
		t.Errorf("on, GET /signin at the public host: %d, want 302 to the provider", rec.Code)
	}
	for _, c := range []struct{ method, target string }{{http.MethodGet, "/keys"}, {http.MethodGet, "/static/style.css"},
		{http.MethodPost, "/signin/signup"}} {
		if rec := serve(on, c.method, other, c.target); strings.HasPrefix(rec.Header().Get("Location"), e.URL) {
			t.Errorf("on, %s %s at %s was redirected to %q", c.method, c.target, other, rec.Header().Get("Location"))
		}
	}

	// Without the option (the gateway as serve builds it), the other host is served as it is.
	b := e.browser(t)
	b.app = "http://" + other
	if p := b.get("/signin"); p.Status != http.StatusFound || p.Location == e.URL+"/signin" {
		t.Errorf("off, GET /signin at %s: %d %q, want 302 to the provider", other, p.Status, p.Location)
	}
	if p := b.get("/"); strings.HasPrefix(p.Location, e.URL) {
		t.Errorf("off, GET / at %s: redirected to %q", other, p.Location)
	}
}
