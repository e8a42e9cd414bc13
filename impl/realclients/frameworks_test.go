package realclients_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
)

// The inference routes whose answers are billed.
var inferencePaths = []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"}

// reportedTokens is a usage as a client reports it and as the gateway bills it, in the kinds
// every client can tell apart: cache writes of any duration are one kind.
type reportedTokens struct {
	Uncached, CacheRead, CacheWrite, Output, Reasoning int64
}

// billedTokens is a bill's (or an answer's) counts as reportedTokens.
func billedTokens(t price.Tokens) reportedTokens {
	return reportedTokens{Uncached: t.Uncached, CacheRead: t.CacheRead, CacheWrite: t.CacheWrite5m + t.CacheWrite1h,
		Output: t.Output, Reasoning: t.Reasoning}
}

// reportedCall is one model call as the client reported it: the gateway's request id when
// the client exposes it (else the call is matched by its place among the answered inference
// requests) and the usage it reported.
type reportedCall struct {
	What      string
	RequestID string
	Tokens    reportedTokens
	// AddsStartOutput: the client adds the placeholder output_tokens of a Messages stream's
	// message_start to the final count of its message_delta (LangChain's ChatAnthropic does,
	// against Anthropic too), so it reports that many output tokens more than were billed.
	AddsStartOutput bool
}

// answeredInference is every POST to an inference route answered 200, in the order sent.
func answeredInference(rec *recorder) []recorded {
	var out []recorded
	for _, ex := range rec.snapshot() {
		if ex.Method == http.MethodPost && contains(inferencePaths, ex.Path()) && ex.Status == http.StatusOK {
			out = append(out, ex)
		}
	}
	return out
}

// checkReportedUsage checks the usage each call's client reported against what the gateway
// answered and billed: the client made as many calls as the gateway answered, each call's
// usage record (by the request id the gateway answered with) holds the usage of the answer,
// streamed or not, and the usage the client reported, and its bill is its counts at its price.
func checkReportedUsage(t *testing.T, fx fixture, rec *recorder, tenant reportedTenant, calls []reportedCall) {
	t.Helper()
	answered := answeredInference(rec)
	if len(calls) != len(answered) {
		t.Errorf("the client reported %d calls, the gateway answered %d inference requests", len(calls), len(answered))
		return
	}
	byID := map[string]recorded{}
	for _, ex := range answered {
		byID[ex.ResponseHeader.Get("X-Request-Id")] = ex
	}
	records := usageRecords(t, fx.gw, tenant.account, len(answered))
	billed := map[string]int{}
	for i, u := range records {
		billed[u.RequestID] = i
	}
	for i, call := range calls {
		if call.RequestID == "" {
			call.RequestID = answered[i].ResponseHeader.Get("X-Request-Id")
		}
		ex, ok := byID[call.RequestID]
		if !ok {
			t.Errorf("%s: the client's request id %q is not one the gateway answered", call.What, call.RequestID)
			continue
		}
		j, ok := billed[call.RequestID]
		if !ok {
			t.Errorf("%s: no usage record of request %s", call.What, call.RequestID)
			continue
		}
		bill := billedTokens(records[j].Tokens())
		if answer, ok := answerUsage(ex.ResponseBody); !ok {
			t.Errorf("%s: the answer to %s %s reported no usage", call.What, ex.Path(), call.RequestID)
		} else if billedTokens(answer) != bill {
			t.Errorf("%s: request %s billed %+v, its answer reported %+v", call.What, call.RequestID, bill, billedTokens(answer))
		}
		want := bill
		if call.AddsStartOutput {
			want.Output += messageStartOutput(ex.ResponseBody)
		}
		if call.Tokens != want || call.Tokens.Output <= 0 || call.Tokens.Uncached+call.Tokens.CacheRead+call.Tokens.CacheWrite <= 0 {
			t.Errorf("%s: the client reported %+v, request %s was billed %+v (the client should report %+v)", call.What, call.Tokens, call.RequestID, bill, want)
		}
		checkBill(t, records[j])
	}
}

// reportedTenant is the account a test's client runs as, so that its usage records are its
// own.
type reportedTenant struct {
	account uuid.UUID
	fx      fixture
}

// newReportedTenant makes a funded tenant of its own for a test and the fixture with its key.
func newReportedTenant(t *testing.T, fx fixture, name string) reportedTenant {
	tenant := fx.gw.NewTenant(t, name, 0, 100_000_000)
	return reportedTenant{account: tenant.Account.ID, fx: fixture{gw: fx.gw, key: tenant.Key}}
}

// answerUsage is the usage an answer reported, streamed (answeredUsage) or not, in any of the
// three formats.
func answerUsage(body []byte) (price.Tokens, bool) {
	if tok, ok := answeredUsage(body); ok {
		return tok, true
	}
	var a struct {
		Usage *struct {
			// Messages.
			messagesUsage
			// Chat completions.
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
			// Responses (input_tokens and output_tokens as Messages').
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		}
		Object string
		Type   string
	}
	if json.Unmarshal(bytes.TrimSpace(body), &a) != nil || a.Usage == nil {
		return price.Tokens{}, false
	}
	u := a.Usage
	switch {
	case a.Type == "message":
		tok := price.Tokens{Uncached: u.InputTokens, CacheRead: u.CacheRead, CacheWrite5m: u.CacheWrite, Output: u.OutputTokens}
		if u.CacheCreation.Ephemeral1h > 0 {
			tok.CacheWrite5m, tok.CacheWrite1h = u.CacheCreation.Ephemeral5m, u.CacheCreation.Ephemeral1h
		}
		return tok, true
	case a.Object == "response":
		return price.Tokens{Uncached: u.InputTokens - u.InputTokensDetails.CachedTokens, CacheRead: u.InputTokensDetails.CachedTokens,
			Output: u.OutputTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}, true
	case a.Object == "chat.completion":
		return price.Tokens{Uncached: u.PromptTokens - u.PromptTokensDetails.CachedTokens, CacheRead: u.PromptTokensDetails.CachedTokens,
			Output: u.CompletionTokens, Reasoning: u.CompletionTokensDetails.ReasoningTokens}, true
	}
	return price.Tokens{}, false
}

// messageStartOutput is the output_tokens of a Messages stream's message_start (a placeholder:
// the final count is message_delta's), or 0.
func messageStartOutput(body []byte) int64 {
	for _, line := range bytes.Split(body, []byte("\n")) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
		if !ok {
			continue
		}
		var ev struct {
			Type    string
			Message struct{ Usage messagesUsage }
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && ev.Type == "message_start" {
			return ev.Message.Usage.OutputTokens
		}
	}
	return 0
}

// aiSDKUsage is a usage as the AI SDK reports it (LanguageModelUsage).
type aiSDKUsage struct {
	InputTokenDetails struct {
		NoCacheTokens, CacheReadTokens, CacheWriteTokens int64
	}
	OutputTokens       int64
	OutputTokenDetails struct{ ReasoningTokens int64 }
}

// tokens is the usage as reportedTokens.
func (u aiSDKUsage) tokens() reportedTokens {
	d := u.InputTokenDetails
	return reportedTokens{Uncached: d.NoCacheTokens, CacheRead: d.CacheReadTokens, CacheWrite: d.CacheWriteTokens,
		Output: u.OutputTokens, Reasoning: u.OutputTokenDetails.ReasoningTokens}
}

// aiSDKResult is what npm/ai-sdk.mjs prints of one generateText or streamText call.
type aiSDKResult struct {
	Text, FinishReason string
	Usage              aiSDKUsage
	Steps              []struct {
		RequestID string
		Usage     aiSDKUsage
	}
	// A stream's text deltas, and how many there were.
	Deltas string
	Parts  int
	// A tool round trip's call on the first step, the results the SDK ran it for, and the
	// tool calls of the last step.
	Call *struct {
		ToolCallID, ToolName string
		Input                map[string]any
	}
	ToolResults, FinalToolCalls int
	// Output.object's parsed object.
	Object map[string]any
}

// testAISDK: Vercel's AI SDK (npm/ai-sdk.mjs) with the OpenAI provider (Responses and
// .chat()), the OpenAI-compatible provider and the Anthropic provider (authToken) on the
// gateway's /v1: generateText and streamText on each, a tool round trip and Output.object
// on Responses, chat and Messages; every step's usage as the gateway billed it, and the key as
// a bearer token only.
func testAISDK(t *testing.T, c clients, fx fixture) {
	tenant := newReportedTenant(t, fx, "ai-sdk")
	rec := newRecorder(t, fx.gw.URL, tenant.fx.key)
	sb := sdkSandbox(t, c, tenant.fx, rec)
	r := run(t, rec, sb, append(c.script("ai-sdk.mjs"), rec.URL+"/v1")...)
	var out map[string]map[string]aiSDKResult
	ok := sdkOutput(t, r, &out)

	checkInference(t, rec, "/v1/responses", "service-flint")
	checkInference(t, rec, "/v1/chat/completions", "service-flint-base")
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	checkBearerOnly(t, rec, tenant.fx.key)
	rec.checkEgress(t)
	if !ok {
		return
	}

	var calls []reportedCall
	for _, provider := range []string{"responses", "chat", "compatible", "messages"} {
		results := out[provider]
		for _, kind := range []string{"generate", "stream", "tools", "structured"} {
			res, ran := results[kind]
			if !ran && (kind == "generate" || kind == "stream" || provider != "compatible") {
				t.Errorf("%s %s: no result", provider, kind)
				continue
			}
			if !ran {
				continue
			}
			what := provider + " " + kind
			checkAISDKResult(t, what, kind, res)
			for i, s := range res.Steps {
				calls = append(calls, reportedCall{What: what + " step " + strconv.Itoa(i+1), RequestID: s.RequestID, Tokens: s.Usage.tokens()})
			}
		}
	}
	checkReportedUsage(t, fx, rec, tenant, calls)
}

// checkAISDKResult checks one call's result as its kind wants it.
func checkAISDKResult(t *testing.T, what, kind string, res aiSDKResult) {
	t.Helper()
	steps := 1
	if kind == "tools" {
		steps = 2
	}
	if len(res.Steps) != steps {
		t.Errorf("%s: %d steps, want %d", what, len(res.Steps), steps)
	}
	for i, s := range res.Steps {
		if s.RequestID == "" {
			t.Errorf("%s: step %d has no x-request-id in its response headers", what, i+1)
		}
	}
	if kind != "structured" {
		nonEmpty(t, what, res.Text)
	}
	wantFinish := "stop"
	if res.FinishReason != wantFinish {
		t.Errorf("%s: finish reason %q, want %s", what, res.FinishReason, wantFinish)
	}
	switch kind {
	case "stream":
		if res.Parts < 2 || res.Deltas != res.Text {
			t.Errorf("%s: %d text deltas adding up to %q, final text %q; want several adding up to the text", what, res.Parts, res.Deltas, res.Text)
		}
	case "tools":
		if res.Call == nil || res.Call.ToolName != "get_weather" || res.Call.ToolCallID == "" || res.ToolResults != 1 || res.FinalToolCalls != 0 {
			t.Errorf("%s: call %+v, %d tool results, %d tool calls in the last step; want a get_weather call with an id, its result and a text answer", what, res.Call, res.ToolResults, res.FinalToolCalls)
		} else if city, ok := res.Call.Input["city"].(string); !ok || city == "" {
			t.Errorf("%s: the call's input %v has no city", what, res.Call.Input)
		}
	case "structured":
		checkCity(t, res.Object)
	}
	var sum reportedTokens
	for _, s := range res.Steps {
		st := s.Usage.tokens()
		sum = reportedTokens{sum.Uncached + st.Uncached, sum.CacheRead + st.CacheRead, sum.CacheWrite + st.CacheWrite, sum.Output + st.Output, sum.Reasoning + st.Reasoning}
	}
	if res.Usage.tokens() != sum {
		t.Errorf("%s: the result's usage %+v is not the sum of its steps' %+v", what, res.Usage.tokens(), sum)
	}
}

// langChainUsage is an AIMessage's usage_metadata.
type langChainUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	TotalTokens       int64 `json:"total_tokens"`
	InputTokenDetails struct {
		CacheRead     int64 `json:"cache_read"`
		CacheCreation int64 `json:"cache_creation"`
	} `json:"input_token_details"`
	OutputTokenDetails struct {
		Reasoning int64 `json:"reasoning"`
	} `json:"output_token_details"`
}

// tokens is the usage as reportedTokens: LangChain's input_tokens counts the cached ones too.
func (u langChainUsage) tokens() reportedTokens {
	d := u.InputTokenDetails
	return reportedTokens{Uncached: u.InputTokens - d.CacheRead - d.CacheCreation, CacheRead: d.CacheRead, CacheWrite: d.CacheCreation,
		Output: u.OutputTokens, Reasoning: u.OutputTokenDetails.Reasoning}
}

// testLangChain: LangChain.js (npm/langchain.mjs): ChatOpenAI on chat completions (invoke,
// stream, a bindTools round trip, withStructuredOutput) and on Responses (invoke, stream),
// ChatAnthropic through a createClient with the key as its authToken (invoke, stream); each
// call's usage_metadata as the gateway billed it (ChatAnthropic's stream reports one output
// token more: it adds message_start's placeholder to the final count), and the key as a bearer
// token only.
func testLangChain(t *testing.T, c clients, fx fixture) {
	tenant := newReportedTenant(t, fx, "langchain")
	rec := newRecorder(t, fx.gw.URL, tenant.fx.key)
	sb := sdkSandbox(t, c, tenant.fx, rec)
	r := run(t, rec, sb, append(c.script("langchain.mjs"), rec.URL)...)
	type message struct {
		Text      string
		ToolCalls int
		Chunks    int
	}
	type pair struct{ Invoke, Stream message }
	var out struct {
		Chat struct {
			pair
			Tools struct {
				Call struct {
					ID, Name string
					Args     map[string]any
				}
				Final message
			}
			Structured map[string]any
		}
		Responses, Anthropic pair
		Calls                []struct {
			What  string
			Usage *langChainUsage
		}
	}
	ok := sdkOutput(t, r, &out)

	checkInference(t, rec, "/v1/chat/completions", "service-flint-base")
	checkInference(t, rec, "/v1/responses", "service-flint")
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	checkBearerOnly(t, rec, tenant.fx.key)
	rec.checkEgress(t)
	if !ok {
		return
	}

	for what, p := range map[string]pair{"ChatOpenAI": out.Chat.pair, "ChatOpenAI (Responses)": out.Responses, "ChatAnthropic": out.Anthropic} {
		nonEmpty(t, what+" invoke", p.Invoke.Text)
		nonEmpty(t, what+" stream", p.Stream.Text)
		if p.Stream.Chunks < 2 {
			t.Errorf("%s stream: %d chunks, want several", what, p.Stream.Chunks)
		}
	}
	tl := out.Chat.Tools
	if city, ok := tl.Call.Args["city"].(string); tl.Call.Name != "get_weather" || tl.Call.ID == "" || !ok || city == "" {
		t.Errorf("bindTools: call %+v; want a get_weather call with an id and a city", tl.Call)
	}
	nonEmpty(t, "the answer to the ToolMessage", tl.Final.Text)
	if tl.Final.ToolCalls != 0 {
		t.Errorf("the answer to the ToolMessage has %d tool calls, want text only", tl.Final.ToolCalls)
	}
	checkCity(t, out.Chat.Structured)

	var calls []reportedCall
	for _, call := range out.Calls {
		if call.Usage == nil {
			t.Errorf("%s: no usage_metadata", call.What)
			continue
		}
		calls = append(calls, reportedCall{What: call.What, Tokens: call.Usage.tokens(), AddsStartOutput: call.What == "anthropic stream"})
	}
	if len(calls) == len(out.Calls) {
		checkReportedUsage(t, fx, rec, tenant, calls)
	}
}
