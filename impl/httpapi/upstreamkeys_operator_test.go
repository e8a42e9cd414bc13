package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
)

// TestUnopenedAccountKeyIsLogged: a stored key that does not open with the gateway's secret
// (sealed under another, as after a restore without the server secrets) gets the account's
// requests to its provider a 503 telling the tenant that the operator must set it again, and
// the operator is told too: a WARN line naming the account, the provider and the key's hint.
// The review of s15h6: the gateway said nothing, and only the tenant knew. A key kept for a
// provider the configuration no longer has is warned of the same way (it was skipped in
// silence, the account back on the operator's key and in the shared prompt cache).
func TestUnopenedAccountKeyIsLogged(t *testing.T) {
	logs := &syncbuf.Buffer{}
	g := apitest.Start(t, apitest.Options{LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	if err := g.Store.SetUpstreamKey(context.Background(), store.UpstreamKey{AccountID: alpha.Account.ID, Provider: "sim-anthropic",
		Sealed: []byte("\x01sealed under a secret this gateway does not have"), Hint: "…x9Qa", SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
	status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages)
	if _, _, msg := errorOf(t, body); status != http.StatusServiceUnavailable || !strings.Contains(msg, "sim-anthropic") {
		t.Fatalf("a key that does not open: %d %s", status, body)
	}
	if !lineWith(logs.String(), `"level":"WARN"`, "does not open", `"provider":"sim-anthropic"`, `"hint":"…x9Qa"`, alpha.Account.ID.String()) {
		t.Errorf("no warning for the operator naming the account, the provider and the hint:\n%s", logs.String())
	}

	// A key kept for a provider the configuration no longer has (renamed: "anthropic" became
	// "sim-anthropic") serves nothing: the request goes with the operator's key, and the
	// operator is told, since the account is back in the shared prompt cache.
	beta := g.NewTenant(t, "beta", 0, keyCredit)
	if err := g.Store.SetUpstreamKey(context.Background(), store.UpstreamKey{AccountID: beta.Account.ID, Provider: "anthropic",
		Sealed: []byte("\x01whatever"), Hint: "…7fKe", SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, g, beta.Key, "/v1/messages", keyMessages); status != http.StatusOK {
		t.Fatalf("a key of a provider no longer configured: %d %s", status, body)
	}
	if !lineWith(logs.String(), `"level":"WARN"`, "does not have", `"provider":"anthropic"`, `"hint":"…7fKe"`, beta.Account.ID.String()) {
		t.Errorf("no warning for the operator of a key whose provider is gone:\n%s", logs.String())
	}
}

// TestFailedCallsLogWhatComesNext: each failed call's WARN line says whether another expert is
// tried: an account whose own key every provider of the fusion model service-flint refuses
// gets, for one request, "trying the next expert" after each of its first two experts and "no
// expert left" after the last, and a request to service-sonnet, which has one expert, only "no
// expert left". Before, every line said "trying the next expert", also after the last.
func TestFailedCallsLogWhatComesNext(t *testing.T) {
	cfg := config.Default()
	for i := range cfg.Providers {
		cfg.Providers[i].APIKey = "sk-operator"
	}
	logs := &syncbuf.Buffer{}
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: sim.New(sim.Options{APIKey: "sk-operator"}),
		LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	alpha := g.NewTenant(t, "alpha", 0, 10_000_000)
	for _, p := range []string{"sim-openai-chat", "sim-anthropic", "sim-openai-responses"} {
		g.SetUpstreamKey(t, alpha.Account.ID, p, "sk-alpha-not-this-one")
	}
	const refused = "upstream refused the account's own key; "
	lines := func(id, ending string) int {
		n := 0
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, refused+ending) && strings.Contains(line, id) {
				n++
			}
		}
		return n
	}
	status, hdr, body := postRaw(t, g.Client(t), g, alpha.Key, "/v1/chat/completions",
		`{"model":"service-flint","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
	if status != http.StatusBadGateway {
		t.Fatalf("service-flint with refused keys: %d %s", status, body)
	}
	id := `"request_id":"` + hdr.Get("x-request-id") + `"`
	if next, none := lines(id, "trying the next expert"), lines(id, "no expert left"); next != 2 || none != 1 {
		t.Errorf("service-flint: %d lines trying the next expert, %d with no expert left; want 2 and 1:\n%s", next, none, logs.String())
	}
	status, hdr, body = postRaw(t, g.Client(t), g, alpha.Key, "/v1/messages", keyMessages)
	if status != http.StatusBadGateway {
		t.Fatalf("service-sonnet with a refused key: %d %s", status, body)
	}
	id = `"request_id":"` + hdr.Get("x-request-id") + `"`
	if next, none := lines(id, "trying the next expert"), lines(id, "no expert left"); next != 0 || none != 1 {
		t.Errorf("service-sonnet: %d lines trying the next expert, %d with no expert left; want 0 and 1:\n%s", next, none, logs.String())
	}
}
