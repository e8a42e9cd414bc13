package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestPromptCacheIsNotSharedBetweenAccounts: another account's prompt must not be readable
// through the provider's prompt cache. The provider's prompt cache (Anthropic's at cache_control
// breakpoints, OpenAI's on every prefix of 1,024 tokens or more) is the upstream account's, not
// the tenant's: a prefix one tenant sent comes back to another tenant who sends it within the
// cache's lifetime as cache_read_input_tokens (Messages) or cached_tokens (chat, Responses), and
// as a shorter time to the first token. So a tenant who guesses another's document, system
// prompt or conversation learns whether that tenant sent it in the last minutes, one guess per
// request (seen in the security review s14h4: account beta confirmed account alpha's
// "CONFIDENTIAL merger memo: acme acquires globex for 4.2 billion" by the 716 cached tokens of
// its answer, and a wrong figure gave none). The simulator keeps its cache per upstream key, as
// the providers keep theirs per organisation (OpenAI) or workspace (Anthropic).
//
// Accounts given upstream keys of their own (tollgate admin provider-key set) are sent with
// them, so their prompts are cached apart: beta's request of alpha's memo is answered as a memo
// nobody sent (written, not read), as is a wrong guess, while alpha's own repeat still reads it
// (caching kept within an account). Accounts without keys of their own still share the
// operator's upstream account and its cache (the default; docs/inference.md): the last subtest
// shows that what remains is as the review found it for them. It failed before the accounts'
// keys existed (beta read 1,420 cached tokens of alpha's memo on Messages, 2,048 on chat, 2,816
// on Responses, with the accounts' keys not sent) and was skipped.
func TestPromptCacheIsNotSharedBetweenAccounts(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	alpha := g.NewTenant(t, "alpha", 0, 10_000_000)
	beta := g.NewTenant(t, "beta", 0, 10_000_000)
	for _, p := range g.Config.Providers {
		g.SetUpstreamKey(t, alpha.Account.ID, p.Name, "sk-alpha-own-"+p.Name)
		g.SetUpstreamKey(t, beta.Account.ID, p.Name, "sk-beta-own-"+p.Name)
	}
	for _, c := range promptCacheRoutes {
		t.Run(c.route, func(t *testing.T) {
			// A memo of its own for each route: the routes may reach one upstream, whose cache
			// would otherwise carry one route's memo to the next.
			memo := "CONFIDENTIAL merger memo (" + c.route + "): acme acquires globex for 4.2 billion. " + strings.Repeat("Terms and schedules follow. ", 200)
			guess := func(figure string) string { return strings.Replace(memo, "4.2", figure, 1) }
			reads := func(key, prefix string) int64 { return c.reads(t, g, key, prefix) }
			if n := reads(alpha.Key, memo); n != 0 {
				t.Fatalf("alpha's first request of its memo read %d cached tokens", n)
			}
			right, wrong := reads(beta.Key, memo), reads(beta.Key, guess("5.1"))
			if right != 0 || wrong != 0 {
				t.Errorf("beta's request of alpha's memo read %d cached tokens, of a memo nobody sent %d: "+
					"beta tells alpha's prompt from a wrong guess", right, wrong)
			}
			// Within one account the cache still serves: alpha's repeat reads its own prefix.
			if n := reads(alpha.Key, memo); n == 0 {
				t.Errorf("alpha's repeat of its own memo read no cached tokens: caching within an account is lost")
			}
		})
	}
	t.Run("accounts without keys of their own still share", func(t *testing.T) {
		gamma := g.NewTenant(t, "gamma", 0, 10_000_000)
		delta := g.NewTenant(t, "delta", 0, 10_000_000)
		c := promptCacheRoutes[0]
		memo := "gamma's memo: " + strings.Repeat("Terms and schedules follow. ", 200)
		c.reads(t, g, gamma.Key, memo)
		if n := c.reads(t, g, delta.Key, memo); n == 0 {
			t.Errorf("delta read none of gamma's cached memo through the operator's key: the test no longer shows the default's limit (docs/inference.md)")
		}
		// alpha, with a key of its own, does not read what the operator's accounts sent.
		if n := c.reads(t, g, alpha.Key, memo); n != 0 {
			t.Errorf("alpha, with its own key, read %d cached tokens of gamma's memo", n)
		}
	})
}

// promptCacheRoute is a route whose upstream caches prompts: the body of a request with a
// cacheable prefix, and the cached tokens its answer reports.
type promptCacheRoute struct {
	route string
	body  func(prefix string) string
	read  func(usage map[string]any) int64
}

// promptCacheRoutes are the three routes, each with a cacheable prefix of its format.
var promptCacheRoutes = []promptCacheRoute{
	{"/v1/messages", func(prefix string) string {
		return `{"model":"service-sonnet","max_tokens":16,"system":[{"type":"text","text":` + quoted(prefix) +
			`,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Summarise. [[sim cache_min=100]]"}]}`
	}, func(u map[string]any) int64 { return num(u, "cache_read_input_tokens") }},
	{"/v1/chat/completions", func(prefix string) string {
		return `{"model":"service-flint-base","messages":[{"role":"system","content":` + quoted(prefix+strings.Repeat(" chat", 600)) +
			`},{"role":"user","content":"Summarise."}]}`
	}, func(u map[string]any) int64 { return num(u, "prompt_tokens_details", "cached_tokens") }},
	{"/v1/responses", func(prefix string) string {
		return `{"model":"service-flint-base","instructions":` + quoted(prefix+strings.Repeat(" responses", 600)) + `,"input":"Summarise."}`
	}, func(u map[string]any) int64 { return num(u, "input_tokens_details", "cached_tokens") }},
}

// reads sends the route's request with prefix as key and returns the cached tokens its answer
// reports; anything but a 200 fails the test.
func (c promptCacheRoute) reads(t *testing.T, g *apitest.Gateway, key, prefix string) int64 {
	t.Helper()
	status, body := post(t, g, key, c.route, c.body(prefix))
	if status != 200 {
		t.Fatalf("status %d: %.300s", status, body)
	}
	return c.read(clientUsage(t, c.route, false, body))
}

// quoted is s as a JSON string.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
