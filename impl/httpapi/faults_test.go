package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestUpstreamFaults: each simulator fault gives the right outcome, and nothing is billed twice.
func TestUpstreamFaults(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	const granted = 50_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	paid := int64(0)
	// What the client is told for each status kept after retries: the gateway's words, never
	// the simulator's imitation of a provider's (which names an organisation and its usage).
	wantMessages := map[int]string{
		429: "the upstream is rate limited",
		502: "the upstream failed (HTTP 502)",
		529: "the upstream is overloaded",
	}
	cases := []struct {
		name       string
		r          request
		wantStatus int
		wantType   string // envelope error type, for failures
		upstream   string // simulator model whose request count is checked
		wantTries  int
		billed     bool
	}{
		{"429 with Retry-After, then success", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "a [[sim fault=429 retry_after=0.01 times=2]]", false, 16)}, 200, "", "sim-general", 3, true},
		{"429 without Retry-After, then success", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "b [[sim fault=429 times=1]]", true, 16)}, 200, "", "sim-general", 2, true},
		{"502, then success", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "c [[sim fault=502 times=1]]", false, 16)}, 200, "", "sim-general", 2, true},
		{"dropped connection before the first byte, then success", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "d [[sim fault=drop_before times=1]]", true, 16)}, 200, "", "sim-general", 2, true},
		{"429 kept after retries", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "e [[sim fault=429 retry_after=0.01]]", false, 16)}, 429, "rate_limit_error", "sim-general", 3, false},
		{"502 kept after retries", request{"POST", "/v1/chat/completions", chatBody("service-flint-base", "f [[sim fault=502]]", false, 16)}, 502, "upstream_error", "sim-general", 3, false},
		{"529 kept after retries, Messages envelope", request{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"g [[sim fault=529]]"}]}`}, 529, "overloaded_error", "sim-sonnet", 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g.Sim.Reset()
			status, h, body := do(t, c, g.URL, tc.r, bearer)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, body)
			}
			if tries := g.Sim.Requests(tc.upstream); tries != tc.wantTries {
				t.Errorf("upstream saw %d attempts, want %d", tries, tc.wantTries)
			}
			if tc.wantType != "" {
				var env struct {
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				_ = json.Unmarshal(body, &env)
				if env.Error.Type != tc.wantType {
					t.Errorf("error type %q, want %q: %s", env.Error.Type, tc.wantType, body)
				}
				if env.Error.Message != wantMessages[status] || strings.Contains(string(body), "org-sim") {
					t.Errorf("error message %q, want %q: %s", env.Error.Message, wantMessages[status], body)
				}
				if status == 429 && h.Get("Retry-After") == "" {
					t.Errorf("429 without Retry-After")
				}
			}
			if tc.billed {
				paid++
			}
			waitSettled(t, g, tenant.Account, paid)
		})
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestFusionFailover: when the chosen expert keeps failing before the first byte, service-flint
// fails over to the next expert, reports it, and bills at that expert's price.
func TestFusionFailover(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	for range 3 {
		s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultStatus, Status: 502})
	}
	client := openAIClient(g, t, tenant.Key)
	var raw *http.Response
	done, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "service-flint",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	expert := raw.Header.Get("x-tollgate-expert")
	if s.Requests("sim-general") != 3 || expert == "" || expert == "sim-openai-chat/sim-general" || done.Choices[0].Message.Content == "" {
		t.Fatalf("expert %q after %d failures at sim-general", expert, s.Requests("sim-general"))
	}
	waitSettled(t, g, tenant.Account, 1)
	recs, _ := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 1)
	if recs[0].Provider+"/"+recs[0].UpstreamModel != expert {
		t.Errorf("usage record names %s/%s, header %s", recs[0].Provider, recs[0].UpstreamModel, expert)
	}
	// The expert's own price: the default config prices sim-coder at 3/15 and sim-reasoner at
	// 1.25/10 micro-units per token... per million tokens.
	want := map[string][2]int64{"sim-anthropic/sim-coder": {3_000_000, 15_000_000}, "sim-openai-responses/sim-reasoner": {1_250_000, 10_000_000}}[expert]
	cost := (recs[0].InputTokens*want[0] + recs[0].OutputTokens*want[1] + 999_999) / 1_000_000
	if recs[0].CostMicros != cost {
		t.Errorf("billed %d, want %d at %s's price", recs[0].CostMicros, cost, expert)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestFusionFailsOverOnAnUnusableAnswer: a non-streamed answer is read whole before anything
// reaches the client, so an expert whose answer is cut off after its head fails over to the
// next expert as a failed call does (and counts against its health), and each request is billed
// once, by the expert that answered; a model with one expert answers 502, its usage record
// saying what happened, nothing billed. Trial of upstream failures D1: a fusion model whose
// preferred expert dropped its bodies answered 502 to every request, the others never tried.
func TestFusionFailsOverOnAnUnusableAnswer(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	client := openAIClient(g, t, tenant.Key)
	for i := range 3 {
		s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultDrop})
		var raw *http.Response
		done, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "service-flint",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("request %d, its first expert's answer cut off: %v", i+1, err)
		}
		if expert := raw.Header.Get("x-tollgate-expert"); expert == "sim-openai-chat/sim-general" || done.Choices[0].Message.Content == "" {
			t.Errorf("request %d answered by %q", i+1, expert)
		}
		if rec := latestUsage(t, g, tenant.Account, int64(i+1)); rec.Status != "ok" || rec.CostMicros <= 0 || rec.UpstreamModel == "sim-general" {
			t.Errorf("request %d: usage record %s by %s, %d micro-units", i+1, rec.Status, rec.UpstreamModel, rec.CostMicros)
		}
	}
	checkBooks(t, g, tenant.Account, 50_000_000)

	// One expert: nothing to fail over to.
	s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultDrop})
	status, body := post(t, g, tenant.Key, "/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"hello"}]}`)
	if status != http.StatusBadGateway || !strings.Contains(string(body), "the upstream answer was cut off") {
		t.Errorf("a single expert's answer cut off: %d %s", status, body)
	}
	if rec := latestUsage(t, g, tenant.Account, 4); rec.Status != "upstream_read_failed" || rec.CostMicros != 0 {
		t.Errorf("its usage record: %s, %d micro-units", rec.Status, rec.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestFusionAnswerCarryingAnError: a 200 whose body is an error (as some OpenAI-compatible
// servers answer) fails over to the next expert when the upstream failed, and is the client's
// 400, no other expert asked, when the error says the request is at fault.
func TestFusionAnswerCarryingAnError(t *testing.T) {
	var body atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body.Load().(string))
	}))
	t.Cleanup(up.Close)
	s := sim.New(sim.Options{})
	cfg := moneyConfig(t)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "errs", Kind: config.KindOpenAIChat, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "err-fusion", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "gpt-4.1-mini"}, MaxOutputTokens: 1000, Experts: []config.Upstream{
			{Provider: "errs", Model: "gpt-4.1-mini", Strengths: []string{"general", "fast"}},
			{Provider: "sim-openai-chat", Model: "sim-general", Strengths: []string{"code"}}}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "err-fusion")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	req := `{"model":"err-fusion","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`

	body.Store(`{"error":{"type":"server_error","message":"the model is overloaded","code":null}}`)
	status, h, answer := do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions", req}, map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != http.StatusOK || h.Get("x-tollgate-expert") != "sim-openai-chat/sim-general" || s.Requests("sim-general") != 1 {
		t.Errorf("a 200 carrying a server error: %d from %q (sim-general asked %d times): %s", status, h.Get("x-tollgate-expert"), s.Requests("sim-general"), answer)
	}

	body.Store(`{"error":{"type":"invalid_request_error","message":"'temperature' is out of range","param":"temperature","code":null}}`)
	status, _, answer = do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions", req}, map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != http.StatusBadRequest || !strings.Contains(string(answer), "out of range") || s.Requests("sim-general") != 1 {
		t.Errorf("a 200 carrying a refusal of the request: %d (sim-general asked %d times): %s", status, s.Requests("sim-general"), answer)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestInBandErrorMidStream: an upstream failure after the first byte reaches the client as the
// format's in-band error; what was produced is billed once.
func TestInBandErrorMidStream(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	ctx := context.Background()

	oc := openAIClient(g, t, tenant.Key)
	stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "chat-via-messages",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x [[sim fault=midstream after=3]]")}})
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err == nil || n == 0 {
		t.Errorf("chat: %d chunks then err %v; want chunks then an in-band error", n, err)
	}

	ac := anthropicClient(g, t, tenant.Key)
	ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "messages-via-chat", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("y [[sim fault=midstream after=3]]"))}})
	for ms.Next() {
	}
	var apiErr *anthropic.Error
	if err := ms.Err(); !errors.As(err, &apiErr) {
		t.Errorf("messages: err %v, want an in-band error event", err)
	} else if !strings.Contains(err.Error(), "the upstream failed while streaming the answer") && !strings.Contains(err.Error(), "the upstream is overloaded") {
		// The upstream's own words stay in the log: they may name the operator's account.
		t.Errorf("messages: in-band error %v, want the gateway's words", err)
	}

	rs := oc.Responses.NewStreaming(ctx, responsesParams("test-responses", "z [[sim fault=midstream after=3]]"))
	var types []string
	for rs.Next() {
		types = append(types, string(rs.Current().Type))
	}
	if len(types) < 2 || types[len(types)-1] != "response.failed" || !strings.Contains(strings.Join(types, ","), "error") {
		t.Errorf("responses events %v: want an error event and response.failed last", types)
	}
	waitSettled(t, g, tenant.Account, 3)
	recs, _ := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	for _, r := range recs {
		if r.Status != "upstream_error" || r.OutputTokens == 0 {
			t.Errorf("usage of a failed stream: %+v", r)
		}
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestFusionRefusalsStayWithTheCaller: an upstream refusing one tenant's requests (a 400 is the
// caller's doing) does not count against the expert's health, so another tenant's traffic stays
// where the router put it.
func TestFusionRefusalsStayWithTheCaller(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	alice := g.NewTenant(t, "alice", 0, 50_000_000)
	bob := g.NewTenant(t, "bob", 0, 50_000_000)
	c := g.Client(t)
	chat := request{"POST", "/v1/chat/completions", chatBody("service-flint", "hello", false, 16)}
	status, h, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + bob.Key})
	before := h.Get("x-tollgate-expert")
	if status != 200 || before == "" {
		t.Fatalf("%d %q: %s", status, before, body)
	}
	model := strings.SplitN(before, "/", 2)[1]
	for range 3 {
		s.Enqueue(model, sim.Fault{Kind: sim.FaultStatus, Status: 400})
	}
	for range 3 {
		if status, _, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + alice.Key}); status != 400 {
			t.Fatalf("refused upstream: %d %s", status, body)
		}
	}
	for range 2 {
		status, h, body = do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + bob.Key})
		if after := h.Get("x-tollgate-expert"); status != 200 || after != before {
			t.Fatalf("after another tenant's refused requests: %d, expert %q (was %q): %s", status, after, before, body)
		}
	}
}

// TestFusionServesWhatOneExpertCannot: a field the expert the router ranked first cannot honour
// moves the request to an expert that can, instead of refusing it; a 400 remains only when no
// expert can.
func TestFusionServesWhatOneExpertCannot(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	// A long requested output ranks the Responses expert first; it cannot honour stop sequences.
	long := `{"model":"service-flint","max_tokens":5000,"messages":[{"role":"user","content":"write a story"}]}`
	_, h, _ := do(t, c, g.URL, request{"POST", "/v1/chat/completions", long}, bearer)
	if first := h.Get("x-tollgate-expert"); first != "sim-openai-responses/sim-reasoner" {
		t.Fatalf("the premise changed: a long output went to %q", first)
	}
	withStop := `{"model":"service-flint","max_tokens":5000,"stop":["\n\n"],"messages":[{"role":"user","content":"write a story"}]}`
	status, h, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", withStop}, bearer)
	if expert := h.Get("x-tollgate-expert"); status != 200 || expert == "" || expert == "sim-openai-responses/sim-reasoner" {
		t.Fatalf("stop sequences on service-flint: %d via %q: %s", status, expert, body)
	}
	// A model whose only expert cannot honour a field still refuses it, naming the field.
	status, _, body = do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"chat-via-messages","temperature":1.2,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 400 || !strings.Contains(string(body), `"param":"temperature"`) {
		t.Errorf("temperature 1.2 through a Messages upstream: %d %s", status, body)
	}
}

// TestOpeningErrorIsRetried: Anthropic can open a 200 stream with an error event before any
// content (message_start, then `event: error` with overloaded_error: docs.claude.com, "Errors"
// and "Streaming Messages"); no client has seen anything of it yet, so it is a failed try like a
// 529 status (trial h1: it reached the client as an in-band error, with no retry or failover).
// Twice, then an answer: the client's stream is whole and billed once. Every try: the client
// gets the 529 a status would have given, and nothing is billed.
func TestOpeningErrorIsRetried(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	const granted = 50_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	ac := anthropicClient(g, t, tenant.Key)
	stream := ac.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "service-sonnet", MaxTokens: 32,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x [[sim fault=midstream after=0 times=2]]"))}})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || len(msg.Content) == 0 || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("stream: %v, message %+v", err, msg)
	}
	if n := g.Sim.Requests("sim-sonnet"); n != 3 {
		t.Errorf("the upstream saw %d tries, want 3", n)
	}
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil || len(recs) != 1 || recs[0].Status != "ok" || recs[0].OutputTokens == 0 {
		t.Fatalf("usage %+v (%v): want one record of the answer", recs, err)
	}

	g.Sim.Reset()
	c := g.Client(t)
	status, _, body := do(t, c, g.URL, request{"POST", "/v1/messages",
		`{"model":"service-sonnet","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"y [[sim fault=midstream after=0]]"}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != 529 || !strings.Contains(string(body), `"overloaded_error"`) || !strings.Contains(string(body), "the upstream is overloaded") {
		t.Errorf("every try failing: %d %s, want 529 overloaded_error", status, body)
	}
	if n := g.Sim.Requests("sim-sonnet"); n != 3 {
		t.Errorf("the upstream saw %d tries, want 3", n)
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestFusionStreamFailsOverBeforeItsFirstOutput: a streamed answer whose expert fails after its
// head but before its first output (an in-band overload right after the opening events, or
// the connection dropped) fails over to the next expert unseen: the client, on the chat and
// the Responses routes, gets one whole stream with no error, billed once by the expert that
// answered, whose X-Tollgate-Expert names the expert that served it (the response's head
// waits for the first event while the events are held); the failed expert was asked once. A
// model with one expert has nothing to fail over to: its client gets the in-band error, and
// nothing is billed. Trial of upstream failures D8.
func TestFusionStreamFailsOverBeforeItsFirstOutput(t *testing.T) {
	ctx := context.Background()
	faults := []sim.Fault{{Kind: sim.FaultMidstream, Status: 529}, {Kind: sim.FaultDrop}}
	for _, f := range faults {
		for _, route := range []string{"chat", "responses"} {
			t.Run(route+", "+f.Kind.String(), func(t *testing.T) {
				// A gateway of its own: the router ranks an expert that failed lower, and the
				// next request might not try it first.
				s := sim.New(sim.Options{})
				g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
				tenant := g.NewTenant(t, "acme", 0, 50_000_000)
				client := openAIClient(g, t, tenant.Key)
				s.Enqueue("sim-general", f)
				var raw *http.Response
				if route == "chat" {
					stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "service-flint",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}, option.WithResponseInto(&raw))
					var text strings.Builder
					for stream.Next() {
						for _, c := range stream.Current().Choices {
							text.WriteString(c.Delta.Content)
						}
					}
					if err := stream.Err(); err != nil || text.Len() == 0 {
						t.Fatalf("the stream: %q, err %v; want a whole answer from the next expert", text.String(), err)
					}
				} else {
					rs := client.Responses.NewStreaming(ctx, responsesParams("service-flint", "hello"), option.WithResponseInto(&raw))
					var types []string
					for rs.Next() {
						types = append(types, rs.Current().Type)
					}
					if err := rs.Err(); err != nil || len(types) == 0 || types[len(types)-1] != "response.completed" || slices.Contains(types, "error") || slices.Contains(types, "response.failed") {
						t.Fatalf("the stream's events %v, err %v; want a whole answer ending in response.completed", types, err)
					}
					if strings.Count(" "+strings.Join(types, " ")+" ", " response.created ") != 1 || types[0] != "response.created" {
						t.Errorf("the stream's events %v: want one response.created, first", types)
					}
				}
				if n := s.Requests("sim-general"); n != 1 {
					t.Errorf("the failing expert was asked %d times, want 1", n)
				}
				rec := latestUsage(t, g, tenant.Account, 1)
				if rec.Status != "ok" || rec.CostMicros <= 0 || rec.UpstreamModel == "sim-general" {
					t.Errorf("usage record %s by %s, %d micro-units; want ok by the next expert", rec.Status, rec.UpstreamModel, rec.CostMicros)
				}
				if raw == nil {
					t.Fatal("no response head")
				}
				if expert := raw.Header.Get("x-tollgate-expert"); expert != rec.Provider+"/"+rec.UpstreamModel || expert == "sim-openai-chat/sim-general" {
					t.Errorf("X-Tollgate-Expert %q; want the expert that served the stream, %s/%s", expert, rec.Provider, rec.UpstreamModel)
				}
				if ct := raw.Header.Get("Content-Type"); raw.StatusCode != http.StatusOK || ct != "text/event-stream; charset=utf-8" || raw.Header.Get("Cache-Control") != "no-cache" {
					t.Errorf("the head: %d, Content-Type %q, Cache-Control %q", raw.StatusCode, ct, raw.Header.Get("Cache-Control"))
				}
				checkBooks(t, g, tenant.Account, 50_000_000)
			})
		}
	}

	// One expert: the in-band error reaches the client, and nothing is billed.
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultMidstream, Status: 529})
	client := openAIClient(g, t, tenant.Key)
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "service-flint-base",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "the upstream failed while streaming the answer") {
		t.Errorf("a single expert's overload before its first output: err %v, want the in-band error", err)
	}
	if rec := latestUsage(t, g, tenant.Account, 1); rec.Status != "upstream_error" || rec.CostMicros != 0 {
		t.Errorf("its usage record: %s, %d micro-units", rec.Status, rec.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestFusionStreamEveryExpertFailing: a fusion model's stream whose first expert fails before
// its first output, and whose other experts all refuse the request, ends as a stream with one
// expert does: a 200 event stream carrying the first expert's opening events and in-band error,
// its head (held until then) and its usage record both naming that expert, nothing billed.
func TestFusionStreamEveryExpertFailing(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultMidstream, Status: 529})
	for _, m := range []string{"sim-coder", "sim-reasoner"} {
		for range 3 {
			s.Enqueue(m, sim.Fault{Kind: sim.FaultStatus, Status: 502})
		}
	}
	status, head, body := postRaw(t, http.DefaultClient, g, tenant.Key, "/v1/chat/completions", chatBody("service-flint", "hello", true, 16))
	if ct := head.Get("Content-Type"); status != http.StatusOK || ct != "text/event-stream; charset=utf-8" ||
		!strings.Contains(string(body), "data: {\"error\":") || !strings.Contains(string(body), "the upstream failed while streaming the answer") {
		t.Errorf("%d %q, want the in-band error in an event stream: %s", status, ct, body)
	}
	if n := s.Requests("sim-general"); n != 1 || s.Requests("sim-coder") != 3 || s.Requests("sim-reasoner") != 3 {
		t.Errorf("asked sim-general %d, sim-coder %d, sim-reasoner %d times; want 1, 3, 3", n, s.Requests("sim-coder"), s.Requests("sim-reasoner"))
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if expert := head.Get("x-tollgate-expert"); expert != "sim-openai-chat/sim-general" || rec.UpstreamModel != "sim-general" || rec.Status != "upstream_error" || rec.CostMicros != 0 {
		t.Errorf("X-Tollgate-Expert %q, usage record %s by %s, %d micro-units", expert, rec.Status, rec.UpstreamModel, rec.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestFusionStreamHeadGoesWithAHeartbeat: while a fusion model's stream holds its opening
// events (another expert could still take over), the response's head waits for the first
// event; a heartbeat due before it commits the head, with the event stream's status and
// headers and the expert serving at that moment, and the stream then goes on to its end.
func TestFusionStreamHeadGoesWithAHeartbeat(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Heartbeat: 40 * time.Millisecond})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	// The expert sends its head, then nothing for 300 ms, then its whole answer.
	status, head, body := postRaw(t, http.DefaultClient, g, tenant.Key, "/v1/chat/completions",
		chatBody("service-flint", "hello [[sim fault=stall ms=300 after=0]]", true, 16))
	out := string(body)
	if !strings.HasPrefix(out, ": keep-alive\n\n") || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Errorf("want heartbeats, then the whole stream:\n%s", out)
	}
	if ct := head.Get("Content-Type"); status != http.StatusOK || ct != "text/event-stream; charset=utf-8" || head.Get("Cache-Control") != "no-cache" || head.Get("X-Accel-Buffering") != "no" {
		t.Errorf("the head: %d, Content-Type %q, Cache-Control %q", status, ct, head.Get("Cache-Control"))
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if expert := head.Get("x-tollgate-expert"); rec.Status != "ok" || expert != rec.Provider+"/"+rec.UpstreamModel {
		t.Errorf("X-Tollgate-Expert %q, usage record %s by %s/%s", expert, rec.Status, rec.Provider, rec.UpstreamModel)
	}
}

// failingOverStream starts a gateway whose service-flint stream fails over: its first expert,
// sim-general, sends an in-band 529 before its first output, and the next ones stay silent for
// 3 s before their heads; with a tenant holding $50 of credit.
func failingOverStream(t *testing.T) (*sim.Simulator, *apitest.Gateway, apitest.Tenant) {
	t.Helper()
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	s.Enqueue("sim-general", sim.Fault{Kind: sim.FaultMidstream, Status: 529})
	for _, m := range []string{"sim-coder", "sim-reasoner"} {
		s.Enqueue(m, sim.Fault{Kind: sim.FaultStallBefore, Delay: 3 * time.Second})
	}
	return s, g, tenant
}

// TestClientGoneWhileAStreamFailsOverIsBilledItsInput: a fusion model's stream whose first
// expert fails before its first output fails over to the next expert, which has the request
// and has not answered yet when the client leaves. That expert's provider has the prompt and
// bills it, so the request is billed its input, status client_disconnected, its usage record
// naming that expert: as a client that leaves before any expert answered is
// (TestClientGoneBeforeTheAnswerIsBilledItsInput). It was billed nothing, its record naming the
// first expert, whose failed try is not billed, with that try's status (upstream_error), as if
// no other upstream had the prompt.
func TestClientGoneWhileAStreamFailsOverIsBilledItsInput(t *testing.T) {
	s, g, tenant := failingOverStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(chatBody("service-flint", "hello", true, 16)))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err == nil {
			t.Fatalf("answered %d before the client left", res.StatusCode)
		}
	}
	cancel()
	if n := s.Requests("sim-general"); n != 1 {
		t.Fatalf("the failing expert was asked %d times, want 1", n)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.Status != "client_disconnected" || rec.InputTokens <= 0 || rec.OutputTokens != 0 || rec.CostMicros <= 0 || rec.UpstreamModel == "sim-general" {
		t.Errorf("usage after the client left while the next expert had the request: %s by %s, %d input, %d output, %d micro-units; "+
			"want client_disconnected by the next expert, billed its input", rec.Status, rec.UpstreamModel, rec.InputTokens, rec.OutputTokens, rec.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestShutdownWhileAStreamFailsOverIsToldToRetry: a fusion model's stream whose first expert
// fails before its first output fails over to the next expert, which has the request and has
// not answered when the shutdown's grace period ends. The client is told to retry (the
// shutdown's overloaded error, as a request whose upstream is silent then is), and the usage
// record names that expert with status shutdown, billed nothing. It got the first expert's
// failure ("upstream" error), its record naming the first expert with that try's status
// (upstream_error).
func TestShutdownWhileAStreamFailsOverIsToldToRetry(t *testing.T) {
	s, g, tenant := failingOverStream(t)
	time.AfterFunc(700*time.Millisecond, g.EndStreams)
	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(chatBody("service-flint", "hello", true, 16)))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "the gateway is shutting down; retry the request") || !strings.Contains(string(body), "overloaded") {
		t.Errorf("answer at the end of grace during a failover: %d %s", res.StatusCode, body)
	}
	if n := s.Requests("sim-general"); n != 1 {
		t.Fatalf("the failing expert was asked %d times, want 1", n)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.Status != "shutdown" || rec.CostMicros != 0 || rec.UpstreamModel == "sim-general" {
		t.Errorf("usage after the end of grace while the next expert had the request: %s by %s, %d micro-units; "+
			"want shutdown by the next expert, billed nothing", rec.Status, rec.UpstreamModel, rec.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}
