package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
)

// The requests of the accounts' upstream key tests: a Messages request to service-sonnet (the
// sim-anthropic provider) and a chat request to service-flint-base (sim-openai-chat), each
// with an output bound whose worst case, about 15,300 micro-units on Messages, fits the credit
// of keyTenant once and not twice.
const (
	keyMessages = `{"model":"service-sonnet","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`
	keyChat     = `{"model":"service-flint-base","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`
	keyCredit   = 25_000
)

// errorOf is the error object of an error answer in either envelope.
func errorOf(t *testing.T, body []byte) (typ, code, message string) {
	t.Helper()
	var env struct {
		Error struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an error envelope: %s", body)
	}
	if env.Error.Code != nil {
		code = *env.Error.Code
	}
	return env.Error.Type, code, env.Error.Message
}

// TestAccountUpstreamKeyRefused: an upstream that refuses an account's own key (401) is not
// asked again with the operator's key, which it takes: the tenant gets a 502 in its route's
// envelope saying that its upstream credential for the provider was refused (code
// upstream_credential_refused on chat), and nothing is billed. Each refused request's
// reservation is released: the account's credit covers one reservation and not two, and
// every refused request is still a 502, not a 402, and no usage record is written. Another
// account without a key of its own is served with the operator's. The key removed (as another
// process would: from the database) stops being sent within a second (the account is served
// with the operator's key), and a key set again is sent within a second (refused again).
func TestAccountUpstreamKeyRefused(t *testing.T) {
	cfg := config.Default()
	for i := range cfg.Providers {
		cfg.Providers[i].APIKey = "sk-operator"
	}
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: sim.New(sim.Options{APIKey: "sk-operator"})})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	beta := g.NewTenant(t, "beta", 0, keyCredit)
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-anthropic", "sk-alpha-not-this-one")
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-openai-chat", "sk-alpha-not-this-one")

	for range 3 {
		status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages)
		typ, _, msg := errorOf(t, body)
		if status != http.StatusBadGateway || typ != "api_error" ||
			!strings.Contains(msg, "sim-anthropic refused this account's own upstream credential") || strings.Contains(msg, "sk-") {
			t.Fatalf("Messages with a refused key: %d %s", status, body)
		}
	}
	status, body := post(t, g, alpha.Key, "/v1/chat/completions", keyChat)
	if typ, code, msg := errorOf(t, body); status != http.StatusBadGateway || typ != "upstream_error" || code != "upstream_credential_refused" ||
		!strings.Contains(msg, "tollgate admin provider-key set") {
		t.Fatalf("chat with a refused key: %d %s", status, body)
	}
	if status, body := post(t, g, beta.Key, "/v1/messages", keyMessages); status != 200 {
		t.Fatalf("beta, with the operator's key: %d %s", status, body)
	}

	g.RemoveUpstreamKey(t, alpha.Account.ID, "sim-anthropic")
	eventually(t, "alpha served with the operator's key once its own is removed", func() string {
		if status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages); status != 200 {
			return fmt.Sprintf("%d %.200s", status, body)
		}
		return ""
	})
	ctx := context.Background()
	var recs []store.UsageRecord
	eventually(t, "alpha's answered request recorded", func() string {
		if recs, _ = g.Store.UsageRecords(ctx, alpha.Account.ID, 10); len(recs) == 0 {
			return "no usage record"
		}
		return ""
	})
	if len(recs) != 1 || recs[0].CostMicros <= 0 {
		t.Errorf("alpha's usage records: %+v, want one: the answered request's (the refused ones billed nothing)", recs)
	}
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-anthropic", "sk-alpha-still-not-this-one")
	eventually(t, "alpha's key set again is sent", func() string {
		if status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages); status != http.StatusBadGateway {
			return fmt.Sprintf("%d %.200s", status, body)
		}
		return ""
	})
}

// TestAccountKeysRequired: a provider with account_keys: required is not sent an account
// without a key of its own: with no other expert, the request is refused with 403 in the
// route's envelope (permission_error; code upstream_key_required on chat) naming the provider
// and what the operator must do, and naming no other account; a fusion model fails over to an
// expert on a provider that does not require one (X-Tollgate-Expert names it). An account with
// its key is served. An account whose stored key does not open gets a 503 saying so, never an
// answer with the operator's key.
func TestAccountKeysRequired(t *testing.T) {
	cfg := config.Default()
	for i, p := range cfg.Providers {
		if p.Name == "sim-anthropic" || p.Name == "sim-openai-chat" {
			cfg.Providers[i].AccountKeys = config.AccountKeysRequired
		}
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	beta := g.NewTenant(t, "beta", 0, keyCredit)
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-anthropic", "sk-alpha-own-key")

	if status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages); status != 200 {
		t.Fatalf("alpha, with its own key: %d %s", status, body)
	}
	status, body := post(t, g, beta.Key, "/v1/messages", keyMessages)
	if typ, _, msg := errorOf(t, body); status != http.StatusForbidden || typ != "permission_error" ||
		!strings.Contains(msg, "tollgate admin provider-key set ACCOUNT sim-anthropic") || strings.Contains(msg, "alpha") {
		t.Errorf("beta, without a key, on Messages: %d %s", status, body)
	}
	status, body = post(t, g, beta.Key, "/v1/chat/completions", keyChat)
	if typ, code, _ := errorOf(t, body); status != http.StatusForbidden || typ != "permission_error" || code != "upstream_key_required" {
		t.Errorf("beta, without a key, on chat: %d %s", status, body)
	}
	status, hdr, body := postRaw(t, g.Client(t), g, beta.Key, "/v1/chat/completions",
		`{"model":"service-flint","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
	if status != 200 || hdr.Get("X-Tollgate-Expert") != "sim-openai-responses/sim-reasoner" {
		t.Errorf("beta on the fusion model: %d, expert %q: %s", status, hdr.Get("X-Tollgate-Expert"), body)
	}

	// A stored key that does not open (sealed under another secret, say) is a 503, not the
	// operator's key.
	gamma := g.NewTenant(t, "gamma", 0, keyCredit)
	if err := g.Store.SetUpstreamKey(context.Background(), store.UpstreamKey{AccountID: gamma.Account.ID, Provider: "sim-anthropic",
		Sealed: []byte("\x01not a sealed key, twenty-eight bytes or more"), Hint: "…junk", SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
	status, body = post(t, g, gamma.Key, "/v1/messages", keyMessages)
	if typ, _, msg := errorOf(t, body); status != http.StatusServiceUnavailable || typ != "api_error" ||
		!strings.Contains(msg, "cannot read this account's own upstream credential for the provider sim-anthropic") {
		t.Errorf("gamma, whose key does not open: %d %s", status, body)
	}
}

// modelsListed is the ids GET /v1/models lists to key, in order.
func modelsListed(t *testing.T, g *apitest.Gateway, key string) []string {
	t.Helper()
	status, _, body := do(t, g.Client(t), g.URL, listModels, map[string]string{"Authorization": "Bearer " + key})
	if status != 200 {
		t.Fatalf("GET /v1/models: %d %s", status, body)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestModelsListedOnlyWhenReachable: with sim-anthropic and sim-openai-chat taking only
// accounts with a key of their own, an account without one is not listed the models whose
// every expert is there (service-sonnet, service-flint-base), as a provider lists only the
// models a key can use, and GET /v1/models/{id} of one is a 404; the fusion model, which has an
// expert elsewhere, still is. A request to an unlisted model still gets the 403 saying what the
// operator must do. An account with its key there is listed the model; a key set is followed
// within a second (the model listed) and so is a key removed (not listed), like a grant.
func TestModelsListedOnlyWhenReachable(t *testing.T) {
	cfg := config.Default()
	for i, p := range cfg.Providers {
		if p.Name == "sim-anthropic" || p.Name == "sim-openai-chat" {
			cfg.Providers[i].AccountKeys = config.AccountKeysRequired
		}
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	c := g.Client(t)
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	beta := g.NewTenant(t, "beta", 0, keyCredit)
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-anthropic", "sk-alpha-own-key")

	if got := strings.Join(modelsListed(t, g, alpha.Key), " "); got != "service-flint service-sonnet" {
		t.Errorf("alpha, with a key for sim-anthropic only, is listed %q", got)
	}
	if got := strings.Join(modelsListed(t, g, beta.Key), " "); got != "service-flint" {
		t.Errorf("beta, without keys, is listed %q", got)
	}
	retrieve := func(id string) request { return request{"GET", "/v1/models/" + id, ""} }
	eventually(t, "alpha retrieves service-sonnet", statusIs(t, c, g, alpha.Key, retrieve("service-sonnet"), 200, `"id":"service-sonnet"`))
	eventually(t, "beta retrieves service-flint", statusIs(t, c, g, beta.Key, retrieve("service-flint"), 200, `"id":"service-flint"`))
	for _, id := range []string{"service-sonnet", "service-flint-base"} {
		eventually(t, "beta retrieves "+id, statusIs(t, c, g, beta.Key, retrieve(id), 404, "model_not_found"))
	}
	status, body := post(t, g, beta.Key, "/v1/messages", keyMessages)
	if typ, _, msg := errorOf(t, body); status != http.StatusForbidden || typ != "permission_error" ||
		!strings.Contains(msg, "tollgate admin provider-key set ACCOUNT sim-anthropic") {
		t.Errorf("beta, on the model it is not listed: %d %s", status, body)
	}

	g.SetUpstreamKey(t, beta.Account.ID, "sim-openai-chat", "sk-beta-own-key")
	eventually(t, "beta listed service-flint-base once its key is set", func() string {
		if got := strings.Join(modelsListed(t, g, beta.Key), " "); got != "service-flint service-flint-base" {
			return got
		}
		return ""
	})
	eventually(t, "beta retrieves service-flint-base", statusIs(t, c, g, beta.Key, retrieve("service-flint-base"), 200, `"id":"service-flint-base"`))
	g.RemoveUpstreamKey(t, alpha.Account.ID, "sim-anthropic")
	eventually(t, "alpha not listed service-sonnet once its key is removed", func() string {
		if got := strings.Join(modelsListed(t, g, alpha.Key), " "); got != "service-flint" {
			return got
		}
		return ""
	})
	eventually(t, "alpha retrieves service-sonnet", statusIs(t, c, g, alpha.Key, retrieve("service-sonnet"), 404, "model_not_found"))
}

// TestRoutesNamingAModelAgreeWithItsRequests: the routes that name a model without calling it,
// POST /v1/messages/count_tokens and the Responses WebSocket's warm-up ("generate": false),
// refuse a model whose every expert is on a provider that takes only accounts with a key of
// their own, for an account without one there, with the 403 a request to it gets, in the
// route's envelope: count_tokens a permission_error naming the provider and the command, the
// socket the error event (status 403, code upstream_key_required) that a generating
// response.create on the same socket gets, word for word; the socket serves on. An account
// with its keys counts and warms up. Nothing goes upstream. Before, both accepted the model.
func TestRoutesNamingAModelAgreeWithItsRequests(t *testing.T) {
	cfg := config.Default()
	for i, p := range cfg.Providers {
		if p.Name == "sim-anthropic" || p.Name == "sim-openai-chat" {
			cfg.Providers[i].AccountKeys = config.AccountKeysRequired
		}
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	beta := g.NewTenant(t, "beta", 0, keyCredit)
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-anthropic", "sk-alpha-own-key")
	g.SetUpstreamKey(t, alpha.Account.ID, "sim-openai-chat", "sk-alpha-own-key")
	const count = `{"model":"service-sonnet","messages":[{"role":"user","content":"hello"}]}`

	status, body := post(t, g, beta.Key, "/v1/messages/count_tokens", count)
	if typ, _, msg := errorOf(t, body); status != http.StatusForbidden || typ != "permission_error" ||
		!strings.Contains(msg, "tollgate admin provider-key set ACCOUNT sim-anthropic") {
		t.Errorf("beta counts service-sonnet: %d %s", status, body)
	}
	if status, body := post(t, g, alpha.Key, "/v1/messages/count_tokens", count); status != 200 || !strings.Contains(string(body), `"input_tokens":`) {
		t.Errorf("alpha, with its key, counts service-sonnet: %d %s", status, body)
	}

	conn, _, err := dialResponses(t, g, beta.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "stream": true, "input": []any{userMessage("hello")}})
	generating := readResponse(t, conn)
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "generate": false, "input": []any{userMessage("hello")}})
	warmUp := readResponse(t, conn)
	last := warmUp[len(warmUp)-1]
	if len(warmUp) != 1 || last.Type != "error" || last.Status != http.StatusForbidden || last.Error.Code != "upstream_key_required" ||
		!strings.Contains(last.Error.Message, "tollgate admin provider-key set ACCOUNT sim-openai-chat") {
		t.Errorf("beta warms up service-flint-base: %v: %s", typesOf(warmUp), last.raw)
	}
	if g0 := generating[len(generating)-1]; len(generating) != 1 || g0.Status != last.Status || g0.Error != last.Error {
		t.Errorf("the warm-up's refusal %s differs from the generating request's %s", last.raw, g0.raw)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "generate": false, "input": []any{userMessage("hello")}})
	if evs := readResponse(t, conn); strings.Join(typesOf(evs), " ") != "response.created response.completed" {
		t.Errorf("beta warms up service-flint, which has an expert elsewhere, after the refusal: %v", typesOf(evs))
	}

	conn, _, err = dialResponses(t, g, alpha.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint-base", "generate": false, "input": []any{userMessage("hello")}})
	if evs := readResponse(t, conn); strings.Join(typesOf(evs), " ") != "response.created response.completed" {
		t.Errorf("alpha, with its key, warms up service-flint-base: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
	if n := g.Sim.TotalRequests(); n != 0 {
		t.Errorf("%d requests went upstream", n)
	}
}
