package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// The stand-in's upstreams that answer 200 with an error in place of the answer, streamed or
// not, in the envelope of the route asked (OpenAI-compatible servers and OpenRouter on chat,
// Anthropic's on Messages): answers_invalid refuses the request (invalid_request_error, its
// words quoting the key and the upstream's model), answers_bad_request with OpenRouter's
// numeric code 400, answers_overloaded overloads (OpenRouter's code 503; overloaded_error) and
// answers_rate_limited (and answers_rate_limited_whole, another expert for the fusion model of
// its own) is rate limited (rate_limit_exceeded; rate_limit_error).
func init() {
	answer := func(chat, messages string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if strings.HasSuffix(r.URL.Path, "/messages") {
				_, _ = io.WriteString(w, messages)
				return
			}
			_, _ = io.WriteString(w, chat)
		}
	}
	upstreamFailures["answers_invalid"] = answer(
		`{"error":{"message":"Invalid value for 'temperature' of answers_invalid, key `+standKey+`","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`,
		`{"type":"error","error":{"type":"invalid_request_error","message":"temperature: out of range for answers_invalid, key `+standKey+`"}}`)
	upstreamFailures["answers_bad_request"] = answer(
		`{"error":{"code":400,"message":"Input too long for answers_bad_request"}}`,
		`{"error":{"code":400,"message":"Input too long for answers_bad_request"}}`)
	upstreamFailures["answers_overloaded"] = answer(
		`{"error":{"code":503,"message":"No instances available for key `+standKey+`"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded for key `+standKey+`"}}`)
	upstreamFailures["answers_rate_limited"] = answer(
		`{"error":{"message":"Rate limit reached for key `+standKey+`","type":"requests","code":"rate_limit_exceeded"}}`,
		`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited for key `+standKey+`"}}`)
	upstreamFailures["answers_rate_limited_whole"] = upstreamFailures["answers_rate_limited"]
}

// answerErrorConfig is failingConfig with, for each of the stand-in's answering upstreams m
// above, "up-<m>-fusion": a chat model whose first expert is m (on the stand-expert provider,
// with no key of the operator's) and whose second is the simulator.
func answerErrorConfig(t *testing.T, u *failingUpstream) *config.Config {
	cfg := failingConfig(t, u)
	for _, first := range []string{"answers_invalid", "answers_overloaded", "answers_rate_limited", "answers_rate_limited_whole"} {
		m := config.Model{ID: "up-" + first + "-fusion", Family: config.FamilyChat, OwnedBy: "test", MaxOutputTokens: 4096,
			Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000},
			Experts: []config.Upstream{
				{Provider: "stand-expert", Model: first, Strengths: []string{"general", "fast"}},
				{Provider: "sim-openai-chat", Model: "sim-general", Strengths: []string{"general"}},
			}}
		cfg.Models = append(cfg.Models, m)
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, m.ID)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestErrorInPlaceOfTheAnswerIsJudgedByItsKind: an upstream that answers 200 with an error in
// place of the answer gets the same judgement whether the request was streamed or not, read
// from the error's kind. The request's fault (invalid_request_error, OpenRouter's code 400) is
// the client's 400 in its route's envelope with the upstream's words (the key elided, the
// upstream's model named as the client named it), no other expert called, the expert's health
// untouched, no usage record, the reservation released. The upstream's fault (an overload, a
// rate limit) is a failed try: asked once, the next expert called unseen (the fusion model's
// answer is the simulator's), counted against the expert's health as a 503 or 429 would be (the
// next request does not ask it first), but an account's own key's rate limit is the account's
// (another account's next request still asks it); with no expert left, the route's 502 in the
// gateway's words, one usage record upstream_malformed at cost 0, the reservation released.
// Before, a streamed request's JSON error was a 502 tried elsewhere whatever its kind (the
// invalid request was answered by the fusion model's second expert), a whole answer's error
// without the type invalid_request_error (OpenRouter's code 400, any error in Anthropic's
// envelope) was a 502 tried elsewhere, and a whole answer's error of an account's own key
// counted against the expert's health.
func TestErrorInPlaceOfTheAnswerIsJudgedByItsKind(t *testing.T) {
	u := newFailingUpstream(t)
	g := apitest.Start(t, apitest.Options{Config: answerErrorConfig(t, u)})
	c := g.Client(t)
	// The credit covers one request's reservation (max_tokens 1000 at 2 USD per million output
	// tokens: about 2,050 micro-units) and not two: a reservation left held makes the next a 402.
	const credit = 3_000
	body := func(model, route string, stream bool) string {
		if route == "/v1/messages" {
			s := `{"model":"` + model + `-messages","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]`
			if stream {
				s += `,"stream":true`
			}
			return s + "}"
		}
		return chatBody(model, "hi", stream, 1000)
	}
	type envelope struct {
		Type  string
		Error struct {
			Type, Message string
			Param, Code   *string
		}
	}
	for _, route := range []string{"/v1/chat/completions", "/v1/messages"} {
		for _, stream := range []bool{false, true} {
			name := strings.ReplaceAll(route, "/", "-")
			if stream {
				name += "-stream"
			}
			t.Run("the request's fault"+name, func(t *testing.T) {
				tenant := g.NewTenant(t, "refused"+name, 0, credit)
				for _, model := range []string{"answers_invalid", "answers_bad_request", "answers_invalid"} {
					before := u.tries(model)
					status, h, got := postRaw(t, c, g, tenant.Key, route, body("up-"+model, route, stream))
					var env envelope
					_ = json.Unmarshal(got, &env)
					wantType := "invalid_request_error"
					if status != http.StatusBadRequest || env.Error.Type != wantType || (route == "/v1/messages") != (env.Type == "error") ||
						!strings.Contains(env.Error.Message, "the upstream refused the request: ") || !strings.Contains(env.Error.Message, "up-"+model) ||
						strings.Contains(string(got), standKey) || strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
						t.Errorf("%s: status %d, %s: want the route's 400 with the upstream's words, the model named as asked, no key", model, status, got)
					}
					if model == "answers_invalid" && route == "/v1/chat/completions" && (env.Error.Param == nil || *env.Error.Param != "temperature" || env.Error.Code == nil || *env.Error.Code != "invalid_value") {
						t.Errorf("%s: %s: want the upstream's param and code", model, got)
					}
					if n := u.tries(model) - before; n != 1 {
						t.Errorf("%s: the upstream was asked %d times, want once", model, n)
					}
				}
				// A failed try of the upstream's doing writes a record: the refusals wrote none.
				if status, _, got := postRaw(t, c, g, tenant.Key, route, body("up-answers_overloaded", route, stream)); status != http.StatusBadGateway {
					t.Fatalf("the overloaded upstream: %d %s", status, got)
				}
				recs := usageRecordsOf(t, g, tenant, 1)
				if len(recs) != 1 || recs[0].Status != "upstream_malformed" || recs[0].CostMicros != 0 {
					t.Errorf("usage records %+v: want one, the overloaded try's (upstream_malformed, billing nothing), none for the refusals", recs)
				}
				if bal, err := g.Store.Balance(context.Background(), tenant.Account.ID); err != nil || bal != credit {
					t.Errorf("balance %d (%v), want %d", bal, err, credit)
				}
			})
			t.Run("the upstream's fault"+name, func(t *testing.T) {
				tenant := g.NewTenant(t, "failed"+name, 0, credit)
				for _, model := range []string{"answers_overloaded", "answers_rate_limited", "answers_overloaded"} {
					before := u.tries(model)
					status, h, got := postRaw(t, c, g, tenant.Key, route, body("up-"+model, route, stream))
					var env envelope
					_ = json.Unmarshal(got, &env)
					wantType := "upstream_error"
					if route == "/v1/messages" {
						wantType = "api_error"
					}
					want := "the upstream answered with an error ("
					if stream {
						want = "the upstream answered the streamed request with an error ("
					}
					if status != http.StatusBadGateway || env.Error.Type != wantType || !strings.HasPrefix(env.Error.Message, want) ||
						strings.Contains(string(got), standKey) || strings.Contains(string(got), "instances") || strings.Contains(strings.ToLower(string(got)), "for key") ||
						strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
						t.Errorf("%s: status %d, %s: want the route's 502 (%s) in the gateway's words", model, status, got, wantType)
					}
					if n := u.tries(model) - before; n != 1 {
						t.Errorf("%s: the upstream was asked %d times, want once", model, n)
					}
				}
				recs := usageRecordsOf(t, g, tenant, 3)
				for _, r := range recs {
					if r.Status != "upstream_malformed" || r.CostMicros != 0 {
						t.Errorf("usage record %+v: want upstream_malformed, billing nothing", r)
					}
				}
				if len(recs) != 3 {
					t.Errorf("%d usage records, want 3", len(recs))
				}
				if bal, err := g.Store.Balance(context.Background(), tenant.Account.ID); err != nil || bal != credit {
					t.Errorf("balance %d (%v), want %d", bal, err, credit)
				}
			})
		}
	}

	const fusionCredit = 50_000_000
	t.Run("fusion, the request's fault", func(t *testing.T) {
		tenant := g.NewTenant(t, "fusion-refused", 0, fusionCredit)
		for i, stream := range []bool{true, false, true} {
			before := u.tries("answers_invalid")
			status, h, got := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-answers_invalid-fusion", "hi", stream, 16))
			if status != http.StatusBadRequest || !strings.Contains(string(got), "the upstream refused the request") || h.Get("x-tollgate-expert") != "" {
				t.Errorf("request %d (stream %v): status %d, expert %q, %s: want the 400, no other expert called", i, stream, status, h.Get("x-tollgate-expert"), got)
			}
			if n := u.tries("answers_invalid") - before; n != 1 {
				t.Errorf("request %d: the first expert was asked %d times, want once (its health untouched by a refusal)", i, n)
			}
		}
	})
	for _, tc := range []struct {
		model  string
		stream bool
		own    bool
	}{
		{"answers_overloaded", false, false},
		{"answers_rate_limited_whole", false, true},
		{"answers_rate_limited", true, true},
	} {
		t.Run("fusion, the upstream's fault, "+tc.model, func(t *testing.T) {
			fusion := "up-" + tc.model + "-fusion"
			served := func(who string, key string, wantAsked int) {
				t.Helper()
				before := u.tries(tc.model)
				status, h, got := postRaw(t, c, g, key, "/v1/chat/completions", chatBody(fusion, "hi", tc.stream, 16))
				if status != http.StatusOK || !strings.Contains(h.Get("x-tollgate-expert"), "sim-general") {
					t.Errorf("%s: status %d, expert %q, %.300s: want the second expert's answer", who, status, h.Get("x-tollgate-expert"), got)
				}
				if n := u.tries(tc.model) - before; n != wantAsked {
					t.Errorf("%s: the first expert was asked %d times, want %d", who, n, wantAsked)
				}
			}
			if tc.own {
				// The rate limit of the account's own key is its upstream account's: failed
				// over three times in a row, the expert keeps its place for the others.
				own := g.NewTenant(t, "fusion-own-"+tc.model, 0, fusionCredit)
				g.SetUpstreamKey(t, own.Account.ID, "stand-expert", "sk-own-0123456789")
				for i := range 3 {
					served("own key "+strconv.Itoa(i), own.Key, 1)
				}
			}
			// On the operator's key: failed over, and counted against the expert's health as a
			// 503 or a 429 would be: after three failures in a row it is no longer asked first.
			tenant := g.NewTenant(t, "fusion-failed-"+tc.model, 0, fusionCredit)
			for i, wantAsked := range []int{1, 1, 1, 0} {
				served("request "+strconv.Itoa(i), tenant.Key, wantAsked)
			}
			recs := usageRecordsOf(t, g, tenant, 4)
			for _, r := range recs {
				if r.Status != "ok" || r.UpstreamModel != "sim-general" {
					t.Errorf("usage record %+v: want the second expert's", r)
				}
			}
			if len(recs) != 4 {
				t.Errorf("%d usage records, want 4", len(recs))
			}
		})
	}
}
