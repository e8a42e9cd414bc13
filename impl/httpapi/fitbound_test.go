package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/store"
)

// sentBound is the output bound the upstream was last sent, in whichever field its format
// bounds the output with (0: none).
func sentBound(t *testing.T, g *apitest.Gateway) int {
	t.Helper()
	var sent map[string]any
	if err := json.Unmarshal(g.Sim.LastRequest().Body, &sent); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"max_output_tokens", "max_completion_tokens", "max_tokens"} {
		if v, ok := sent[k].(float64); ok {
			return int(v)
		}
	}
	return 0
}

// fittedOf is the fitted bound a response's head names (0: none).
func fittedOf(t *testing.T, h map[string][]string) int {
	t.Helper()
	v := ""
	for k, vs := range h {
		if strings.EqualFold(k, "x-tollgate-fitted-output-bound") && len(vs) > 0 {
			v = vs[0]
		}
	}
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("x-tollgate-fitted-output-bound %q", v)
	}
	return n
}

// TestUnboundedRequestIsFittedToTheCredit: a request that gives no output bound, whose caller's
// credit does not cover a worst case at the model's whole bound, is served with the largest
// bound the credit covers (as OpenRouter serves it), sent to the upstream in its own field and
// named in x-tollgate-fitted-output-bound; the bill stays within the credit. Codex's turn on
// service-flint (no max_output_tokens, the web search tool) on a $1 account is the case that
// was refused on every try (docs/billing.md). A request that gave a bound keeps its 402, which
// now says how many output tokens the credit affords; below the floor of 1,024 tokens a request
// without a bound is refused too.
func TestUnboundedRequestIsFittedToTheCredit(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	c := g.Client(t)
	bearer := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

	t.Run("codex turn on a $1 account", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			const granted = 1_000_000
			tenant := g.NewTenant(t, fmt.Sprintf("codex-%t", stream), 0, granted)
			body := fmt.Sprintf(`{"model":"service-flint","stream":%t,"input":"fix the bug","tools":[{"type":"web_search"}]}`, stream)
			status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/responses", body}, bearer(tenant.Key))
			if status != 200 {
				t.Fatalf("stream=%t: %d %s", stream, status, out)
			}
			fitted := fittedOf(t, hdr)
			if fitted < 1024 || fitted >= 65536 {
				t.Fatalf("stream=%t: fitted bound %d", stream, fitted)
			}
			if got := sentBound(t, g); got != fitted {
				t.Errorf("stream=%t: the upstream was sent a bound of %d, want %d: %s", stream, got, fitted, g.Sim.LastRequest().Body)
			}
			rec := latestUsage(t, g, tenant.Account, 1)
			if rec.OutputTokens > int64(fitted) || rec.CostMicros <= 0 || rec.CostMicros > granted || rec.WaivedMicros != 0 ||
				rec.FittedOutputTokens != int64(fitted) {
				t.Errorf("stream=%t: usage record %+v", stream, rec)
			}
			if balance, _ := checkBooks(t, g, tenant.Account, granted); balance < 0 {
				t.Errorf("stream=%t: balance %d", stream, balance)
			}

			// The same turn with a bound it cannot afford keeps its 402, which says what it can.
			explicit := strings.Replace(body, `"stream"`, `"max_output_tokens":60000,"stream"`, 1)
			status, hdr, out = do(t, c, g.URL, request{"POST", "/v1/responses", explicit}, bearer(tenant.Key))
			if status != 402 || !strings.Contains(string(out), "You requested up to 60000 output tokens (max_output_tokens), but can only afford ") ||
				!sentencesBegin.Match(out) || fittedOf(t, hdr) != 0 {
				t.Errorf("stream=%t: an explicit bound: %d %s", stream, status, out)
			}
		}
	})

	t.Run("chat cut at the fitted bound", func(t *testing.T) {
		// service-flint-base: $0.50 input, $1.50 output a million, 32,768 output tokens at most.
		const granted = 2_500
		tenant := g.NewTenant(t, "chat-small", 0, granted)
		body := `{"model":"service-flint-base","messages":[{"role":"user","content":"hi [[sim words=3000]]"}]}`
		status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/chat/completions", body}, bearer(tenant.Key))
		if status != 200 {
			t.Fatalf("%d %s", status, out)
		}
		fitted := fittedOf(t, hdr)
		if fitted < 1024 || fitted > granted*2/3 {
			t.Fatalf("fitted bound %d", fitted)
		}
		var answer struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(out, &answer)
		if len(answer.Choices) != 1 || answer.Choices[0].FinishReason != "length" || answer.Usage.CompletionTokens > fitted {
			t.Errorf("the answer is not the provider's, cut at %d: %s", fitted, out)
		}
		if got := sentBound(t, g); got != fitted {
			t.Errorf("the upstream was sent %d, want %d: %s", got, fitted, g.Sim.LastRequest().Body)
		}
		rec := latestUsage(t, g, tenant.Account, 1)
		if rec.OutputTokens > int64(fitted) || rec.CostMicros > granted || rec.WaivedMicros != 0 || rec.FittedOutputTokens != int64(fitted) {
			t.Errorf("usage record %+v", rec)
		}
		if balance, _ := checkBooks(t, g, tenant.Account, granted); balance < 0 {
			t.Errorf("balance %d", balance)
		}
		// What is left affords fewer than 1,024 output tokens (or not even the input, what the
		// answer left being a few micro-units): refused, saying so.
		status, _, out = do(t, c, g.URL, request{"POST", "/v1/chat/completions", body}, bearer(tenant.Key))
		if status != 402 || !strings.Contains(string(out), "the credit affords only") && !strings.Contains(string(out), "input alone holds") ||
			!sentencesBegin.Match(out) {
			t.Errorf("below the floor: %d %s", status, out)
		}
	})

	t.Run("messages", func(t *testing.T) {
		tenant := g.NewTenant(t, "messages-small", 0, 100_000)
		// A Messages request always bounds its output: never lowered, told what it affords.
		status, _, out := do(t, c, g.URL, request{"POST", "/v1/messages",
			`{"model":"service-sonnet","max_tokens":64000,"messages":[{"role":"user","content":"hi"}]}`}, bearer(tenant.Key))
		if status != 402 || !strings.Contains(string(out), "You requested up to 64000 output tokens (max_tokens), but can only afford ") ||
			!strings.Contains(string(out), `"type":"error"`) {
			t.Errorf("messages with a bound: %d %s", status, out)
		}
		// A chat request served by a Messages upstream is sent its fitted bound as max_tokens
		// (chat-via-messages: $2 a million output tokens, 4,096 at most).
		poor := g.NewTenant(t, "via-messages", 0, 5_000)
		status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
			`{"model":"chat-via-messages","messages":[{"role":"user","content":"hi"}]}`}, bearer(poor.Key))
		fitted := fittedOf(t, hdr)
		if status != 200 || fitted < 1024 || fitted >= 4096 {
			t.Fatalf("chat via messages: %d fitted %d: %s", status, fitted, out)
		}
		var sent struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.Unmarshal(g.Sim.LastRequest().Body, &sent)
		if sent.MaxTokens != fitted {
			t.Errorf("the Messages upstream was sent max_tokens %d, want %d", sent.MaxTokens, fitted)
		}
	})

	t.Run("key credit cap", func(t *testing.T) {
		clocktest.NotAcrossMidnight(t, time.Minute)
		tenant := g.NewTenant(t, "capped", 0, 100_000_000)
		capMicros := int64(3_000)
		key, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily})
		status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
			`{"model":"service-flint-base","messages":[{"role":"user","content":"hi"}]}`}, bearer(key))
		fitted := fittedOf(t, hdr)
		if status != 200 || fitted < 1024 || fitted > 2_000 {
			t.Fatalf("capped key: %d fitted %d: %s", status, fitted, out)
		}
		rec := latestUsage(t, g, tenant.Account, 1)
		if rec.CostMicros > capMicros || rec.FittedOutputTokens != int64(fitted) {
			t.Errorf("usage record %+v beyond the cap", rec)
		}
		status, _, out = do(t, c, g.URL, request{"POST", "/v1/chat/completions",
			`{"model":"service-flint-base","max_tokens":32768,"messages":[{"role":"user","content":"hi"}]}`}, bearer(key))
		if status != 402 || !strings.Contains(string(out), "You requested up to 32768 output tokens (max_tokens), but can only afford ") ||
			!strings.Contains(string(out), "credit cap") {
			t.Errorf("capped key with a bound: %d %s", status, out)
		}
	})
}

// TestFittedRequestsNeverOverspend: concurrent requests without an output bound on a small
// balance are each fitted to what is left when they reserve; together they never spend more
// than the account had, and the ledger sums to the balance.
func TestFittedRequestsNeverOverspend(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	const granted = 60_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	body := `{"model":"service-flint-base","messages":[{"role":"user","content":"hi [[sim words=3000]]"}]}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	for range 30 {
		wg.Go(func() {
			status, hdr, out := do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions", body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
			kind := strconv.Itoa(status)
			if status == 200 && fittedOf(t, hdr) > 0 {
				kind = "fitted"
			}
			if status != 200 && status != 402 {
				t.Errorf("%d %.200s", status, out)
			}
			mu.Lock()
			statuses[kind]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses["fitted"] == 0 {
		t.Fatalf("statuses %v: no request was fitted", statuses)
	}
	served := int64(statuses["200"] + statuses["fitted"])
	waitSettled(t, g, tenant.Account, served)
	balance, usage := checkBooks(t, g, tenant.Account, granted)
	if balance < 0 || usage > granted {
		t.Errorf("balance %d, usage %d of %d granted", balance, usage, granted)
	}
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.WaivedMicros != 0 {
			t.Errorf("record %+v: waived %d", rec, rec.WaivedMicros)
		}
	}
	t.Logf("%v; balance left %d", statuses, balance)
}

// sentencesBegin matches a refusal whose sentence after the fitting's own begins with a
// capital letter (the meter's message, which begins in lower case, joined to it).
var sentencesBegin = regexp.MustCompile(`(afford \d+\.|such a request to\.|\) free\.) [A-Z]`)

// TestInputAloneBeyondTheCreditSaysSo: a request whose input (with its hosted tools' holds)
// alone is more than the caller's free credit is refused with a 402 that says so, with what
// the input holds and what is free, in the route's envelope; a request with a bound and one
// without alike, and for a key's cap as for the account's credit. Before, the refusal said the
// credit "affords only 0 output tokens" (or "can only afford 0"), which reads as if a smaller
// bound would do.
func TestInputAloneBeyondTheCreditSaysSo(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	c := g.Client(t)
	bearer := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	const granted = 1_000
	long := strings.Repeat("hello ", 5_000) // 30,000 bytes: some 10,000 input tokens
	tenant := g.NewTenant(t, "poor", 0, granted)
	rich := g.NewTenant(t, "rich", 0, 100_000_000)
	capMicros := int64(granted)
	capped, _ := keyWith(t, g, rich.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodNone})
	inputAlone := regexp.MustCompile(`^The request's (input alone holds|input and hosted tools alone hold) up to (\d+) micro-units \(\$\d+\.\d{6}\) before any output, more than the (\d+) \(\$\d+\.\d{6}\) (free|left of the key's credit cap)\. [A-Z]`)
	for _, c2 := range []struct {
		name, path, body, key, what string
		messages                    bool
	}{
		{"chat without a bound", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"` + long + `"}]}`, tenant.Key, "input alone holds", false},
		{"chat with a bound", "/v1/chat/completions", `{"model":"service-flint-base","max_tokens":100,"messages":[{"role":"user","content":"` + long + `"}]}`, tenant.Key, "input alone holds", false},
		{"responses with web search", "/v1/responses", `{"model":"service-flint","input":"hi","tools":[{"type":"web_search"}]}`, tenant.Key, "input and hosted tools alone hold", false},
		{"messages", "/v1/messages", `{"model":"service-sonnet","max_tokens":1024,"messages":[{"role":"user","content":"` + long + `"}]}`, tenant.Key, "input alone holds", true},
		{"a key's cap", "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"` + long + `"}]}`, capped, "input alone holds", false},
	} {
		t.Run(c2.name, func(t *testing.T) {
			status, hdr, out := do(t, c, g.URL, request{"POST", c2.path, c2.body}, bearer(c2.key))
			var env struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(out, &env); err != nil || status != 402 || fittedOf(t, hdr) != 0 {
				t.Fatalf("%d %s", status, out)
			}
			if c2.messages && (env.Type != "error" || env.Error.Type != "billing_error") ||
				!c2.messages && env.Error.Type != "insufficient_quota" {
				t.Errorf("not the route's envelope: %s", out)
			}
			m := inputAlone.FindStringSubmatch(env.Error.Message)
			if m == nil || m[1] != c2.what || strings.Contains(env.Error.Message, "afford") || strings.Contains(env.Error.Message, "a lower output bound") {
				t.Fatalf("the refusal does not say the input alone is more than the credit: %s", env.Error.Message)
			}
			held, _ := strconv.ParseInt(m[2], 10, 64)
			free, _ := strconv.ParseInt(m[3], 10, 64)
			if free != granted || held <= free {
				t.Errorf("the input holds %d, %d free; want more than the %d free", held, free, granted)
			}
			if whose := map[bool]string{false: "free", true: "left of the key's credit cap"}[c2.key == capped]; m[4] != whose {
				t.Errorf("the credit is said to be %q, want %q: %s", m[4], whose, env.Error.Message)
			}
		})
	}
}

// TestFittedBoundNamesWhatTheExpertWasSent: a request fitted to its credit that a fusion
// model's expert serves with an output limit of its own below the fitted bound is sent that
// limit; x-tollgate-fitted-output-bound and the usage record's fitted_output_tokens name the
// bound the upstream was sent, whichever expert the router chose. Before, both named the
// fitted bound reserved (some 2,900 tokens) while the upstream was sent 1,100 or 1,200.
func TestFittedBoundNamesWhatTheExpertWasSent(t *testing.T) {
	cfg := config.Default()
	cfg.Models = append(cfg.Models, config.Model{ID: "two-short-experts", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Experts: []config.Upstream{
			{Provider: "sim-openai-chat", Model: "sim-short", MaxOutputTokens: 1100},
			{Provider: "sim-anthropic", Model: "sim-shortish", MaxOutputTokens: 1200},
		}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "two-short-experts")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	c := g.Client(t)
	const granted = 6_000 // 4,096 output tokens hold 8,192: fitted to some 2,900
	for i := range 4 {
		// Each request on an account of its own, granted the same.
		poor := g.NewTenant(t, fmt.Sprintf("poor-%d", i), 0, granted)
		status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
			`{"model":"two-short-experts","messages":[{"role":"user","content":"hi [[sim words=3000]]"}]}`},
			map[string]string{"Authorization": "Bearer " + poor.Key})
		if status != 200 {
			t.Fatalf("%d %s", status, out)
		}
		sent := sentBound(t, g)
		if sent != 1100 && sent != 1200 {
			t.Fatalf("the expert %s was sent %d: %s", hdr.Get("X-Tollgate-Expert"), sent, g.Sim.LastRequest().Body)
		}
		if got := fittedOf(t, hdr); got != sent {
			t.Errorf("x-tollgate-fitted-output-bound %d, the upstream (%s) was sent %d", got, hdr.Get("X-Tollgate-Expert"), sent)
		}
		rec := latestUsage(t, g, poor.Account, 1)
		if rec.FittedOutputTokens != int64(sent) || rec.OutputTokens > int64(sent) || rec.CostMicros > granted {
			t.Errorf("usage record %+v: fitted_output_tokens want %d", rec, sent)
		}
	}
}

// TestFittedResponsesEchoTheBound: a Responses request without max_output_tokens fitted to its
// credit and served by a chat upstream (translated) echoes, in the response object, the bound
// the upstream was sent, whole or streamed, as a Responses upstream's own answer does (its
// echo is relayed) and as OpenAI's response objects give the bound in effect. Before, the
// whole answer translated from chat echoed max_output_tokens null while the stream's
// response.completed gave the bound.
func TestFittedResponsesEchoTheBound(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	c := g.Client(t)
	for _, stream := range []bool{false, true} {
		// service-flint-base: a chat upstream, $1.50 a million output tokens.
		tenant := g.NewTenant(t, fmt.Sprintf("responses-fitted-%t", stream), 0, 2_500)
		body := fmt.Sprintf(`{"model":"service-flint-base","stream":%t,"input":"hi [[sim words=20]]"}`, stream)
		status, hdr, out := do(t, c, g.URL, request{"POST", "/v1/responses", body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
		if status != 200 {
			t.Fatalf("stream=%t: %d %s", stream, status, out)
		}
		fitted := fittedOf(t, hdr)
		if fitted < 1024 || fitted != sentBound(t, g) {
			t.Fatalf("stream=%t: fitted %d, the upstream was sent %d", stream, fitted, sentBound(t, g))
		}
		object := out
		if stream {
			// The last event's data is response.completed's.
			i := strings.LastIndex(string(out), "data: ")
			object = []byte(strings.TrimSpace(string(out[i+len("data: "):])))
			var ev struct {
				Type     string          `json:"type"`
				Response json.RawMessage `json:"response"`
			}
			if err := json.Unmarshal(object, &ev); err != nil || ev.Type != "response.completed" {
				t.Fatalf("stream: last event %s (%v)", object, err)
			}
			object = ev.Response
		}
		var echo struct {
			MaxOutputTokens *int `json:"max_output_tokens"`
		}
		if err := json.Unmarshal(object, &echo); err != nil {
			t.Fatal(err)
		}
		if echo.MaxOutputTokens == nil || *echo.MaxOutputTokens != fitted {
			t.Errorf("stream=%t: the response object echoes max_output_tokens %v, want the fitted %d: %s", stream, echo.MaxOutputTokens, fitted, object)
		}
	}
}
