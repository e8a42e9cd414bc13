package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// The usage a stand-in provider reports, in each provider's documented shape:
//
//   - Anthropic Messages, a prompt-cached turn: 2,000 uncached input tokens, 10,000 written to
//     the cache for one hour, 50,000 read from it, 500 output
//     (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, "Tracking cache
//     performance": input_tokens counts only the tokens after the last cache breakpoint;
//     cache_creation splits the writes by TTL; https://docs.anthropic.com/en/api/messages for
//     message_start / message_delta). At claude-sonnet-4-5's published prices ($3 input, $6
//     one-hour write, $0.30 read, $15 output per million) that is 6,000 + 60,000 + 15,000 +
//     7,500 = 88,500 micro-units.
//   - OpenAI chat completions and Responses: 52,000 prompt tokens of which 50,000 cached, 500
//     output (https://platform.openai.com/docs/api-reference/chat/object usage.
//     prompt_tokens_details.cached_tokens; https://platform.openai.com/docs/api-reference/responses/object
//     usage.input_tokens_details.cached_tokens; https://platform.openai.com/docs/guides/prompt-caching).
//     At gpt-4.1-mini's ($0.40 input, $0.10 cached input, $1.60 output) that is 800 + 5,000 +
//     800 = 6,600 micro-units.
const (
	anthropicUsage = `{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500,"service_tier":"standard"}`
	chatUsage      = `{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	responsesUsage = `{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":52500}`

	anthropicCost = 88_500
	openAICost    = 6_600
)

var (
	anthropicCosts = price.Breakdown{Input: 6_000, CacheWrite1h: 60_000, CacheRead: 15_000, Output: 7_500}
	openAICosts    = price.Breakdown{Input: 800, CacheRead: 5_000, Output: 800}
)

// standIn answers every request as a provider of kind would, with the usage above; usage, when
// not empty, replaces it (the race test's stand-in reports what each request sent).
func standIn(kind string, usage func(body []byte) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		var u string
		if usage != nil {
			u = usage(body)
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		switch {
		case kind == config.KindAnthropicMessages && !req.Stream:
			fmt.Fprintf(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Cached."}],"stop_reason":"end_turn","stop_sequence":null,"usage":%s}`, or(u, anthropicUsage))
		case kind == config.KindAnthropicMessages:
			start := or(u, anthropicUsage)
			fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":%s}}\n\n", strings.Replace(start, `"output_tokens":500`, `"output_tokens":1`, 1))
			fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
			fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Cached.\"}}\n\n")
			fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
			fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":500}}\n\n")
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case kind == config.KindOpenAIChat && !req.Stream:
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"Cached.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":%s,"service_tier":"default","system_fingerprint":null}`, or(u, chatUsage))
		case kind == config.KindOpenAIChat:
			chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":null,"choices":%s,"usage":%s}` + "\n\n"
			fmt.Fprintf(w, chunk, `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`, "null")
			fmt.Fprintf(w, chunk, `[{"index":0,"delta":{"content":"Cached."},"logprobs":null,"finish_reason":null}]`, "null")
			fmt.Fprintf(w, chunk, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`, "null")
			fmt.Fprintf(w, chunk, `[]`, or(u, chatUsage))
			fmt.Fprint(w, "data: [DONE]\n\n")
		case kind == config.KindOpenAIResponses:
			done := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-mini-2025-04-14","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Cached.","annotations":[]}]}],"parallel_tool_calls":true,"service_tier":"default","tool_choice":"auto","tools":[],"usage":%s}`, or(u, responsesUsage))
			if !req.Stream {
				fmt.Fprint(w, done)
				return
			}
			created := `{"id":"resp_1","object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-4.1-mini-2025-04-14","output":[],"usage":null}`
			events := []string{
				`{"type":"response.created","sequence_number":0,"response":` + created + `}`,
				`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
				`{"type":"response.content_part.added","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
				`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Cached."}`,
				`{"type":"response.output_text.done","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Cached."}`,
				`{"type":"response.content_part.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Cached.","annotations":[]}}`,
				`{"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Cached.","annotations":[]}]}}`,
				`{"type":"response.completed","sequence_number":7,"response":` + done + `}`,
			}
			for _, e := range events {
				var typ struct{ Type string }
				_ = json.Unmarshal([]byte(e), &typ)
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ.Type, e)
			}
		}
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// standInConfig puts, for each upstream kind, a chat-family and a Messages-family model on a
// stand-in provider of that kind: "cached-<kind>-chat" and "cached-<kind>-messages", priced from
// the built-in catalog as claude-sonnet-4-5 (the Anthropic kind) or gpt-4.1-mini (the OpenAI
// kinds).
func standInConfig(t *testing.T, usage func([]byte) string) *config.Config {
	t.Helper()
	cfg := config.Default()
	for _, kind := range []string{config.KindOpenAIChat, config.KindOpenAIResponses, config.KindAnthropicMessages} {
		srv := httptest.NewServer(standIn(kind, usage))
		t.Cleanup(srv.Close)
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "standin-" + kind, Kind: kind, BaseURL: srv.URL})
		entry, upstream := "gpt-4.1-mini", "gpt-4.1-mini"
		if kind == config.KindAnthropicMessages {
			entry, upstream = "claude-sonnet-4-5", "claude-sonnet-4-5"
		}
		for _, family := range []string{config.FamilyChat, config.FamilyMessages} {
			id := "cached-" + kind + "-" + family
			cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
				Price: config.Price{Catalog: entry}, MaxOutputTokens: 1000, ContextTokens: 200_000,
				Backend: &config.Upstream{Provider: "standin-" + kind, Model: upstream}})
			cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// longPrompt is a prompt of about n tokens by the gateway's estimate, so that the reservation
// covers what the stand-in reports.
func longPrompt(n int) string { return strings.Repeat("cache me ", n/2) }

// inferenceBody is a request of the route's format for model.
func inferenceBody(route, model, prompt string, stream bool) string {
	switch route {
	case "/v1/messages":
		return fmt.Sprintf(`{"model":%q,"max_tokens":1000,"stream":%t,"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
	case "/v1/responses":
		return fmt.Sprintf(`{"model":%q,"max_output_tokens":1000,"stream":%t,"input":%q}`, model, stream, prompt)
	default:
		return fmt.Sprintf(`{"model":%q,"max_tokens":1000,"stream":%t,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
	}
}

// post sends body to route with key and returns the status and the whole answer.
func post(t *testing.T, g *apitest.Gateway, key, route, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.URL+route, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// checkReproducible asserts that the record's cost is the sum of its per-kind costs and that
// those are what its counts cost at the price it carries: the bill from the row alone.
func checkReproducible(t *testing.T, rec store.UsageRecord) {
	t.Helper()
	if rec.Price == nil {
		t.Fatalf("the record carries no price: %+v", rec)
	}
	if again := price.Cost(rec.Tokens(), *rec.Price); again != rec.Costs {
		t.Errorf("the row's costs %+v are not its counts %+v at its price %+v (%+v)", rec.Costs, rec.Tokens(), rec.Price.Rates, again)
	}
	if rec.CostMicros != rec.Costs.Total()+rec.HostedMicros-rec.WaivedMicros {
		t.Errorf("cost %d is not the sum of its parts %+v + hosted %d - waived %d", rec.CostMicros, rec.Costs, rec.HostedMicros, rec.WaivedMicros)
	}
	// The hosted tools' part too: the calls at the per-call prices the row's price names.
	var hosted int64
	for name, n := range rec.HostedCalls {
		hosted += n * rec.Price.HostedPerCall[name]
	}
	if hosted != rec.HostedMicros {
		t.Errorf("hosted calls %v at %v cost %d, the row says %d", rec.HostedCalls, rec.Price.HostedPerCall, hosted, rec.HostedMicros)
	}
}

// clientUsage is the usage object of a complete answer or the last usage of a stream, as the
// client received it.
func clientUsage(t *testing.T, route string, stream bool, body []byte) map[string]any {
	t.Helper()
	var last map[string]any
	visit := func(obj map[string]any) {
		if u, ok := obj["usage"].(map[string]any); ok {
			if last == nil {
				last = map[string]any{}
			}
			for k, v := range u { // Messages streams spread usage over message_start and message_delta
				last[k] = v
			}
		}
		for _, k := range []string{"message", "response"} {
			if inner, ok := obj[k].(map[string]any); ok {
				if u, ok := inner["usage"].(map[string]any); ok {
					if last == nil {
						last = map[string]any{}
					}
					for k, v := range u {
						last[k] = v
					}
				}
			}
		}
	}
	if !stream {
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("answer: %v: %s", err, body)
		}
		visit(obj)
		return last
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var obj map[string]any
		if json.Unmarshal([]byte(line), &obj) == nil {
			visit(obj)
		}
	}
	return last
}

// num reads a number at a path of nested objects.
func num(m map[string]any, path ...string) int64 {
	var v any = m
	for _, p := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return -1
		}
		v = o[p]
	}
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

// TestCachePricedOnEveryRoute: for every upstream format and every client route, JSON and
// stream, same-format and translated, a prompt-cached answer is billed kind by kind at the
// published prices to the micro-unit, the usage record explains the bill (counts per kind, the
// price and its catalog entry, each kind's cost, which add up to the cost), and the client sees
// the cache counts in its own format.
func TestCachePricedOnEveryRoute(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: standInConfig(t, nil)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	prompt := longPrompt(70_000) // the reservation covers the 62,000 input tokens reported
	n := int64(0)
	for _, kind := range []string{config.KindAnthropicMessages, config.KindOpenAIChat, config.KindOpenAIResponses} {
		for _, route := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses"} {
			family := config.FamilyChat
			if route == "/v1/messages" {
				family = config.FamilyMessages
			}
			model := "cached-" + kind + "-" + family
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s upstream, %s, stream %t", kind, route, stream), func(t *testing.T) {
					status, body := post(t, g, tenant.Key, route, inferenceBody(route, model, prompt, stream))
					if status != 200 {
						t.Fatalf("status %d: %.300s", status, body)
					}
					n++
					rec := latestUsage(t, g, tenant.Account, n)
					checkReproducible(t, rec)
					wantCost, wantCosts := int64(openAICost), openAICosts
					wantRead, wantWrite1h, wantIn := int64(50_000), int64(0), int64(52_000)
					if kind == config.KindAnthropicMessages {
						wantCost, wantCosts, wantWrite1h, wantIn = anthropicCost, anthropicCosts, 10_000, 62_000
					}
					if rec.CostMicros != wantCost || rec.Costs != wantCosts || rec.WaivedMicros != 0 {
						t.Errorf("billed %d as %+v (waived %d), want %d as %+v", rec.CostMicros, rec.Costs, rec.WaivedMicros, wantCost, wantCosts)
					}
					if rec.InputTokens != wantIn || rec.CacheReadTokens != wantRead || rec.CacheWrite1hTokens != wantWrite1h ||
						rec.CacheWrite5mTokens != 0 || rec.OutputTokens != 500 {
						t.Errorf("record counts: input %d, read %d, write 5m %d, write 1h %d, output %d",
							rec.InputTokens, rec.CacheReadTokens, rec.CacheWrite5mTokens, rec.CacheWrite1hTokens, rec.OutputTokens)
					}
					if rec.Price.Catalog == "" || rec.Price.Effective == "" {
						t.Errorf("the record's price names no catalog entry and date: %+v", rec.Price)
					}
					// An answer of the old arithmetic (every prompt token at the input price) fails here.
					if old := price.Part(wantIn, rec.Price.Input) + price.Part(500, rec.Price.Output); old == rec.CostMicros {
						t.Errorf("billed %d, the all-input arithmetic", rec.CostMicros)
					}
					u := clientUsage(t, route, stream, body)
					switch route {
					case "/v1/messages":
						if num(u, "cache_read_input_tokens") != wantRead || num(u, "input_tokens") != wantIn-wantRead-wantWrite1h ||
							num(u, "cache_creation_input_tokens") != wantWrite1h || num(u, "output_tokens") != 500 {
							t.Errorf("the Messages client's usage: %v", u)
						}
					case "/v1/chat/completions":
						if num(u, "prompt_tokens") != wantIn || num(u, "prompt_tokens_details", "cached_tokens") != wantRead || num(u, "completion_tokens") != 500 {
							t.Errorf("the chat client's usage: %v", u)
						}
					case "/v1/responses":
						if num(u, "input_tokens") != wantIn || num(u, "input_tokens_details", "cached_tokens") != wantRead || num(u, "output_tokens") != 500 {
							t.Errorf("the Responses client's usage: %v", u)
						}
					}
				})
			}
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}

// TestExampleConfigurationCachePrices: the example configuration's service-sonnet and
// service-flint-base behind stand-ins of their providers are billed what the providers charge
// for the two turns: 88,500 and 6,600 micro-units (not 193,500 and 21,600, every prompt
// token at the input price).
func TestExampleConfigurationCachePrices(t *testing.T) {
	cfg := config.Example()
	for i, p := range cfg.Providers {
		srv := httptest.NewServer(standIn(p.Kind, nil))
		t.Cleanup(srv.Close)
		cfg.Providers[i].BaseURL = srv.URL
	}
	cfg.Plans[0].StartingCreditMicros = 0
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	prompt := longPrompt(70_000)
	for i, c := range []struct {
		route, model string
		want         int64
	}{
		{"/v1/messages", "service-sonnet", anthropicCost},
		{"/v1/chat/completions", "service-flint-base", openAICost},
		{"/v1/responses", "service-flint-base", openAICost},
	} {
		status, body := post(t, g, tenant.Key, c.route, inferenceBody(c.route, c.model, prompt, false))
		if status != 200 {
			t.Fatalf("%s %s: %d %.300s", c.route, c.model, status, body)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		if rec.CostMicros != c.want {
			t.Errorf("%s on %s billed %d micro-units, want %d", c.model, c.route, rec.CostMicros, c.want)
		}
	}
}

// TestCacheWritesNeverOverspend: 200 concurrent requests whose every input token is written to
// the cache for an hour (twice the input price at Anthropic), on an account whose balance covers
// only some of them: the balance never goes below zero, the ledger sums to it, and no request's
// cost was above its reservation (nothing waived: the reservation takes input at the dearest
// kind).
func TestCacheWritesNeverOverspend(t *testing.T) {
	// The stand-in reports each request's prompt (a quarter of its bytes, the gateway estimating
	// a third) as one-hour cache writes.
	usage := func(body []byte) string {
		n := len(body) / 4
		return fmt.Sprintf(`{"input_tokens":0,"cache_creation_input_tokens":%d,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":%d},"output_tokens":500}`, n, n)
	}
	g := apitest.Start(t, apitest.Options{Config: standInConfig(t, usage)})
	const granted = 3_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	prompt := longPrompt(6_000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 200 {
		wg.Go(func() {
			status, body := post(t, g, tenant.Key, "/v1/messages", inferenceBody("/v1/messages", "cached-"+config.KindAnthropicMessages+"-messages", prompt, i%2 == 0))
			if status != 200 && status != 402 {
				t.Errorf("status %d: %.200s", status, body)
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[200] == 0 || statuses[402] == 0 {
		t.Fatalf("statuses %v: want both served and refused requests", statuses)
	}
	waitSettled(t, g, tenant.Account, int64(statuses[200]))
	balance, _ := checkBooks(t, g, tenant.Account, granted)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		checkReproducible(t, rec)
		if rec.WaivedMicros != 0 || rec.CacheWrite1hTokens == 0 || rec.Costs.CacheWrite1h == 0 {
			t.Fatalf("record %+v: waived %d (the reservation was below the cost) or no one-hour writes", rec, rec.WaivedMicros)
		}
	}
	t.Logf("%v; balance left %d", statuses, balance)
}

// TestCutStreamKeepsCacheCounts: a Messages stream that the upstream cuts after some text is
// billed for what it had reported: message_start's cache reads and one-hour writes at their
// prices (the documented shape: https://docs.anthropic.com/en/api/messages-streaming), and the
// output so far; the client gets the in-band error.
func TestCutStreamKeepsCacheCounts(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":%s}}\n\n",
			strings.Replace(anthropicUsage, `"output_tokens":500`, `"output_tokens":1`, 1))
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Cached words before the cut.\"}}\n\n")
		// The connection ends here: no message_delta, no message_stop.
	}))
	t.Cleanup(upstream.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "cut", Kind: config.KindAnthropicMessages, BaseURL: upstream.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "cut-sonnet", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 1000, ContextTokens: 200_000,
		Backend: &config.Upstream{Provider: "cut", Model: "claude-sonnet-4-5"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "cut-sonnet")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	status, body := post(t, g, tenant.Key, "/v1/messages", inferenceBody("/v1/messages", "cut-sonnet", longPrompt(70_000), true))
	if status != 200 || !strings.Contains(string(body), "event: error") {
		t.Fatalf("status %d, want 200 and an in-band error: %.500s", status, body)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	checkReproducible(t, rec)
	if rec.CacheReadTokens != 50_000 || rec.CacheWrite1hTokens != 10_000 || rec.InputTokens != 62_000 ||
		rec.Costs.Input != 6_000 || rec.Costs.CacheWrite1h != 60_000 || rec.Costs.CacheRead != 15_000 || rec.OutputTokens < 1 {
		t.Errorf("cut stream record: status %s, input %d, read %d, write 1h %d, output %d, costs %+v",
			rec.Status, rec.InputTokens, rec.CacheReadTokens, rec.CacheWrite1hTokens, rec.OutputTokens, rec.Costs)
	}
	t.Logf("status %s, cost %d (%+v)", rec.Status, rec.CostMicros, rec.Costs)
}

// TestResponsesFailureIsBilledItsUsage: a Responses upstream stream that fails the way
// wire-protocols.md §2.5 has it (the flat error event, then response.failed whose response
// carries the usage of what was generated: 1,000 input and 800 output tokens, 700 of them
// reasoning) is billed that usage on every route, relayed or translated, and the client gets
// the in-band error (trial h1: the request was billed its estimate, 9 in and 4 out).
func TestResponsesFailureIsBilledItsUsage(t *testing.T) {
	url := cannedUpstream(t, "text/event-stream", `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_f1","object":"response","created_at":1764777600,"model":"gpt-4.1-mini","status":"in_progress","output":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}

event: error
data: {"type":"error","sequence_number":2,"code":"server_error","message":"The server had an error.","param":null}

event: response.failed
data: {"type":"response.failed","sequence_number":3,"response":{"id":"resp_f1","object":"response","created_at":1764777600,"model":"gpt-4.1-mini","status":"failed","error":{"code":"server_error","message":"The server had an error."},"output":[],"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":800,"output_tokens_details":{"reasoning_tokens":700},"total_tokens":1800}}}

`)
	g, tenant := standInGateway(t, "failing", config.KindOpenAIResponses, url)
	for i, c := range []struct{ route, model, errEvent string }{
		{"/v1/responses", "failing-chat", "event: response.failed"}, // relayed as it came
		{"/v1/chat/completions", "failing-chat", `"error"`},
		{"/v1/messages", "failing-messages", "event: error"},
	} {
		// A prompt of about the 1,000 input tokens the canned answer reports, so that its
		// reservation covers them as a real upstream's count would be (the harness fails a
		// test whose requests cost more than their reservation).
		prompt := strings.Repeat("fail, please. ", 250)
		status, body := post(t, g, tenant.Key, c.route, inferenceBody(c.route, c.model, prompt, true))
		if status != 200 || !strings.Contains(string(body), c.errEvent) {
			t.Fatalf("%s: status %d, want 200 and an in-band error: %.800s", c.route, status, body)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		if rec.InputTokens != 1000 || rec.OutputTokens != 800 || rec.ReasoningTokens != 700 || rec.Status != "upstream_error" {
			t.Errorf("%s: record status %s, input %d, output %d (reasoning %d), cost %d",
				c.route, rec.Status, rec.InputTokens, rec.OutputTokens, rec.ReasoningTokens, rec.CostMicros)
		}
	}
}

// TestResponsesDoneAloneIsACut: a Responses upstream stream that ends with data: [DONE] and no
// terminal event (response.completed, .incomplete or .failed) is a cut stream, as one that just
// stops is: the client gets the in-band error (a Responses client: error and response.failed,
// and no [DONE], which the Responses API never sends) and the record says upstream_cut_off
// (trial h1: it was taken for a complete answer, status ok, and a Responses client was left
// with a response in_progress).
func TestResponsesDoneAloneIsACut(t *testing.T) {
	url := cannedUpstream(t, "text/event-stream", `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_d1","object":"response","created_at":1764777600,"model":"gpt-4.1-mini","status":"in_progress","output":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Half an answer"}

data: [DONE]

`)
	g, tenant := standInGateway(t, "done-alone", config.KindOpenAIResponses, url)
	for i, c := range []struct{ route, errEvent string }{
		{"/v1/responses", "event: response.failed"},
		{"/v1/chat/completions", `"error"`},
	} {
		status, body := post(t, g, tenant.Key, c.route, inferenceBody(c.route, "done-alone-chat", "answer, please", true))
		if status != 200 || !strings.Contains(string(body), c.errEvent) || (c.route == "/v1/responses" && strings.Contains(string(body), "[DONE]")) {
			t.Errorf("%s: status %d, want 200 and the in-band error: %.1500s", c.route, status, body)
		}
		if rec := latestUsage(t, g, tenant.Account, int64(i+1)); rec.Status != "upstream_cut_off" || rec.OutputTokens == 0 {
			t.Errorf("%s: record status %s, output %d", c.route, rec.Status, rec.OutputTokens)
		}
	}
}

// TestAnswerWithoutUsageBillsItsText: a complete (non-streamed) answer from an upstream that
// reports no usage (a server that is not quite OpenAI's) is billed its output as a stream
// without usage is, four characters a token of its text, relayed or translated (trial h1: 0
// output tokens were billed).
func TestAnswerWithoutUsageBillsItsText(t *testing.T) {
	const text = "Forty characters of answer text, exactly" // 40 characters: 10 tokens
	url := cannedUpstream(t, "application/json", fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text))
	g, tenant := standInGateway(t, "no-usage", config.KindOpenAIChat, url)
	for i, c := range []struct{ route, model string }{
		{"/v1/chat/completions", "no-usage-chat"}, // relayed as it came
		{"/v1/messages", "no-usage-messages"},     // translated
	} {
		status, body := post(t, g, tenant.Key, c.route, inferenceBody(c.route, c.model, "answer, please", false))
		if status != 200 {
			t.Fatalf("%s: %d %.500s", c.route, status, body)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		if rec.OutputTokens != 10 || rec.InputTokens == 0 {
			t.Errorf("%s: record input %d, output %d; want the output estimated from the text (10)", c.route, rec.InputTokens, rec.OutputTokens)
		}
	}
}

// TestAnswerWithoutUsageBillsItsThinking: a complete answer whose upstream reports no output
// count is billed, besides its text, the thinking it carries that the neutral answer does not
// (convert.UnmodelledOutput), which the provider bills as output: a chat-compatible server's
// reasoning (DeepSeek's message.reasoning_content, vLLM's and OpenRouter's message.reasoning,
// OpenRouter's message.reasoning_details, its summary and text entries and not its encrypted
// one, alone or beside the same text as reasoning), a Responses reasoning item's summary, a
// Messages thinking block; relayed to a client of the upstream's format and translated to the
// others alike, four characters a token. On the code before, each was billed its text's 10
// tokens and not the thinking's 100 (reasoning_details alone: task h2).
func TestAnswerWithoutUsageBillsItsThinking(t *testing.T) {
	const text = "Forty characters of answer text, exactly"                   // 40 characters: 10 tokens
	thought := strings.Repeat("Weighing the question before answering. ", 10) // 400 characters: 100 tokens
	chat := func(member string) string {
		return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1764777600,"model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant","content":%q,%q:%q},"finish_reason":"stop"}]}`, text, member, thought)
	}
	// OpenRouter's reasoning_details: a summary and a text entry count, an encrypted one does
	// not; sent beside reasoning, the same text is counted once.
	details := fmt.Sprintf(`[{"type":"reasoning.summary","summary":%q,"format":"openai-responses-v1","index":0},`+
		`{"type":"reasoning.text","text":%q,"signature":null,"format":"anthropic-claude-v1","index":1},`+
		`{"type":"reasoning.encrypted","data":%q,"format":"openai-responses-v1","index":2}]`, thought[:200], thought[200:], strings.Repeat("gAAAAB", 100))
	openrouter := func(extra string) string {
		return fmt.Sprintf(`{"id":"gen-1","object":"chat.completion","created":1764777600,"model":"openai/gpt-5","choices":[{"index":0,"message":{"role":"assistant","content":%q,%s"reasoning_details":%s},"finish_reason":"stop"}]}`, text, extra, details)
	}
	for _, up := range []struct{ name, kind, body string }{
		{"deepseek", config.KindOpenAIChat, chat("reasoning_content")},
		{"vllm", config.KindOpenAIChat, chat("reasoning")},
		{"openrouter", config.KindOpenAIChat, openrouter("")},
		{"openrouter-both", config.KindOpenAIChat, openrouter(fmt.Sprintf(`"reasoning":%q,`, thought))},
		{"reasoner", config.KindOpenAIResponses, fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1764777600,"status":"completed","model":"gpt-4.1-mini","output":[`+
			`{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":%q}]},`+
			`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}]}`, thought, text)},
		{"thinker", config.KindAnthropicMessages, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[`+
			`{"type":"thinking","thinking":%q,"signature":"c2ln"},{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":0}}`, thought, text)},
	} {
		g, tenant := standInGateway(t, up.name, up.kind, cannedUpstream(t, "application/json", up.body))
		for i, route := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
			model := up.name + "-" + config.FamilyChat
			if route == "/v1/messages" {
				model = up.name + "-" + config.FamilyMessages
			}
			status, body := post(t, g, tenant.Key, route, inferenceBody(route, model, "think first, please", false))
			if status != 200 {
				t.Fatalf("%s upstream, %s: %d %.500s", up.kind, route, status, body)
			}
			rec := latestUsage(t, g, tenant.Account, int64(i+1))
			checkReproducible(t, rec)
			if want := int64(len(text)+len(thought)) / 4; rec.OutputTokens != want {
				t.Errorf("%s upstream (%s), %s: billed %d output tokens; want the text's and the thinking's %d", up.kind, up.name, route, rec.OutputTokens, want)
			}
		}
		checkBooks(t, g, tenant.Account, 100_000_000)
	}
}

// TestAnswerWithoutUsageBillsEveryChoice: a complete chat answer to a request for several
// choices (n) whose upstream reports no output count is billed every choice's text, tool
// arguments and reasoning, as the provider bills the output of all of them, four characters a
// token. On the code before, only the first choice's was billed (10 tokens of 39).
func TestAnswerWithoutUsageBillsEveryChoice(t *testing.T) {
	const text = "Forty characters of answer text, exactly" // 40 characters: 10 tokens
	thought := strings.Repeat("Weighing it. ", 4)           // 52 characters: 13 tokens
	args := `{"city":"Lyon","days":3}`                      // 24 characters: 6 tokens
	body := fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1764777600,"model":"gpt-4.1-mini","choices":[`+
		`{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"},`+
		`{"index":1,"message":{"role":"assistant","content":%q,"reasoning_content":%q},"finish_reason":"stop"},`+
		`{"index":2,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":%q}}]},"finish_reason":"tool_calls"}]}`,
		text, text, thought, args)
	g, tenant := standInGateway(t, "chooser", config.KindOpenAIChat, cannedUpstream(t, "application/json", body))
	status, answer := post(t, g, tenant.Key, "/v1/chat/completions",
		`{"model":"chooser-chat","n":3,"max_tokens":100,"messages":[{"role":"user","content":"three ways, please"}]}`)
	if status != 200 {
		t.Fatalf("%d %.500s", status, answer)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	checkReproducible(t, rec)
	if want := int64(2*len(text)+len(thought)+len(args)) / 4; rec.OutputTokens != want {
		t.Errorf("billed %d output tokens for three choices; want all of their %d", rec.OutputTokens, want)
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}

// TestAnswerWithoutUsageBillsItsToolInput: a complete Responses answer whose upstream reports
// no output count is billed, besides its text, what the model wrote in the output items that
// are neither messages nor function calls, as a stream of the same answer is billed its
// deltas (streamconv.UnmodelledOutput): a custom_tool_call's input, a code_interpreter_call's
// code, an mcp_call's arguments, a shell_call's commands, an apply_patch_call's diff; not the
// tools' outputs. Relayed to a
// Responses client and translated to the others alike, four characters a token. On the code
// before, it was billed its text's 10 tokens and not the 115 of the tool calls.
func TestAnswerWithoutUsageBillsItsToolInput(t *testing.T) {
	const text = "Forty characters of answer text, exactly" // 40 characters: 10 tokens
	patch := strings.Repeat(`+ a line of the patch\n`, 4)   // 92 characters as sent: 23 tokens
	code := strings.Repeat(`print(sum(range(10)))\n`, 4)    // 92 characters as sent: 23 tokens
	args := strings.Repeat("search these words; ", 5)       // 100 characters: 25 tokens
	command := strings.Repeat("ls -la /tmp ", 10)           // 120 characters, in two commands: 30 tokens
	diff := strings.Repeat(`+ added line\n`, 4)             // 56 characters as sent: 14 tokens
	body := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1764777600,"status":"completed","model":"gpt-5","output":[`+
		`{"id":"ctc_1","type":"custom_tool_call","status":"completed","call_id":"call_1","name":"apply_patch","input":"%s"},`+
		`{"id":"ci_1","type":"code_interpreter_call","status":"completed","code":"%s","container_id":"cntr_1","outputs":[{"type":"logs","logs":%q}]},`+
		`{"id":"mcp_1","type":"mcp_call","server_label":"docs","name":"search","arguments":%q,"output":%q},`+
		`{"id":"sh_1","type":"shell_call","status":"completed","call_id":"call_2","action":{"commands":[%q,%q]}},`+
		`{"id":"ap_1","type":"apply_patch_call","status":"completed","call_id":"call_3","operation":{"type":"update_file","path":"main.go","diff":"%s"}},`+
		`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}]}`,
		patch, code, strings.Repeat("45\n", 100), args, strings.Repeat("a result ", 100), command[:60], command[60:], diff, text)
	g, tenant := standInGateway(t, "tooler", config.KindOpenAIResponses, cannedUpstream(t, "application/json", body))
	for i, route := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
		model := "tooler-" + config.FamilyChat
		if route == "/v1/messages" {
			model = "tooler-" + config.FamilyMessages
		}
		status, answer := post(t, g, tenant.Key, route, inferenceBody(route, model, "use your tools", false))
		if status != 200 {
			t.Fatalf("%s: %d %.500s", route, status, answer)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		checkReproducible(t, rec)
		if want := int64(len(text)+len(patch)+len(code)+len(args)+len(command)+len(diff)) / 4; rec.OutputTokens != want {
			t.Errorf("%s: billed %d output tokens; want the text's and the tool calls' %d", route, rec.OutputTokens, want)
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}

// standInGateway starts a gateway whose provider name, of kind, is the stand-in upstream at url,
// serving the models name+"-chat" and name+"-messages" (gpt-4.1-mini's catalog price), and a
// tenant with credit.
func standInGateway(t *testing.T, name, kind, url string) (*apitest.Gateway, apitest.Tenant) {
	t.Helper()
	return standInGatewayWith(t, name, kind, url, apitest.Options{})
}

// standInGatewayWith is standInGateway with the gateway's options o (its Config is made here).
func standInGatewayWith(t *testing.T, name, kind, url string, o apitest.Options) (*apitest.Gateway, apitest.Tenant) {
	t.Helper()
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: name, Kind: kind, BaseURL: url})
	for _, family := range []string{config.FamilyChat, config.FamilyMessages} {
		id := name + "-" + family
		cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
			Price: config.Price{Catalog: "gpt-4.1-mini"}, MaxOutputTokens: 1000, ContextTokens: 200_000,
			Backend: &config.Upstream{Provider: name, Model: "gpt-4.1-mini"}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Config = cfg
	g := apitest.Start(t, o)
	return g, g.NewTenant(t, "acme", 0, 100_000_000)
}

// cannedUpstream serves body, as contentType, to every request, and returns its URL.
func cannedUpstream(t *testing.T, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestNegativeUsageIsNotReported: an upstream that reports negative token counts (a broken or
// hostile OpenAI-compatible server) has said nothing usable: its answer is billed as one
// without usage (the input counted from the request, the output from the text), on every
// upstream kind, JSON and stream alike. Trial h12 D4: a JSON answer with
// {"prompt_tokens":-1000,"completion_tokens":-5} was billed 0.
func TestNegativeUsageIsNotReported(t *testing.T) {
	negative := func([]byte) string {
		return `{"prompt_tokens":-1000,"completion_tokens":-5,"total_tokens":-1005,"input_tokens":-1000,"output_tokens":-5}`
	}
	g := apitest.Start(t, apitest.Options{Config: standInConfig(t, negative)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	n := int64(0)
	for _, kind := range []string{config.KindOpenAIChat, config.KindOpenAIResponses, config.KindAnthropicMessages} {
		for _, stream := range []bool{false, true} {
			model := "cached-" + kind + "-chat"
			status, body := post(t, g, tenant.Key, "/v1/chat/completions", inferenceBody("/v1/chat/completions", model, "Say it.", stream))
			if status != 200 {
				t.Fatalf("%s stream %v: %d %.300s", kind, stream, status, body)
			}
			n++
			rec := latestUsage(t, g, tenant.Account, n)
			if rec.InputTokens <= 0 || rec.OutputTokens <= 0 || rec.CostMicros <= 0 {
				t.Errorf("%s stream %v: negative usage billed as %d input and %d output tokens, %d micro-units", kind, stream, rec.InputTokens, rec.OutputTokens, rec.CostMicros)
			}
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}

// TestTranslatedAnswerShowsItsBill: an answer the gateway writes in another format than its
// upstream's, from an upstream that reported no usable usage (counts below zero, or none),
// shows the counts it is billed, JSON and stream alike: the usage object of a chat completion
// or a Messages message, and the usage chunk or message_delta of a stream, equal its usage
// record's input and output (trial h14 D2: it showed 0 tokens while an estimate was billed).
func TestTranslatedAnswerShowsItsBill(t *testing.T) {
	negative := func([]byte) string {
		return `{"prompt_tokens":-1000,"completion_tokens":-5,"total_tokens":-1005,"input_tokens":-1000,"output_tokens":-5}`
	}
	g := apitest.Start(t, apitest.Options{Config: standInConfig(t, negative)})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	n := int64(0)
	for _, c := range []struct{ route, model string }{
		{"/v1/chat/completions", "cached-" + config.KindOpenAIResponses + "-chat"},
		{"/v1/chat/completions", "cached-" + config.KindAnthropicMessages + "-chat"},
		{"/v1/messages", "cached-" + config.KindOpenAIChat + "-messages"},
		{"/v1/messages", "cached-" + config.KindOpenAIResponses + "-messages"},
	} {
		for _, stream := range []bool{false, true} {
			status, body := post(t, g, tenant.Key, c.route, inferenceBody(c.route, c.model, "Say it, briefly, in a few words.", stream))
			if status != 200 {
				t.Fatalf("%s %s stream %v: %d %.300s", c.route, c.model, stream, status, body)
			}
			n++
			rec := latestUsage(t, g, tenant.Account, n)
			in, out, ok := shownUsage(body)
			if !ok || in != rec.InputTokens || out != rec.OutputTokens || in <= 0 || out <= 0 {
				t.Errorf("%s %s stream %v: the answer shows %d input and %d output tokens (found %v); billed %d and %d", c.route, c.model, stream, in, out, ok, rec.InputTokens, rec.OutputTokens)
			}
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}

// shownUsage reads the last usage an answer shows (a JSON answer's, or the last event's of a
// stream that has one): all input tokens (a Messages usage's input_tokens plus its cache
// counts) and the output tokens.
func shownUsage(answer []byte) (in, out int64, ok bool) {
	objects := [][]byte{answer}
	if bytes.Contains(answer, []byte("data: ")) {
		objects = nil
		for _, line := range bytes.Split(answer, []byte("\n")) {
			if d, found := bytes.CutPrefix(line, []byte("data: ")); found {
				objects = append(objects, d)
			}
		}
	}
	for _, o := range objects {
		var v struct {
			Usage *struct {
				PromptTokens             int64 `json:"prompt_tokens"`
				CompletionTokens         int64 `json:"completion_tokens"`
				InputTokens              int64 `json:"input_tokens"`
				OutputTokens             int64 `json:"output_tokens"`
				CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
				CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(o, &v) != nil || v.Usage == nil {
			continue
		}
		u := v.Usage
		in, out, ok = u.PromptTokens+u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens, u.CompletionTokens+u.OutputTokens, true
	}
	return in, out, ok
}

// TestCachedCountsArePartsOfTheInput: OpenAI's usage objects count cached tokens as a part of
// the prompt (chat's prompt_tokens_details.cached_tokens, Responses'
// input_tokens_details.cached_tokens); an upstream reporting more cached tokens than input is
// billed for the input it reported, all of it read from the cache, never for the larger count,
// JSON and stream alike; and one reporting no input but cached tokens is billed the input
// estimated from the request, of which the cached tokens are a part. Money trial D4: 900,000
// cached tokens of a 100-token prompt were billed as 900,000 input tokens (the whole
// reservation); a prompt of 0 with 500 cached tokens was billed the estimate and the 500 too.
func TestCachedCountsArePartsOfTheInput(t *testing.T) {
	var mu sync.Mutex
	usage := `{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_tokens_details":{"cached_tokens":900000},` +
		`"input_tokens":100,"output_tokens":10,"input_tokens_details":{"cached_tokens":900000}}`
	g := apitest.Start(t, apitest.Options{Config: standInConfig(t, func([]byte) string { mu.Lock(); defer mu.Unlock(); return usage })})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	n := int64(0)
	for _, kind := range []string{config.KindOpenAIChat, config.KindOpenAIResponses} {
		for _, stream := range []bool{false, true} {
			status, body := post(t, g, tenant.Key, "/v1/chat/completions", inferenceBody("/v1/chat/completions", "cached-"+kind+"-chat", "Say it.", stream))
			if status != 200 {
				t.Fatalf("%s stream %v: %d %.300s", kind, stream, status, body)
			}
			n++
			// gpt-4.1-mini: 100 cache reads at $0.10 and 10 output tokens at $1.60 a million.
			if rec := latestUsage(t, g, tenant.Account, n); rec.InputTokens != 100 || rec.CacheReadTokens != 100 || rec.CostMicros != 26 || rec.WaivedMicros != 0 {
				t.Errorf("%s stream %v: billed %d micro-units (waived %d) for %d input tokens of which %d cache reads; want 26 for 100, all read",
					kind, stream, rec.CostMicros, rec.WaivedMicros, rec.InputTokens, rec.CacheReadTokens)
			}
		}
	}
	// Clients of another format are shown the counts they are billed: the 100 input tokens,
	// all read from the cache.
	status, body := post(t, g, tenant.Key, "/v1/messages", inferenceBody("/v1/messages", "cached-"+config.KindOpenAIChat+"-messages", "Say it.", false))
	if status != 200 || !strings.Contains(string(body), `"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":100`) {
		t.Errorf("translated for a Messages client: %d %s", status, body)
	}
	status, body = post(t, g, tenant.Key, "/v1/chat/completions", `{"model":"cached-`+config.KindOpenAIResponses+`-chat","max_tokens":100,"messages":[{"role":"user","content":"Say it."}]}`)
	if status != 200 || !strings.Contains(string(body), `"prompt_tokens":100,`) || !strings.Contains(string(body), `"cached_tokens":100,`) {
		t.Errorf("translated for a chat client: %d %s", status, body)
	}
	n += 2
	mu.Lock()
	usage = `{"prompt_tokens":0,"completion_tokens":10,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":500},` +
		`"input_tokens":0,"output_tokens":10,"input_tokens_details":{"cached_tokens":500}}`
	mu.Unlock()
	for _, kind := range []string{config.KindOpenAIChat, config.KindOpenAIResponses} {
		status, body := post(t, g, tenant.Key, "/v1/chat/completions", inferenceBody("/v1/chat/completions", "cached-"+kind+"-chat", "Say it.", false))
		if status != 200 {
			t.Fatalf("%s: %d %.300s", kind, status, body)
		}
		n++
		if rec := latestUsage(t, g, tenant.Account, n); rec.InputTokens <= 0 || rec.InputTokens >= 500 || rec.CacheReadTokens > rec.InputTokens {
			t.Errorf("%s, no input reported but 500 cached: billed %d input tokens of which %d cache reads; want the request's estimate (under 500), the reads within it",
				kind, rec.InputTokens, rec.CacheReadTokens)
		}
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}
