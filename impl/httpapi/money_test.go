package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
)

// moneyConfig adds "pricey", a chat model on the chat simulator at 1000 micro-units per token.
func moneyConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := contractConfig(t)
	cfg.Models = append(cfg.Models, config.Model{ID: "pricey", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000_000, OutputPerMTok: 1_000_000_000}, MaxOutputTokens: 64,
		Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "sim-pricey"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "pricey")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// waitSettled waits until the account's usage records number n (the meter flushes in batches).
func waitSettled(t *testing.T, g *apitest.Gateway, account store.Account, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		records, _, err := g.Store.UsageTotals(context.Background(), account.ID)
		if err != nil {
			t.Fatal(err)
		}
		if records == n {
			return
		}
		if records > n || time.Now().After(deadline) {
			t.Fatalf("usage records: %d, want %d", records, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// latestUsage waits until the account's usage records number n and returns the newest.
func latestUsage(t *testing.T, g *apitest.Gateway, account store.Account, n int64) store.UsageRecord {
	t.Helper()
	waitSettled(t, g, account, n)
	recs, err := g.Store.UsageRecords(context.Background(), account.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	return recs[0]
}

// checkBooks asserts that the ledger sums to the balance, which is the grants minus the usage.
func checkBooks(t *testing.T, g *apitest.Gateway, account store.Account, granted int64) (balance, usage int64) {
	t.Helper()
	ctx := context.Background()
	balance, err := g.Store.Balance(ctx, account.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := g.Store.LedgerSum(ctx, account.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, usage, err = g.Store.UsageTotals(ctx, account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if balance < 0 || sum != balance || granted-usage != balance {
		t.Fatalf("books: balance %d, ledger sum %d, granted %d - usage %d", balance, sum, granted, usage)
	}
	return balance, usage
}

func chatBody(model, prompt string, stream bool, maxTokens int) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"stream":%t,"max_tokens":%d}`, model, prompt, stream, maxTokens)
}

// TestConcurrentSpendNeverOverdraws: 200 concurrent requests, streaming and not, at an account
// whose balance covers only some of them. The balance never goes below zero and the ledger sums
// to the balance change.
func TestConcurrentSpendNeverOverdraws(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	const granted = 600_000 // a request reserves up to ~64,000 and costs ~20,000
	tenant := g.NewTenant(t, "acme", 0, granted)
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			stream := i%2 == 0
			req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(chatBody("pricey", fmt.Sprintf("hello %d", i), stream, 64)))
			req.Header.Set("Authorization", "Bearer "+tenant.Key)
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 402 && (!strings.Contains(string(body), "insufficient_quota") || res.Header.Get("x-should-retry") != "false") {
				t.Errorf("402 envelope: %s %v", body, res.Header)
			}
			if res.StatusCode == 200 && stream && !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
				t.Errorf("stream did not finish: %s", body)
			}
			mu.Lock()
			statuses[res.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[200] == 0 || statuses[402] == 0 || statuses[200]+statuses[402] != 200 {
		t.Fatalf("statuses %v: want some paid and some refused, nothing else", statuses)
	}
	waitSettled(t, g, tenant.Account, int64(statuses[200]))
	balance, usage := checkBooks(t, g, tenant.Account, granted)
	t.Logf("statuses %v; usage %d, balance %d", statuses, usage, balance)
	entries, err := g.Store.LedgerEntries(context.Background(), tenant.Account.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Reason == store.ReasonUsage {
			if seen[e.IdempotencyKey] {
				t.Errorf("request billed twice: %s", e.IdempotencyKey)
			}
			seen[e.IdempotencyKey] = true
		}
	}
	if len(seen) != statuses[200] {
		t.Errorf("%d usage entries for %d paid requests", len(seen), statuses[200])
	}
}

// TestCreditsReflectUsageWithinASecond: after a request, GET /v1/credits shows the charge
// within a second.
func TestCreditsReflectUsageWithinASecond(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	if status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions", chatBody("pricey", "hi", false, 16)}, bearer); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	done := time.Now()
	for {
		_, _, body := do(t, c, g.URL, request{"GET", "/v1/credits", ""}, bearer)
		var bal struct {
			BalanceMicros int64 `json:"balance_micros"`
		}
		if err := json.Unmarshal(body, &bal); err != nil {
			t.Fatal(err)
		}
		if bal.BalanceMicros < 1_000_000 {
			t.Logf("usage visible after %v", time.Since(done))
			break
		}
		if time.Since(done) > time.Second {
			t.Fatalf("balance still %d a second after the request", bal.BalanceMicros)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInsufficientCreditIs402InEachEnvelope: an account that cannot cover the worst case gets
// 402 saying what is needed, with x-should-retry false.
func TestInsufficientCreditIs402InEachEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 10)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for _, r := range []request{
		{"POST", "/v1/chat/completions", chatBody("pricey", "hi", false, 16)},
		{"POST", "/v1/responses", `{"model":"service-flint","input":"hi"}`},
		{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":4000,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		status, h, body := do(t, c, g.URL, r, bearer)
		if status != 402 || h.Get("x-should-retry") != "false" || !strings.Contains(string(body), "needs up to") ||
			!strings.Contains(string(body), "10 ($0.000010) is available to it") {
			t.Errorf("%s: %d %v %s", r.path, status, h, body)
		}
		if r.path == "/v1/messages" && !strings.Contains(string(body), "billing_error") {
			t.Errorf("Messages 402 type: %s", body)
		}
	}
	if g.Sim.TotalRequests() != 0 {
		t.Errorf("an unpaid request reached the upstream")
	}
}

// TestClientDisconnectIsBilled: a client dropping mid-stream is billed for what the upstream
// produced.
func TestClientDisconnectIsBilled(t *testing.T) {
	s := sim.New(sim.Options{TokensPerSecond: 40})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(chatBody("pricey", "tell me a long story [[sim words=60]]", true, 64)))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	events := 0
	for sc.Scan() && events < 6 {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	cancel()
	res.Body.Close()
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if r.Status != "client_disconnected" || r.OutputTokens <= 0 || r.OutputTokens >= 60 || r.CostMicros <= 0 {
		t.Fatalf("usage after a disconnect: %+v", r)
	}
	checkBooks(t, g, tenant.Account, 10_000_000)
}

// TestCutStreamBillsTheRequestsInput: a stream cut short before the upstream said its input
// count (chat and Responses upstreams report usage with their last event) bills the input as
// convert.BilledInputTokens counts the request (four bytes a token, 3 a message, 3 for the
// reply: OpenAI's published rule of thumb and message framing), not the reservation's cautious
// estimate: a chat client relayed to a chat upstream, and Messages clients translated to chat
// and Responses upstreams. On the code before, each was billed the reservation's estimate
// (for the relayed chat request, a third of its whole body's bytes).
func TestCutStreamBillsTheRequestsInput(t *testing.T) {
	s := sim.New(sim.Options{TokensPerSecond: 40})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000_000)
	prompt := strings.Repeat("pack my box with five dozen liquor jugs ", 70) + "[[sim words=300]]"
	for i, c := range []struct {
		path   string
		format llm.Format
		body   string
	}{
		{"/v1/chat/completions", llm.FormatChat, chatBody("service-flint-base", prompt, true, 400)},
		{"/v1/messages", llm.FormatMessages, fmt.Sprintf(`{"model":"messages-via-chat","max_tokens":400,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)},
		{"/v1/messages", llm.FormatMessages, fmt.Sprintf(`{"model":"messages-via-responses","max_tokens":400,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)},
	} {
		req, err := convert.DecodeRequest(c.format, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		want := int64(convert.BilledInputTokens(req, pricecatalog.DefaultImageTokens)) // (no images)
		ctx, cancel := context.WithCancel(context.Background())
		hr, _ := http.NewRequestWithContext(ctx, "POST", g.URL+c.path, strings.NewReader(c.body))
		hr.Header.Set("Authorization", "Bearer "+tenant.Key)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("anthropic-version", "2023-06-01")
		res, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		for events := 0; events < 8 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "data: ") {
				events++
			}
		}
		cancel()
		res.Body.Close()
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		if rec.Status != "client_disconnected" || rec.OutputTokens <= 0 || rec.OutputTokens >= 300 {
			t.Errorf("%s %s: a cut stream's record %+v", c.path, req.Model, rec)
		}
		if rec.InputTokens != want {
			t.Errorf("%s %s: billed %d input tokens, want %d (the cautious estimate is %d)", c.path, req.Model, rec.InputTokens, want, convert.EstimateInputTokens(req, pricecatalog.DefaultImageTokens))
		}
	}
	checkBooks(t, g, tenant.Account, 1_000_000_000)
}

// TestCutStreamBillsItsThinking: a stream cut after some thinking (a Messages upstream's
// thinking deltas, a Responses upstream's reasoning-summary deltas, a chat upstream's reasoning
// deltas: DeepSeek's delta.reasoning_content, vLLM's and OpenRouter's delta.reasoning,
// OpenRouter's delta.reasoning_details sent alone, its reasoning.text and reasoning.summary
// entries counted and its reasoning.encrypted one not), before
// the upstream reported any output count, is billed at least that thinking's estimated tokens
// (four characters a token) at the output rate, on every route: relayed to a client of the
// upstream's format, which sees the thinking, and translated to the other formats, whose
// clients do not but whose provider bills it all the same. The stream is cut either way: the
// upstream breaks off after the thinking, or the client leaves once the text that follows it
// has come. On the code before, the translated routes were billed no output for the thinking
// (task h7: 0 output tokens when the upstream broke off, the 11 characters of text's 3 when the
// client left); the relayed ones were billed it. A chat upstream's reasoning was billed on no
// route (0 output tokens when the upstream broke off, the text's 3 when the client left), and
// OpenRouter's reasoning_details were billed on no route (task h2: the same), nor the thinking
// of a Messages or Responses stream whose events have no event: line, which the decoders name
// by their data's type (task h2: the same).
func TestCutStreamBillsItsThinking(t *testing.T) {
	const deltas = 5
	thought := strings.Repeat("Weighing the question before answering. ", 2) // 80 characters
	want := int64((deltas*len(thought) + 3) / 4)
	var messages, responses, deepseek, vllm, openrouter strings.Builder
	chatChunk := func(delta string) string {
		return `data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1764777600,"model":"deepseek-reasoner","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	deepseek.WriteString(chatChunk(`{"role":"assistant","content":null,"reasoning_content":""}`))
	vllm.WriteString(chatChunk(`{"role":"assistant","content":""}`))
	openrouter.WriteString(chatChunk(`{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAB","format":"openai-responses-v1","index":0}]}`))
	messages.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n")
	messages.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n")
	responses.WriteString("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_t1\",\"object\":\"response\",\"created_at\":1764777600,\"model\":\"gpt-4.1-mini\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
	responses.WriteString("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"summary\":[]}}\n\n")
	responses.WriteString("event: response.reasoning_summary_part.added\ndata: {\"type\":\"response.reasoning_summary_part.added\",\"sequence_number\":2,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}}\n\n")
	for i := range deltas {
		fmt.Fprintf(&messages, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":%q}}\n\n", thought)
		fmt.Fprintf(&responses, "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"sequence_number\":%d,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"delta\":%q}\n\n", 3+i, thought)
		deepseek.WriteString(chatChunk(fmt.Sprintf(`{"content":null,"reasoning_content":%q}`, thought)))
		vllm.WriteString(chatChunk(fmt.Sprintf(`{"reasoning":%q}`, thought)))
		entry := fmt.Sprintf(`{"type":"reasoning.text","text":%q,"format":"anthropic-claude-v1","index":1}`, thought)
		if i%2 == 1 {
			entry = fmt.Sprintf(`{"type":"reasoning.summary","summary":%q,"format":"openai-responses-v1","index":1}`, thought)
		}
		openrouter.WriteString(chatChunk(`{"content":null,"reasoning_details":[` + entry + `]}`))
	}
	// What follows the thinking when the client is to leave: a text the client waits for.
	const text = "Hello-there"
	chatText := chatChunk(`{"content":"` + text + `"}`)
	messagesText := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + text + "\"}}\n\n"
	responsesText := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":8,\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}\n\n" +
		"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":9,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":10,\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"" + text + "\"}\n\n"
	for _, up := range []struct{ name, kind, thinking, text string }{
		{"thinker", config.KindAnthropicMessages, messages.String(), messagesText},
		{"reasoner", config.KindOpenAIResponses, responses.String(), responsesText},
		{"deepseek", config.KindOpenAIChat, deepseek.String(), chatText},
		{"vllm", config.KindOpenAIChat, vllm.String(), chatText},
		{"openrouter", config.KindOpenAIChat, openrouter.String(), chatText},
		// A compatible server's stream whose events have no event: line, named by their data's
		// type alone.
		{"thinker-nameless", config.KindAnthropicMessages, withoutEventNames(messages.String()), withoutEventNames(messagesText)},
		{"reasoner-nameless", config.KindOpenAIResponses, withoutEventNames(responses.String()), withoutEventNames(responsesText)},
	} {
		g, tenant := standInGateway(t, up.name, up.kind, thinkingUpstream(t, up.thinking, up.text))
		n := int64(0)
		for _, leaves := range []bool{false, true} {
			for _, route := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
				model := up.name + "-" + config.FamilyChat
				if route == "/v1/messages" {
					model = up.name + "-" + config.FamilyMessages
				}
				cut := "upstream_cut_off"
				if leaves {
					cut = "client_disconnected"
					leaveAfter(t, g, tenant.Key, route, inferenceBody(route, model, "think first, then wait for me", true), text)
				} else if status, body := post(t, g, tenant.Key, route, inferenceBody(route, model, "think first, please", true)); status != 200 {
					t.Fatalf("%s %s: %d %.500s", up.kind, route, status, body)
				}
				n++
				rec := latestUsage(t, g, tenant.Account, n)
				checkReproducible(t, rec)
				least := price.Cost(price.Tokens{Output: want}, *rec.Price).Output
				if rec.Status != cut || rec.OutputTokens < want || rec.Costs.Output < least {
					t.Errorf("%s upstream, %s, %s: status %s, %d output tokens at %d micro-units; want at least the thinking's %d tokens at %d",
						up.kind, route, cut, rec.Status, rec.OutputTokens, rec.Costs.Output, want, least)
				}
			}
		}
		checkBooks(t, g, tenant.Account, 100_000_000)
	}
}

// TestFusionStreamCutAfterThinkingIsBilled: thinking is a stream's first output, translated
// as relayed (exchange.Stream: the events before it may be held back for a failover): a fusion
// model's Messages expert whose stream breaks off after 400 characters of thinking is not
// failed over to the next expert as a stream that produced nothing would be, but billed the
// thinking, which its provider bills, and its client gets the in-band error, on the chat route
// (translated) as on the Messages route (relayed); so is a chat expert's stream that breaks off
// after 400 characters of reasoning (DeepSeek's delta.reasoning_content). On the code before,
// the Messages expert's stream failed over unbilled on the chat route, and the chat expert's on
// both routes: both experts were asked, and no output was billed.
func TestFusionStreamCutAfterThinkingIsBilled(t *testing.T) {
	thought := strings.Repeat("Weighing the question before answering. ", 10) // 400 characters
	want := int64((len(thought) + 3) / 4)
	messages := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"" + thought + "\"}}\n\n"
	chat := `data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1764777600,"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-r1","object":"chat.completion.chunk","created":1764777600,"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"` + thought + `"},"finish_reason":null}]}` + "\n\n"
	for _, up := range []struct{ name, kind, body string }{
		{"thinkers", config.KindAnthropicMessages, messages},
		{"reasoners", config.KindOpenAIChat, chat},
	} {
		var asked atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			asked.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, up.body) // then the stream breaks off
		}))
		t.Cleanup(srv.Close)
		cfg := config.Default()
		var experts []config.Upstream
		for _, name := range []string{up.name + "-a", up.name + "-b"} {
			cfg.Providers = append(cfg.Providers, config.Provider{Name: name, Kind: up.kind, BaseURL: srv.URL})
			experts = append(experts, config.Upstream{Provider: name, Model: "claude-sonnet-4-5"})
		}
		for _, family := range []string{config.FamilyChat, config.FamilyMessages} {
			id := up.name + "-" + family
			cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
				Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 1000, ContextTokens: 200_000, Experts: experts})
			cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		g := apitest.Start(t, apitest.Options{Config: cfg})
		tenant := g.NewTenant(t, "acme", 0, 100_000_000)
		for i, c := range []struct{ route, model, errEvent string }{
			{"/v1/chat/completions", up.name + "-" + config.FamilyChat, `"error"`},
			{"/v1/messages", up.name + "-" + config.FamilyMessages, "event: error"},
		} {
			asked.Store(0)
			status, answer := post(t, g, tenant.Key, c.route, inferenceBody(c.route, c.model, "think first, please", true))
			if status != 200 || !strings.Contains(string(answer), c.errEvent) {
				t.Errorf("%s upstream, %s: status %d, want 200 and the in-band error: %.800s", up.kind, c.route, status, answer)
			}
			rec := latestUsage(t, g, tenant.Account, int64(i+1))
			checkReproducible(t, rec)
			least := price.Cost(price.Tokens{Output: want}, *rec.Price).Output
			if n := asked.Load(); n != 1 || rec.Status != "upstream_cut_off" || rec.OutputTokens < want || rec.Costs.Output < least {
				t.Errorf("%s upstream, %s: %d experts asked, record %s with %d output tokens at %d micro-units; want 1 asked, the cut billed at least the thinking's %d tokens at %d",
					up.kind, c.route, n, rec.Status, rec.OutputTokens, rec.Costs.Output, want, least)
			}
		}
		checkBooks(t, g, tenant.Account, 100_000_000)
	}
}

// withoutEventNames is the SSE stream s with its event: lines removed.
func withoutEventNames(s string) string {
	lines := strings.SplitAfter(s, "\n")
	kept := lines[:0]
	for _, line := range lines {
		if !strings.HasPrefix(line, "event: ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// thinkingUpstream serves thinking, a stream's start, to every request and then breaks the
// stream off; to a request that says "wait for me" it serves text after it and then waits,
// the stream open, until the request is gone. It returns its URL.
func thinkingUpstream(t *testing.T, thinking, text string) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, thinking)
		if !strings.Contains(string(body), "wait for me") {
			return // the stream ends here: no usage, no terminal event
		}
		_, _ = io.WriteString(w, text)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before srv.Close, which waits for the handlers
	return srv.URL
}

// leaveAfter sends a streamed request and goes away once a line of the answer has mark in it.
func leaveAfter(t *testing.T, g *apitest.Gateway, key, route, body, mark string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+route, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), mark) {
			return
		}
	}
	t.Fatalf("%s: the answer ended (status %d) before %q came", route, res.StatusCode, mark)
}

// TestOutputBilledUpToWhatWasAsked: when the upstream's minimum bound makes the gateway ask for
// more output than the client did (the Responses API's 16 tokens), the excess is not billed.
func TestOutputBilledUpToWhatWasAsked(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for i, stream := range []string{"false", "true"} {
		body := `{"model":"messages-via-responses","max_tokens":5,"stream":` + stream + `,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`
		if status, _, answer := do(t, c, g.URL, request{"POST", "/v1/messages", body}, bearer); status != 200 {
			t.Fatalf("%d %s", status, answer)
		}
		rec := latestUsage(t, g, tenant.Account, int64(i+1))
		if rec.OutputTokens != 5 {
			t.Errorf("stream %s: billed %d output tokens for a request that asked for 5", stream, rec.OutputTokens)
		}
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestUndeliveredAnswerIsNotBilled: a non-streamed answer cut off on its way from the upstream
// reaches the client as a 502, and nothing is billed for it; the usage record stays, at no cost.
func TestUndeliveredAnswerIsNotBilled(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for i := range 2 {
		status, _, body := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
			chatBody("service-flint-base", "cut [[sim fault=drop after=5]]", false, 64)}, bearer)
		if status != 502 {
			t.Fatalf("%d %s", status, body)
		}
		waitSettled(t, g, tenant.Account, int64(i+1))
	}
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.CostMicros != 0 || r.Status != "upstream_read_failed" {
			t.Errorf("record %s: cost %d, status %s", r.RequestID, r.CostMicros, r.Status)
		}
	}
	if bal, _ := checkBooks(t, g, tenant.Account, 50_000_000); bal != 50_000_000 {
		t.Errorf("balance %d after two undelivered answers, want it untouched", bal)
	}
}

// TestEveryChoiceIsBilledAndReserved: a chat request for n answers is billed for the output of
// all of them (the upstream's usage counts them all), is reserved for n times its bound, and is
// refused when streamed, where only one choice would reach the client.
func TestEveryChoiceIsBilledAndReserved(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 200_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	body := `{"model":"pricey","n":3,"max_tokens":5,"messages":[{"role":"user","content":"hi [[sim words=30]]"}]}`
	status, _, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions", body}, bearer)
	if status != 200 {
		t.Fatalf("%d %s", status, answer)
	}
	var got struct {
		Choices []struct{ Index int } `json:"choices"`
		Usage   struct {
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || len(got.Choices) != 3 || got.Usage.CompletionTokens != 15 {
		t.Fatalf("answer %s (%v)", answer, err)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	if rec.OutputTokens != 15 {
		t.Errorf("billed %d output tokens for three answers of 5", rec.OutputTokens)
	}
	// 8 answers of up to 64 tokens at 1000 micro-units a token is more than is left.
	status, hdr, answer := do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"pricey","n":8,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 402 || hdr.Get("x-should-retry") != "false" {
		t.Errorf("8 choices beyond the balance: %d %s", status, answer)
	}
	status, _, answer = do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"pricey","n":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 400 || !strings.Contains(string(answer), `"param":"n"`) {
		t.Errorf("a streamed request for 2 choices: %d %s", status, answer)
	}
	status, _, answer = do(t, c, g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"pricey","n":129,"messages":[{"role":"user","content":"hi"}]}`}, bearer)
	if status != 400 || !strings.Contains(string(answer), `"param":"n"`) {
		t.Errorf("n beyond 128: %d %s", status, answer)
	}
	checkBooks(t, g, tenant.Account, 200_000)
}

// TestStreamFailingBeforeOutputIsNotBilled: a stream whose upstream fails before producing
// anything costs the client nothing (it got only the error event); one that fails after some
// output is billed for it.
func TestStreamFailingBeforeOutputIsNotBilled(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	cases := []struct{ path, body string }{
		{"/v1/chat/completions", chatBody("service-flint-base", "x [[sim fault=midstream after=0]]", true, 64)},
		{"/v1/messages", `{"model":"messages-via-chat","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"x [[sim fault=midstream after=0]]"}]}`},
		{"/v1/chat/completions", chatBody("service-flint-base", "x [[sim fault=midstream after=3]]", true, 64)},
	}
	for i, tc := range cases {
		status, _, answer := do(t, c, g.URL, request{"POST", tc.path, tc.body}, bearer)
		if status != 200 || !strings.Contains(string(answer), "error") {
			t.Fatalf("%s: %d %s", tc.path, status, answer)
		}
		waitSettled(t, g, tenant.Account, int64(i+1))
	}
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var free, paid int
	for _, r := range recs {
		if r.Status != "upstream_error" {
			t.Errorf("record %s: status %s", r.RequestID, r.Status)
		}
		if r.CostMicros == 0 {
			free++
		} else if r.OutputTokens > 0 {
			paid++
		}
	}
	if free != 2 || paid != 1 {
		t.Errorf("%d streams free and %d billed for their output, want 2 and 1: %+v", free, paid, recs)
	}
	checkBooks(t, g, tenant.Account, 50_000_000)
}

// TestClientGoneDuringARetryWaitIsNotBilled: a client that leaves while the gateway waits out
// an upstream's 429 (its Retry-After) before trying again is not billed: the upstream refused
// the prompt, and no other had it (trial h12 D8: billed its input as client_disconnected,
// though the same request was free for a client that waited for the final 429).
func TestClientGoneDuringARetryWaitIsNotBilled(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(chatBody("pricey", "refused for now [[sim fault=429 retry_after=2]]", false, 64)))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d before the client left", res.StatusCode)
	}
	cancel()
	// A request after it, settled: the records written by then are the left request's and its.
	if status, _, body := do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions", chatBody("pricey", "hello", false, 16)},
		map[string]string{"Authorization": "Bearer " + tenant.Key}); status != 200 {
		t.Fatalf("the next request: %d %s", status, body)
	}
	time.Sleep(300 * time.Millisecond) // the left request's settlement, had there been one, was before the next one's
	waitSettled(t, g, tenant.Account, 1)
	recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status == "client_disconnected" {
		t.Errorf("usage after a client left during a retry wait: %+v", recs)
	}
	checkBooks(t, g, tenant.Account, 10_000_000)
}

// TestClientGoneBeforeTheAnswerIsBilledItsInput: a client that leaves while the upstream has its
// request and has not answered yet (a non-streamed answer still being written, a stream whose
// head has not come) is billed the request's input, status client_disconnected: the provider
// has the prompt and bills it (trial h1: no usage record at all, so a tenant could make the
// operator pay for prompts that never showed in its usage).
func TestClientGoneBeforeTheAnswerIsBilledItsInput(t *testing.T) {
	s := sim.New(sim.Options{})
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t), Sim: s})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	for i, stream := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
			strings.NewReader(chatBody("pricey", "a slow answer [[sim fault=stall_before ms=3000]]", stream, 64)))
		req.Header.Set("Authorization", "Bearer "+tenant.Key)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			t.Fatalf("stream %v: answered %d before the client left", stream, res.StatusCode)
		}
		cancel()
		waitSettled(t, g, tenant.Account, int64(i+1))
		recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := recs[0]; r.Status != "client_disconnected" || r.InputTokens <= 0 || r.OutputTokens != 0 || r.CostMicros <= 0 {
			t.Errorf("stream %v: usage after the client left before the answer: %+v", stream, r)
		}
	}
	checkBooks(t, g, tenant.Account, 10_000_000)
}

// TestClientGoneWhileTheAnswerIsReadIsBilledItsInput: a client that leaves after the upstream
// sent its answer's head and before its body came is billed the request's input, status
// client_disconnected, as one that leaves before the head is: the provider has the prompt.
// Trial of upstream failures D7: it was billed nothing, its record saying upstream_read_failed,
// which blamed the provider.
func TestClientGoneWhileTheAnswerIsReadIsBilledItsInput(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // the body never comes while the test runs
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "head-only", Kind: config.KindOpenAIChat, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "head-only", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "gpt-4.1-mini"}, MaxOutputTokens: 1000, ContextTokens: 100_000,
		Backend: &config.Upstream{Provider: "head-only", Model: "gpt-4.1-mini"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "head-only")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"head-only","max_tokens":16,"messages":[{"role":"user","content":"a slow answer"}]}`))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d before the client left", res.StatusCode)
	}
	if r := latestUsage(t, g, tenant.Account, 1); r.Status != "client_disconnected" || r.InputTokens <= 0 || r.OutputTokens != 0 || r.CostMicros <= 0 {
		t.Errorf("usage after the client left while the answer's body was awaited: %s, %d input, %d output, %d micro-units",
			r.Status, r.InputTokens, r.OutputTokens, r.CostMicros)
	}
	checkBooks(t, g, tenant.Account, 10_000_000)
}

// TestClientGoneWhileNoUpstreamConnectsIsNotBilled: a client that leaves while the gateway
// waits between tries of an upstream that refuses every connection is billed nothing: no try
// reached the upstream, so no one has its prompt. Trial of upstream failures D6: it was billed
// its input as client_disconnected, as if the upstream had the request.
func TestClientGoneWhileNoUpstreamConnectsIsNotBilled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there: every connection is refused
	cfg := moneyConfig(t)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "dead", Kind: config.KindOpenAIChat, BaseURL: "http://" + dead + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{ID: "dead", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "dead", Model: "dead"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "dead")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Tries a second apart: the client leaves during the first wait.
	g := apitest.Start(t, apitest.Options{Config: cfg, Retry: &provider.RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Second}})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"dead","max_tokens":16,"messages":[{"role":"user","content":"hello there, a prompt of some length to bill"}]}`))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("answered %d before the client left", res.StatusCode)
	}
	time.Sleep(1500 * time.Millisecond) // past the wait, when the exchange ends
	if recs, err := g.Store.UsageRecords(context.Background(), tenant.Account.ID, 5); err != nil || len(recs) != 0 {
		t.Errorf("usage records %+v (%v), want none: no upstream had the prompt", recs, err)
	}
	checkBooks(t, g, tenant.Account, 10_000_000)
}

// TestReservationNearTheContextWindowReachesTheLongContextTier: a prompt admitted near a
// model's context window (its lenient count within it) whose cautious estimate is above the
// window is reserved at that estimate, not capped at the window: above claude-sonnet-4-5's
// 200,000-token threshold the whole request is at the long-context rates, which an upstream
// with a longer window (the client's anthropic-beta context-1m) bills. A balance that covers
// the worst case capped at the window but not at the tier is refused with 402. Trial h12 D11:
// the cap kept the reservation at the base rates, and 10 % of such a request's cost was waived.
func TestReservationNearTheContextWindowReachesTheLongContextTier(t *testing.T) {
	cfg := passthroughConfig(t)
	cfg.Models = append(cfg.Models, config.Model{ID: "window-sonnet", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 4096, ContextTokens: 200_000,
		Backend: &config.Upstream{Provider: "sim-anthropic", Model: "sim-sonnet"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "window-sonnet")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	// 690,000 bytes: 230,000 tokens by the cautious count (three bytes a token), 172,500 by
	// the lenient one (within the window). Capped at the window the worst case is 200,000 ×
	// $6 (a one-hour write) + 16 × $15 = 1,200,240 micro-units; at the tier 230,000 × $12 +
	// 16 × $22.50 = 2,760,360.
	tenant := g.NewTenant(t, "acme", 0, 2_000_000)
	prompt := strings.Repeat("lorem ipsum dolor sit amet ", 690_000/27)
	body := `{"model":"window-sonnet","max_tokens":16,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	status, _, answer := do(t, g.Client(t), g.URL, request{"POST", "/v1/messages", body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != http.StatusPaymentRequired {
		t.Fatalf("a request whose worst case at the long-context rates is above the balance: %d %.300s", status, answer)
	}
	m := neededRe.FindStringSubmatch(string(answer))
	if m == nil {
		t.Fatalf("the 402 does not say what the request needs: %.300s", answer)
	}
	if needed, _ := strconv.ParseInt(m[1], 10, 64); needed < 2_700_000 {
		t.Errorf("the request needs %d micro-units; at the long-context rates it is at least 2,700,000", needed)
	}
}

// TestImagesAreReservedAtTheModelsBound: an image is reserved at the most the model's provider
// bills for one, on every route, whether the request is translated or relayed untouched: on
// gpt-4o-mini 48,169 tokens (2,833 + 8 tiles × 5,667, OpenAI's Images and vision guide), and
// at a configured image_tokens where one is set. Four images by URL and 16 output tokens: a
// balance of 20,000 micro-units is refused with 402 naming at least 4 × 48,169 × $0.15 / M
// (28,901). Trial h12 D9: the reservation counted 2,000 tokens an image when it read the
// request, and only the URL's bytes when it relayed it; a request of such images was billed
// 61 micro-units of the 15,316 the provider charged.
func TestImagesAreReservedAtTheModelsBound(t *testing.T) {
	cfg := passthroughConfig(t)
	cfg.Models = append(cfg.Models,
		config.Model{ID: "vision-mini", Family: config.FamilyChat, OwnedBy: "test", Price: config.Price{Catalog: "gpt-4o-mini"},
			MaxOutputTokens: 4096, Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "gpt-4o-mini-2024-07-18"}},
		config.Model{ID: "vision-mini-responses", Family: config.FamilyChat, OwnedBy: "test", Price: config.Price{Catalog: "gpt-4o-mini"},
			MaxOutputTokens: 4096, Backend: &config.Upstream{Provider: "sim-openai-responses", Model: "sim-vision"}},
		config.Model{ID: "vision-messages", Family: config.FamilyMessages, OwnedBy: "test",
			Price:           config.Price{InputPerMTok: 150_000, OutputPerMTok: 600_000},
			MaxOutputTokens: 4096, Backend: &config.Upstream{Provider: "sim-anthropic", Model: "sim-vision", ImageTokens: 48_169}})
	cfg.Models = append(cfg.Models,
		config.Model{ID: "vision-mini-window", Family: config.FamilyChat, OwnedBy: "test", Price: config.Price{Catalog: "gpt-4o-mini"},
			MaxOutputTokens: 4096, ContextTokens: 128_000, Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "gpt-4o-mini-2024-07-18"}},
		config.Model{ID: "vision-mini-responses-window", Family: config.FamilyChat, OwnedBy: "test", Price: config.Price{Catalog: "gpt-4o-mini"},
			MaxOutputTokens: 4096, ContextTokens: 128_000, Backend: &config.Upstream{Provider: "sim-openai-responses", Model: "gpt-4o-mini-2024-07-18"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "vision-mini", "vision-mini-responses", "vision-messages", "vision-mini-window", "vision-mini-responses-window")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 20_000)
	const url = "https://example.com/a.png"
	chatImages := strings.Repeat(`{"type":"image_url","image_url":{"url":"`+url+`","detail":"high"}},`, 4)
	responsesImages := strings.Repeat(`{"type":"input_image","image_url":"`+url+`","detail":"high"},`, 4)
	messagesImages := strings.Repeat(`{"type":"image","source":{"type":"url","url":"`+url+`"}},`, 4)
	for _, c := range []struct {
		name, path, body string
	}{
		{"chat relayed to chat", "/v1/chat/completions",
			`{"model":"vision-mini","max_tokens":16,"messages":[{"role":"user","content":[` + chatImages + `{"type":"text","text":"what is this?"}]}]}`},
		{"chat translated to Responses", "/v1/chat/completions",
			`{"model":"vision-mini-responses","max_tokens":16,"messages":[{"role":"user","content":[` + chatImages + `{"type":"text","text":"what is this?"}]}]}`},
		{"Responses relayed to Responses", "/v1/responses",
			`{"model":"vision-mini-responses","max_output_tokens":16,"input":[{"role":"user","content":[` + responsesImages + `{"type":"input_text","text":"what is this?"}]}]}`},
		{"Messages relayed to Messages, configured bound", "/v1/messages",
			`{"model":"vision-messages","max_tokens":16,"messages":[{"role":"user","content":[` + messagesImages + `{"type":"text","text":"what is this?"}]}]}`},
	} {
		status, _, answer := do(t, g.Client(t), g.URL, request{"POST", c.path, c.body},
			map[string]string{"Authorization": "Bearer " + tenant.Key, "anthropic-version": "2023-06-01"})
		if status != http.StatusPaymentRequired {
			t.Errorf("%s: four images at 48,169 tokens each on a balance of 20,000: %d %.300s", c.name, status, answer)
			continue
		}
		m := neededRe.FindStringSubmatch(string(answer))
		if m == nil {
			t.Errorf("%s: the 402 does not say what the request needs: %.300s", c.name, answer)
			continue
		}
		if needed, _ := strconv.ParseInt(m[1], 10, 64); needed < 28_901 {
			t.Errorf("%s: the request needs %d micro-units; four images at 48,169 tokens are 28,901", c.name, needed)
		}
	}
	// The context-window check counts an image at the fewest tokens one takes, not at its
	// billing bound: six images on gpt-4o-mini's 128,000 tokens are served, relayed or
	// translated (the review of d9deb2a: four were refused as context_length_exceeded).
	rich := g.NewTenant(t, "rich", 0, 1_000_000_000)
	sixImages := strings.Repeat(`{"type":"image_url","image_url":{"url":"`+url+`","detail":"low"}},`, 6)
	for _, model := range []string{"vision-mini-window", "vision-mini-responses-window"} {
		status, _, answer := do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions",
			`{"model":"` + model + `","max_tokens":16,"messages":[{"role":"user","content":[` + sixImages + `{"type":"text","text":"what is this?"}]}]}`},
			map[string]string{"Authorization": "Bearer " + rich.Key})
		if status != http.StatusOK {
			t.Errorf("%s: six images in a 128,000-token window: %d %.300s", model, status, answer)
		}
	}
	// Without images, the same account is served.
	status, _, answer := do(t, g.Client(t), g.URL, request{"POST", "/v1/chat/completions",
		`{"model":"vision-mini","max_tokens":16,"messages":[{"role":"user","content":"what is this?"}]}`},
		map[string]string{"Authorization": "Bearer " + tenant.Key})
	if status != http.StatusOK {
		t.Errorf("a request without images: %d %.300s", status, answer)
	}
}
