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
)

// streamedBody is body, a request of route's format, asking for a streamed answer (with the
// usage chunk on chat completions).
func streamedBody(route, body string) string {
	fields := `"stream":true,`
	if route == "/v1/chat/completions" {
		fields += `"stream_options":{"include_usage":true},`
	}
	return "{" + fields + strings.TrimPrefix(body, "{")
}

// credentialSent is the credential of the simulator's last request: its x-api-key, or its
// Authorization's bearer token ("" for none).
func credentialSent(s *sim.Simulator) string {
	h := s.LastHeaders()
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// TestStreamedRequestsUseTheAccountsUpstreamKey: a streamed request of an account with
// upstream keys of its own is sent with its key, as a non-streamed one is, on each route (raw
// SSE: Messages, chat completions with the usage chunk, Responses): the simulator receives the
// account's key, and the stream's cached tokens are the account's own. Its first stream of a
// memo reads nothing, an account without keys (on the operator's) streaming the same memo
// reads none of it, and its repeat reads its own memo; its usage records bill exactly the
// cached tokens its streams reported.
func TestStreamedRequestsUseTheAccountsUpstreamKey(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	alpha := g.NewTenant(t, "alpha", 0, 10_000_000)
	beta := g.NewTenant(t, "beta", 0, 10_000_000)
	for _, p := range g.Config.Providers {
		g.SetUpstreamKey(t, alpha.Account.ID, p.Name, "sk-alpha-own-"+p.Name)
	}
	ctx := context.Background()
	var alphaRead int64
	for _, c := range promptCacheRoutes {
		t.Run(c.route, func(t *testing.T) {
			memo := "CONFIDENTIAL streamed memo (" + c.route + "): acme acquires globex. " + strings.Repeat("Terms and schedules follow. ", 200)
			stream := func(key string) (int64, string) {
				t.Helper()
				status, hdr, body := postRaw(t, g.Client(t), g, key, c.route, streamedBody(c.route, c.body(memo)))
				if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("status %d %s: %.300s", status, hdr.Get("Content-Type"), body)
				}
				return c.read(clientUsage(t, c.route, true, body)), credentialSent(g.Sim)
			}
			provider := "sim-openai-chat"
			if c.route == "/v1/messages" {
				provider = "sim-anthropic"
			}
			want := "sk-alpha-own-" + provider
			if n, sent := stream(alpha.Key); n != 0 || sent != want {
				t.Fatalf("alpha's first stream of its memo read %d cached tokens, sent with %q (want %q)", n, sent, want)
			}
			if n, sent := stream(beta.Key); n != 0 || sent != "" {
				t.Errorf("beta's stream of alpha's memo read %d cached tokens, sent with %q (want the operator's: none here)", n, sent)
			}
			n, sent := stream(alpha.Key)
			if n <= 0 || sent != want {
				t.Errorf("alpha's repeat stream of its memo read %d cached tokens, sent with %q (want %q)", n, sent, want)
			}
			alphaRead += n
		})
	}
	eventually(t, "alpha's streams billed with the cached tokens they reported", func() string {
		recs, err := g.Store.UsageRecords(ctx, alpha.Account.ID, 20)
		if err != nil {
			return err.Error()
		}
		var read int64
		for _, r := range recs {
			read += r.CacheReadTokens
		}
		if len(recs) != 2*len(promptCacheRoutes) || read != alphaRead {
			return fmt.Sprintf("%d records reading %d cached tokens, want %d reading %d", len(recs), read, 2*len(promptCacheRoutes), alphaRead)
		}
		return ""
	})
}

// TestStreamedRequestRefusedAccountKey: a streamed request whose account's own key the upstream
// refuses (the simulator takes only the operator's) is answered before any stream begins, as a
// non-streamed one is: a 502 JSON error in the route's envelope (not an SSE stream), saying
// that the provider refused the account's own upstream credential (code
// upstream_credential_refused on the OpenAI routes), quoting no key. Nothing is billed: the
// account's balance is its credit in full once the three refusals are over (each reservation
// released) and no usage record is written, while its request without a key of its own then
// is (one record).
func TestStreamedRequestRefusedAccountKey(t *testing.T) {
	cfg := config.Default()
	for i := range cfg.Providers {
		cfg.Providers[i].APIKey = "sk-operator"
	}
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: sim.New(sim.Options{APIKey: "sk-operator"})})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	for _, p := range []string{"sim-anthropic", "sim-openai-chat"} {
		g.SetUpstreamKey(t, alpha.Account.ID, p, "sk-alpha-not-this-one")
	}
	for _, c := range []struct{ route, body, typ, code string }{
		{"/v1/messages", keyMessages, "api_error", ""},
		{"/v1/chat/completions", keyChat, "upstream_error", "upstream_credential_refused"},
		{"/v1/responses", `{"model":"service-flint-base","max_output_tokens":1000,"input":"hello"}`, "upstream_error", "upstream_credential_refused"},
	} {
		status, hdr, body := postRaw(t, g.Client(t), g, alpha.Key, c.route, streamedBody(c.route, c.body))
		typ, code, msg := errorOf(t, body)
		if status != http.StatusBadGateway || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || typ != c.typ || code != c.code ||
			!strings.Contains(msg, "refused this account's own upstream credential") || strings.Contains(string(body), "sk-") {
			t.Errorf("%s streamed with a refused key: %d %s %s", c.route, status, hdr.Get("Content-Type"), body)
		}
	}
	if sent := credentialSent(g.Sim); sent != "sk-alpha-not-this-one" {
		t.Errorf("the simulator was last sent %q, want alpha's own key", sent)
	}
	eventually(t, "alpha's balance whole after the refusals", func() string {
		status, _, body := do(t, g.Client(t), g.URL, request{"GET", "/v1/credits", ""}, map[string]string{"Authorization": "Bearer " + alpha.Key})
		var credit struct {
			BalanceMicros int64 `json:"balance_micros"`
		}
		if err := json.Unmarshal(body, &credit); status != 200 || err != nil || credit.BalanceMicros != keyCredit {
			return fmt.Sprintf("%d %s", status, body)
		}
		return ""
	})
	// Served once its key is removed (the operator's key): that request's record is the only one.
	g.RemoveUpstreamKey(t, alpha.Account.ID, "sim-openai-chat")
	eventually(t, "alpha served with the operator's key once its own is removed", func() string {
		if status, _, body := postRaw(t, g.Client(t), g, alpha.Key, "/v1/chat/completions", streamedBody("/v1/chat/completions", keyChat)); status != 200 {
			return fmt.Sprintf("%d %.200s", status, body)
		}
		return ""
	})
	eventually(t, "alpha's one usage record", func() string {
		recs, err := g.Store.UsageRecords(context.Background(), alpha.Account.ID, 10)
		if err != nil || len(recs) != 1 {
			return fmt.Sprintf("%d records (%v), want 1: the answered stream's", len(recs), err)
		}
		return ""
	})
}
