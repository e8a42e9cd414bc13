package browser_test

import (
	"net/http"
	"strings"
	"testing"
)

// navigation is every entry of the application's navigation, by its link's accessible name,
// with the address it leads to.
var navigation = []struct{ name, path string }{
	{"Keys", "/keys"},
	{"Usage", "/usage"},
	{"Plan & limits", "/plan"},
	{"Approvals", "/approvals"},
	{"Agents", "/agents"},
	{"Datasets", "/datasets"},
	{"Audit log", "/audit"},
	{"Sessions", "/sessions"},
}

// TestEveryPage follows every link of the navigation, after a request has made some usage to
// show: each page answers 200 under its own heading, is built (not the "coming soon"
// placeholder), and loads its scripts and styles within its Content-Security-Policy (a
// violation fails the test when the page closes). A screenshot of each is written.
func TestEveryPage(t *testing.T) {
	s := start(t)
	key, _ := s.GW.NewKey(t, s.Account.ID, 0)
	if status, body := s.api(t, http.MethodPost, "/v1/chat/completions", key,
		`{"model":"service-flint-base","max_tokens":64,"messages":[{"role":"user","content":"Hello. [[sim words=20]]"}]}`); status != http.StatusOK {
		t.Fatalf("a request to make usage: %d %s", status, body)
	}
	p := newTour(t)
	s.signIn(p)
	for _, n := range navigation {
		p.at(p.Follow(n.name), http.StatusOK, s.URL+n.path)
		p.shot(strings.TrimPrefix(n.path, "/"))
		if got := p.Text("main h1"); got != n.name {
			t.Errorf("%s: the heading is %q, want %q", n.path, got, n.name)
		}
		if strings.Contains(strings.ToLower(p.Text("main")), "coming soon") {
			t.Errorf("%s is still the \"coming soon\" placeholder", n.path)
		}
	}
}
