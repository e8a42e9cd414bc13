package convert

import (
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
)

// documentedAnswers are complete answers whose usage objects have the shapes of the providers'
// documentation, with the counts each must read as.
var documentedAnswers = []struct {
	name   string
	source string // where the usage shape comes from
	f      llm.Format
	body   string
	want   llm.Usage
	tokens price.Tokens
}{
	{
		name:   "messages, every write for one hour",
		source: "https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching",
		f:      llm.FormatMessages,
		body:   `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500,"service_tier":"standard"}}`,
		want:   llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite1hTokens: 10000, OutputTokens: 500, ServiceTier: "standard"},
		tokens: price.Tokens{Uncached: 2000, CacheRead: 50000, CacheWrite1h: 10000, Output: 500},
	},
	{
		name:   "messages, writes of both lives",
		source: "https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching",
		f:      llm.FormatMessages,
		body:   `{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2048,"cache_read_input_tokens":1800,"cache_creation_input_tokens":556,"output_tokens":503,"cache_creation":{"ephemeral_5m_input_tokens":456,"ephemeral_1h_input_tokens":100}}}`,
		want:   llm.Usage{InputTokens: 4404, CachedInputTokens: 1800, CacheWrite5mTokens: 456, CacheWrite1hTokens: 100, OutputTokens: 503},
		tokens: price.Tokens{Uncached: 2048, CacheRead: 1800, CacheWrite5m: 456, CacheWrite1h: 100, Output: 503},
	},
	{
		name:   "messages, writes without the breakdown",
		source: "https://docs.anthropic.com/en/api/messages",
		f:      llm.FormatMessages,
		body:   `{"id":"msg_03","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"output_tokens":503,"cache_creation_input_tokens":2051,"cache_read_input_tokens":0}}`,
		want:   llm.Usage{InputTokens: 4146, CacheWrite5mTokens: 2051, OutputTokens: 503},
		tokens: price.Tokens{Uncached: 2095, CacheWrite5m: 2051, Output: 503},
	},
	{
		name:   "chat",
		source: "https://platform.openai.com/docs/api-reference/chat/object",
		f:      llm.FormatChat,
		body:   `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`,
		want:   llm.Usage{InputTokens: 52000, CachedInputTokens: 50000, OutputTokens: 500, ReasoningTokens: 128, ServiceTier: "default"},
		tokens: price.Tokens{Uncached: 2000, CacheRead: 50000, Output: 500, Reasoning: 128},
	},
	{
		name:   "responses",
		source: "https://platform.openai.com/docs/api-reference/responses/object",
		f:      llm.FormatResponses,
		body:   `{"id":"resp_67ccd3a9da748190","object":"response","created_at":1741476777,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-5-mini-2025-08-07","output":[{"type":"message","id":"msg_67ccd3acc8d4","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],"service_tier":"priority","usage":{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500}}`,
		want:   llm.Usage{InputTokens: 52000, CachedInputTokens: 50000, OutputTokens: 500, ReasoningTokens: 128, ServiceTier: "priority"},
		tokens: price.Tokens{Uncached: 2000, CacheRead: 50000, Output: 500, Reasoning: 128},
	},
}

// TestDocumentedUsage: the usage of each documented answer reads the same from the usage-only
// reader of same-format relays and from the full decoder, and its counts per kind are the
// documented ones.
func TestDocumentedUsage(t *testing.T) {
	for _, a := range documentedAnswers {
		fast, err := ResponseUsage(a.f, []byte(a.body))
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		full, err := DecodeResponse(a.f, []byte(a.body))
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if fast != a.want || full.Usage != a.want {
			t.Errorf("%s (%s): usage reader %+v, full decoder %+v, want %+v", a.name, a.source, fast, full.Usage, a.want)
		}
		if got := fast.Tokens(); got != a.tokens {
			t.Errorf("%s (%s): tokens %+v, want %+v", a.name, a.source, got, a.tokens)
		}
		// The reader is on the request path of every same-format answer: it allocates nothing.
		body := []byte(a.body)
		if n := testing.AllocsPerRun(20, func() { _, _ = ResponseUsage(a.f, body) }); n != 0 {
			t.Errorf("%s: ResponseUsage allocates %v times", a.name, n)
		}
	}
}

// TestTranslatedUsage: a client of another format is told the documented counts in its own
// format's usage object: a Messages client the uncached input, the reads and the writes with
// their breakdown; a chat or Responses client every input token with the reads among them; the
// reasoning where the format has a place for it; the service tier in the client's words.
func TestTranslatedUsage(t *testing.T) {
	want := map[string]map[llm.Format]string{
		"messages, every write for one hour": {
			llm.FormatChat:      `{"prompt_tokens":62000,"completion_tokens":500,"total_tokens":62500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}} default`,
			llm.FormatResponses: `{"input_tokens":62000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":62500} default`,
			llm.FormatMessages:  `{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500,"service_tier":"standard"}`,
		},
		"messages, writes of both lives": {
			llm.FormatChat:      `{"prompt_tokens":4404,"completion_tokens":503,"total_tokens":4907,"prompt_tokens_details":{"cached_tokens":1800,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}} default`,
			llm.FormatResponses: `{"input_tokens":4404,"input_tokens_details":{"cached_tokens":1800},"output_tokens":503,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":4907} default`,
			llm.FormatMessages:  `{"input_tokens":2048,"cache_creation_input_tokens":556,"cache_read_input_tokens":1800,"cache_creation":{"ephemeral_5m_input_tokens":456,"ephemeral_1h_input_tokens":100},"output_tokens":503}`,
		},
		"messages, writes without the breakdown": {
			llm.FormatMessages: `{"input_tokens":2095,"cache_creation_input_tokens":2051,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":2051,"ephemeral_1h_input_tokens":0},"output_tokens":503}`,
		},
		"chat": {
			llm.FormatChat:      `{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}} default`,
			llm.FormatResponses: `{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500} default`,
			llm.FormatMessages:  `{"input_tokens":2000,"cache_creation_input_tokens":0,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":500,"output_tokens_details":{"thinking_tokens":128},"service_tier":"standard"}`,
		},
		"responses": {
			llm.FormatChat:      `{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}} priority`,
			llm.FormatResponses: `{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500} priority`,
			llm.FormatMessages:  `{"input_tokens":2000,"cache_creation_input_tokens":0,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":500,"output_tokens_details":{"thinking_tokens":128},"service_tier":"priority"}`,
		},
	}
	for _, a := range documentedAnswers {
		resp, err := DecodeResponse(a.f, []byte(a.body))
		if err != nil {
			t.Fatal(err)
		}
		for client, w := range want[a.name] {
			out, err := EncodeResponse(client, resp, metaFor(client))
			if err != nil {
				t.Fatal(err)
			}
			var answer struct {
				Usage       json.RawMessage `json:"usage"`
				ServiceTier string          `json:"service_tier"`
			}
			if err := json.Unmarshal(out, &answer); err != nil {
				t.Fatal(err)
			}
			got := string(answer.Usage)
			if answer.ServiceTier != "" {
				got += " " + answer.ServiceTier
			}
			if got != w {
				t.Errorf("%s (%s) to %s:\n got %s\nwant %s", a.name, a.source, client, got, w)
			}
			// The client's usage reads back, in the client's format, as the counts it was
			// written from (the tier in the client's words).
			back, err := ResponseUsage(client, out)
			if err != nil {
				t.Fatal(err)
			}
			wantBack := resp.Usage
			if client == llm.FormatMessages {
				wantBack.ServiceTier = ServiceTierFor(client, wantBack.ServiceTier)
			} else {
				// OpenAI usage has no cache writes: they are uncached input to an OpenAI client.
				wantBack.CacheWrite5mTokens, wantBack.CacheWrite1hTokens = 0, 0
				wantBack.ServiceTier = OpenAIServiceTier(wantBack.ServiceTier)
			}
			if back != wantBack {
				t.Errorf("%s to %s: reads back as %+v, want %+v", a.name, client, back, wantBack)
			}
		}
	}
}

// TestServiceTierOf: tiers are read as encoding/json reads strings, and anything else is no
// tier.
func TestServiceTierOf(t *testing.T) {
	for raw, want := range map[string]string{
		`"default"`: "default", `"priority"`: "priority", `"standard"`: "standard", `"pri\u006frity"`: "priority",
		`"on-demand"`: "on-demand", `null`: "", `7`: "", `["flex"]`: "", ``: "", `"`: "", "\"\xff\"": "\ufffd",
	} {
		if got := ServiceTierOf([]byte(raw)); got != want {
			t.Errorf("ServiceTierOf(%s) = %q, want %q", raw, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ServiceTierOf([]byte(`"default"`)) }); n != 0 {
		t.Errorf("%v allocations reading a known tier", n)
	}
	for _, c := range []struct {
		f          llm.Format
		tier, want string
	}{
		{llm.FormatMessages, "default", "standard"}, {llm.FormatMessages, "priority", "priority"},
		{llm.FormatMessages, "flex", ""}, {llm.FormatMessages, "", ""}, {llm.FormatMessages, "batch", "batch"},
		{llm.FormatChat, "standard", "default"}, {llm.FormatChat, "batch", ""}, {llm.FormatChat, "flex", "flex"},
		{llm.FormatResponses, "priority", "priority"}, {llm.FormatResponses, "", ""},
	} {
		if got := ServiceTierFor(c.f, c.tier); got != c.want {
			t.Errorf("ServiceTierFor(%s, %q) = %q, want %q", c.f, c.tier, got, c.want)
		}
	}
}
