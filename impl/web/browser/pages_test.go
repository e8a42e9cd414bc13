package browser_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/store"
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
	{"Connected apps", "/oauth/grants"},
	{"Audit log", "/audit"},
	{"Sessions", "/sessions"},
}

// TestEveryPage follows every link of the navigation, after a request has made some usage to
// show (and three requests billed with prompt caching were recorded): each page answers 200
// under its own heading, is built (not the "coming soon" placeholder), and loads its scripts
// and styles within its Content-Security-Policy (a violation fails the test when the page
// closes). A screenshot of each is written; the Usage page's is taken with the newest
// request's cost opened into how it was made (docs/screenshots/usage.png). The home page is
// shot again once the account has an agent slot (docs/screenshots/home.png). The list above
// must name every link of the page's navigation (before, it left out Connected apps, which
// was never visited); an MCP client is connected first (allowed on the consent page, its code
// exchanged), so that Connected apps lists it.
func TestEveryPage(t *testing.T) {
	s, p := signedInWithUsage(t)
	operator, err := agent.New(agent.Options{Store: s.GW.Store, Config: s.GW.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := operator.AssignSlot(context.Background(), s.Account.ID, "main"); err != nil {
		t.Fatal(err)
	}
	s.connectApp(p, s.registerOAuthClient(t, "Example Agent"))
	p.at(p.Navigate(s.URL+"/"), http.StatusOK, s.URL+"/")
	p.WaitVisible("#home-start-agent")
	p.shot("home-with-a-slot")
	listed := map[string]bool{}
	for _, n := range navigation {
		listed[n.path] = true
	}
	for _, path := range eval[[]string](p, `[...document.querySelectorAll('nav[aria-label="Main"] a')].map((a) => new URL(a.href).pathname)`) {
		if !listed[path] {
			t.Errorf("the navigation links %s, which the test's list (navigation) leaves out", path)
		}
	}
	for _, n := range navigation {
		p.at(p.Follow(n.name), http.StatusOK, s.URL+n.path)
		if n.path == "/oauth/grants" {
			if got := p.Text("main tbody"); !strings.Contains(got, "Example Agent") || !strings.Contains(got, alice.Email) {
				t.Errorf("Connected apps does not list the client allowed: %q", got)
			}
		}
		if n.path == "/usage" {
			p.Do(chromedp.Click(chromedp.CSS("#usage-requests details.bill > summary")))
			p.WaitVisible("#usage-requests details.bill[open] .bill-body")
			// A fresh account's few requests are no burn rate to project from, and its days
			// without spend are one row of the table, not a row of $0.00 each.
			if got := p.Text("#usage-projection"); !strings.HasPrefix(got, "not enough history yet") {
				t.Errorf("the Usage page's projection for a fresh account: %q", got)
			}
			if got := p.Text("#usage-per-day tr.no-spend"); !strings.Contains(got, "No spend in these") {
				t.Errorf("the Usage page's days without spend: %q", got)
			}
		}
		p.shot(strings.ReplaceAll(strings.TrimPrefix(n.path, "/"), "/", "-"))
		if got := p.Text("main h1"); got != n.name {
			t.Errorf("%s: the heading is %q, want %q", n.path, got, n.name)
		}
		if strings.Contains(strings.ToLower(p.Text("main")), "coming soon") {
			t.Errorf("%s is still the \"coming soon\" placeholder", n.path)
		}
	}
}

// signedInWithUsage starts the site with usage to show (a request, and the three of
// cachedUsage) and signs alice in on a new page.
func signedInWithUsage(t *testing.T) (*site, *tour) {
	t.Helper()
	s := start(t)
	key, keyID := s.GW.NewKey(t, s.Account.ID, 0)
	if status, body := s.api(t, http.MethodPost, "/v1/chat/completions", key,
		`{"model":"service-flint-base","max_tokens":64,"messages":[{"role":"user","content":"Hello. [[sim words=20]]"}]}`); status != http.StatusOK {
		t.Fatalf("a request to make usage: %d %s", status, body)
	}
	s.cachedUsage(t, keyID)
	p := newTour(t)
	s.signIn(p)
	return s, p
}

// cachedUsage records three requests of a conversation with a cached prompt, billed at Claude
// Sonnet 4.5's published price (Anthropic's pricing page, through the built-in catalog), as the
// billing meter records them: the first writes 20,000 tokens to the cache for an hour, the
// next two read them back (the newest with 120 reasoning tokens in its output). They are the
// newest requests of the log.
func (s *site) cachedUsage(t *testing.T, keyID uuid.UUID) {
	t.Helper()
	sonnet, err := pricecatalog.Builtin().Price("claude-sonnet-4-5", "2025-10-01")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	turn := func(id string, at time.Duration, tok price.Tokens) store.UsageRecord {
		c := price.Cost(tok, sonnet)
		return store.UsageRecord{AccountID: s.Account.ID, RequestID: id, APIKeyID: keyID, Model: "service-sonnet",
			Route: "/v1/messages", Provider: "anthropic", UpstreamModel: "claude-sonnet-4-5", Status: "ok",
			StartedAt: now.Add(at), FinishedAt: now.Add(at + 2300*time.Millisecond), ServiceTier: "standard",
			InputTokens: tok.Input(), OutputTokens: tok.Output, CacheReadTokens: tok.CacheRead,
			CacheWrite1hTokens: tok.CacheWrite1h, ReasoningTokens: tok.Reasoning, Price: &sonnet, Costs: c,
			CacheSavingsMicros: price.CacheSavings(tok, sonnet, c), CostMicros: c.Total()}
	}
	if _, err := s.GW.Store.WriteUsage(context.Background(), "browser-test", []store.UsageRecord{
		turn("cache-write", time.Millisecond, price.Tokens{Uncached: 1_200, CacheWrite1h: 20_000, Output: 400}),
		turn("cache-read-1", 2*time.Millisecond, price.Tokens{Uncached: 800, CacheRead: 20_000, Output: 350}),
		turn("cache-read-2", 3*time.Millisecond, price.Tokens{Uncached: 2_000, CacheRead: 20_000, Output: 500, Reasoning: 120}),
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNarrowScreen: at a phone's width (375 CSS pixels) no page of the navigation is wider
// than the screen: a wide table scrolls within itself (trial h6: Keys and Usage were about
// 1,120 pixels wide, and the whole page scrolled sideways).
func TestNarrowScreen(t *testing.T) {
	s, p := signedInWithUsage(t)
	p.Do(chromedp.EmulateViewport(375, 800))
	for _, n := range navigation {
		p.at(p.Navigate(s.URL+n.path), http.StatusOK, s.URL+n.path)
		if width := p.width(); width > 375 {
			p.shot("narrow-" + strings.ReplaceAll(strings.TrimPrefix(n.path, "/"), "/", "-"))
			ctx, cancel := context.WithTimeout(p.Context(), 10*time.Second)
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter((e) => !e.closest("table") && e.getBoundingClientRect().right > 376).slice(0, 5).map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`))
			cancel()
			t.Errorf("%s is %d pixels wide on a 375-pixel screen: %v", n.path, width, wide)
		}
	}
}
