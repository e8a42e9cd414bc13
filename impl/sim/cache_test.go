package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// The prompt cache, per format, against the providers' documentation:
//   - Anthropic: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
//   - OpenAI: https://platform.openai.com/docs/guides/prompt-caching

// longText returns n characters of ASCII prose (n/4 tokens), for prompts long enough to be
// cached.
func longText(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sb.WriteString(word(uint64(i), i))
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// ---- Anthropic ----

// eph is a cache_control breakpoint; ttl "" leaves the default (5m).
func eph(ttl string) map[string]any {
	if ttl == "" {
		return map[string]any{"type": "ephemeral"}
	}
	return map[string]any{"type": "ephemeral", "ttl": ttl}
}

// text is a text block, with a breakpoint when cc is not nil.
func text(s string, cc map[string]any) map[string]any {
	b := map[string]any{"type": "text", "text": s}
	if cc != nil {
		b["cache_control"] = cc
	}
	return b
}

// cacheBody is a Messages request with a system prompt of blocks and the given messages.
func cacheBody(system []any, messages ...any) map[string]any {
	return map[string]any{"model": "sim-sonnet", "max_tokens": 1024, "system": system, "messages": messages}
}

func user(blocks ...any) map[string]any { return map[string]any{"role": "user", "content": blocks} }

func assistant(blocks ...any) map[string]any {
	return map[string]any{"role": "assistant", "content": blocks}
}

// anthropicUsage is the cache part of an Anthropic usage object.
type anthropicUsage struct {
	Input, Creation, Read, W5m, W1h int
}

// readAnthropicUsage reads the usage of a Messages answer, checking that it carries every
// field the real API sends and that the creation split adds up.
func readAnthropicUsage(t *testing.T, u any) anthropicUsage {
	t.Helper()
	keys(t, "usage", u, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "output_tokens", "service_tier")
	got := anthropicUsage{
		Input: num(t, path(t, u, "input_tokens")), Creation: num(t, path(t, u, "cache_creation_input_tokens")),
		Read: num(t, path(t, u, "cache_read_input_tokens")),
		W5m:  num(t, path(t, u, "cache_creation.ephemeral_5m_input_tokens")), W1h: num(t, path(t, u, "cache_creation.ephemeral_1h_input_tokens")),
	}
	if got.W5m+got.W1h != got.Creation || path(t, u, "service_tier") != "standard" {
		t.Errorf("usage %v", u)
	}
	return got
}

// sendMessages posts body, streamed or not, and returns its usage; a stream's message_start
// and message_delta must agree on the input counts.
func sendMessages(t *testing.T, srv *httptest.Server, body map[string]any, streamed bool, header ...string) anthropicUsage {
	t.Helper()
	if !streamed {
		resp := post(t, srv, messagesPath, body, header...)
		b := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return readAnthropicUsage(t, path(t, decode(t, b), "usage"))
	}
	sb := map[string]any{"stream": true}
	for k, v := range body {
		sb[k] = v
	}
	_, evs := stream(t, srv, messagesPath, sb, header...)
	start := readAnthropicUsage(t, path(t, evs[0].JSON(t), "message.usage"))
	var delta map[string]any
	for _, ev := range evs {
		if ev.Name == "message_delta" {
			delta = ev.JSON(t)
		}
	}
	u := path(t, delta, "usage")
	keys(t, "message_delta.usage", u, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
	if num(t, path(t, u, "input_tokens")) != start.Input || num(t, path(t, u, "cache_creation_input_tokens")) != start.Creation ||
		num(t, path(t, u, "cache_read_input_tokens")) != start.Read {
		t.Errorf("message_delta usage %v, message_start %+v", u, start)
	}
	return start
}

// countTokens is the whole prompt's estimate, from count_tokens.
func countTokens(t *testing.T, srv *httptest.Server, body map[string]any) int {
	t.Helper()
	b := map[string]any{}
	for k, v := range body {
		if k != "max_tokens" && k != "stream" {
			b[k] = v
		}
	}
	return num(t, decode(t, readAll(t, post(t, srv, "/v1/messages/count_tokens", b)))["input_tokens"])
}

// checkTotal checks that input + creation + read is the whole prompt's estimate.
func checkTotal(t *testing.T, srv *httptest.Server, body map[string]any, u anthropicUsage) {
	t.Helper()
	if total := countTokens(t, srv, body); u.Input+u.Creation+u.Read != total {
		t.Errorf("usage %+v adds up to %d, the prompt has %d tokens", u, u.Input+u.Creation+u.Read, total)
	}
}

// TestMessagesPromptCache: "the prefix up to and including the block with cache_control is
// cached"; a first request writes it (cache_creation_input_tokens), a second one with the same
// prefix reads it (cache_read_input_tokens); input_tokens counts only the tokens after the
// last breakpoint.
func TestMessagesPromptCache(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streamed), func(t *testing.T) {
			_, srv := newServer(t, Options{})
			sys := longText(6000) // 1,500 tokens
			body := cacheBody([]any{text(sys, eph(""))}, user(text("Say hello to the gateway.", nil)))
			first := sendMessages(t, srv, body, streamed)
			if first != (anthropicUsage{Input: 7, Creation: 1500, Read: 0, W5m: 1500}) {
				t.Errorf("first request: %+v", first)
			}
			checkTotal(t, srv, body, first)
			second := sendMessages(t, srv, body, streamed)
			if second != (anthropicUsage{Input: 7, Read: 1500}) {
				t.Errorf("second request: %+v", second)
			}
			checkTotal(t, srv, body, second)
			// Another question after the same system prompt reads it too.
			other := cacheBody([]any{text(sys, eph(""))}, user(text("And now something else entirely.", nil)))
			if u := sendMessages(t, srv, other, streamed); u.Read != 1500 || u.Creation != 0 {
				t.Errorf("another question: %+v", u)
			}
			// A changed system prompt misses and writes.
			changed := cacheBody([]any{text("Changed. "+sys, eph(""))}, user(text("Say hello to the gateway.", nil)))
			if u := sendMessages(t, srv, changed, streamed); u.Read != 0 || u.Creation < 1500 {
				t.Errorf("changed prefix: %+v", u)
			}
		})
	}
}

// TestMessagesPromptCacheTTL: "ttl": "1h" writes are ephemeral_1h_input_tokens; with mixed
// TTLs the tokens up to the last 1-hour breakpoint are written for an hour and the rest for
// five minutes; a 5-minute entry is gone after five minutes without use, a 1-hour one is not,
// and a hit refreshes the entry.
func TestMessagesPromptCacheTTL(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streamed), func(t *testing.T) {
			clock := newClock()
			_, srv := newServer(t, Options{Now: clock.Now})
			// System: 1,500 tokens for an hour; the first user block: 1,000 more for 5 minutes.
			body := cacheBody([]any{text(longText(6000), eph("1h"))},
				user(text(longText(4000), eph("5m")), text("Question?", nil)))
			u := sendMessages(t, srv, body, streamed)
			if u != (anthropicUsage{Input: 3, Creation: 2500, W1h: 1500, W5m: 1000}) {
				t.Errorf("first request: %+v", u)
			}
			checkTotal(t, srv, body, u)
			clock.advance(4 * time.Minute)
			if u := sendMessages(t, srv, body, streamed); u != (anthropicUsage{Input: 3, Read: 2500}) {
				t.Errorf("after 4 minutes: %+v", u)
			}
			clock.advance(4 * time.Minute) // 8 minutes after the write, 4 after the refresh
			if u := sendMessages(t, srv, body, streamed); u != (anthropicUsage{Input: 3, Read: 2500}) {
				t.Errorf("4 minutes after the refresh: %+v", u)
			}
			clock.advance(6 * time.Minute) // the 5-minute entry has expired, the 1-hour one not
			u = sendMessages(t, srv, body, streamed)
			if u != (anthropicUsage{Input: 3, Read: 1500, Creation: 1000, W5m: 1000}) {
				t.Errorf("after 6 minutes: %+v", u)
			}
			checkTotal(t, srv, body, u)
			clock.advance(61 * time.Minute)
			if u := sendMessages(t, srv, body, streamed); u != (anthropicUsage{Input: 3, Creation: 2500, W1h: 1500, W5m: 1000}) {
				t.Errorf("after 61 minutes: %+v", u)
			}
		})
	}
}

// TestMessagesPromptCacheConversation plays a conversation the way Claude Code sends it: the
// breakpoint moves to the last block of each new turn, and the blocks that carried it before
// no longer do. "The system automatically checks for cache hits at all previous content
// block boundaries (up to approximately 20 blocks before your explicit breakpoint)".
func TestMessagesPromptCacheConversation(t *testing.T) {
	_, srv := newServer(t, Options{})
	sys := []any{text(longText(6000), nil)}
	q1, a1, q2 := longText(800), "Some answer.", "A follow-up question."
	turn1 := cacheBody(sys, user(text(q1, eph(""))))
	u1 := sendMessages(t, srv, turn1, false)
	if u1.Read != 0 || u1.Creation != 1700 || u1.Input != 0 {
		t.Errorf("turn 1: %+v", u1)
	}
	turn2 := cacheBody(sys, user(text(q1, nil)), assistant(text(a1, nil)), user(text(q2, eph(""))))
	u2 := sendMessages(t, srv, turn2, true)
	if u2.Read != 1700 || u2.Creation != countTokens(t, srv, turn2)-1700 || u2.Input != 0 {
		t.Errorf("turn 2: %+v", u2)
	}
	checkTotal(t, srv, turn2, u2)

	// More than 20 blocks between the breakpoint and the cached prefix: a miss.
	var many []any
	for i := range 25 {
		many = append(many, text(fmt.Sprintf("block %d.", i), nil))
	}
	far := cacheBody(sys, user(text(q1, nil)), assistant(many...), user(text(q2, eph(""))))
	if u := sendMessages(t, srv, far, false); u.Read != 0 || u.Creation != countTokens(t, srv, far) {
		t.Errorf("beyond the lookback: %+v", u)
	}
	// Within 20 blocks: a hit.
	near := cacheBody(sys, user(text(q1, nil)), assistant(many[:15]...), user(text(q2, eph(""))))
	if u := sendMessages(t, srv, near, false); u.Read != 1700 {
		t.Errorf("within the lookback: %+v", u)
	}
}

// TestMessagesPromptCacheMinimum: "The minimum cacheable prompt length is 1024 tokens for
// Claude Opus and Sonnet, 2048 for Claude Haiku"; "shorter prompts cannot be cached, even if
// marked with cache_control". The cache_min directive lowers the minimum.
func TestMessagesPromptCacheMinimum(t *testing.T) {
	_, srv := newServer(t, Options{})
	short := cacheBody([]any{text(longText(4000), eph(""))}, user(text("Hello.", nil))) // 1,000 tokens
	for range 2 {
		if u := sendMessages(t, srv, short, false); u != (anthropicUsage{Input: countTokens(t, srv, short)}) {
			t.Errorf("below the minimum: %+v", u)
		}
	}
	// 1,500 tokens: enough for Sonnet, not for Haiku.
	haiku := cacheBody([]any{text(longText(6000), eph(""))}, user(text("Hello.", nil)))
	haiku["model"] = "sim-haiku"
	for range 2 {
		if u := sendMessages(t, srv, haiku, false); u.Creation != 0 || u.Read != 0 {
			t.Errorf("haiku below its minimum: %+v", u)
		}
	}
	// A minimum lowered by a directive: 15 tokens of system prompt are cached.
	lowered := cacheBody([]any{text(longText(60), eph(""))}, user(text("Hello. [[sim cache_min=10]]", nil)))
	if u := sendMessages(t, srv, lowered, false); u.Creation != 15 || u.Read != 0 {
		t.Errorf("cache_min=10, first: %+v", u)
	}
	if u := sendMessages(t, srv, lowered, false); u.Read != 15 || u.Creation != 0 {
		t.Errorf("cache_min=10, second: %+v", u)
	}
	// Without any breakpoint nothing is cached, however long the prompt.
	plain := cacheBody([]any{text(longText(8000), nil)}, user(text("Hello.", nil)))
	for range 2 {
		if u := sendMessages(t, srv, plain, false); u.Creation != 0 || u.Read != 0 {
			t.Errorf("no breakpoint: %+v", u)
		}
	}
}

// TestMessagesPromptCacheScope: caches are per model and per account (the API key), tools
// are part of the prefix ("tools, system, messages"), and a top-level cache_control asks for
// automatic caching, a breakpoint on the last cacheable block.
func TestMessagesPromptCacheScope(t *testing.T) {
	_, srv := newServer(t, Options{})
	sys := []any{text(longText(6000), eph(""))}
	body := cacheBody(sys, user(text("Hello.", nil)))
	sendMessages(t, srv, body, false, "x-api-key", "account-a")
	if u := sendMessages(t, srv, body, false, "x-api-key", "account-b"); u.Read != 0 || u.Creation != 1500 {
		t.Errorf("another account: %+v", u)
	}
	if u := sendMessages(t, srv, body, false, "x-api-key", "account-a"); u.Read != 1500 {
		t.Errorf("the same account: %+v", u)
	}
	other := cacheBody(sys, user(text("Hello.", nil)))
	other["model"] = "sim-opus"
	if u := sendMessages(t, srv, other, false, "x-api-key", "account-a"); u.Read != 0 {
		t.Errorf("another model: %+v", u)
	}

	// Tools count no tokens but are part of the prefix: another tool description misses.
	withTool := func(desc string) map[string]any {
		tool := map[string]any{"name": "get_weather", "description": desc, "input_schema": map[string]any{"type": "object"}}
		b := cacheBody(sys, user(text("Hello.", nil)))
		b["tools"] = []any{tool}
		return b
	}
	sendMessages(t, srv, withTool("Current weather."), false)
	if u := sendMessages(t, srv, withTool("Current weather."), false); u.Read != 1500 {
		t.Errorf("the same tools: %+v", u)
	}
	if u := sendMessages(t, srv, withTool("The weather now."), false); u.Read != 0 || u.Creation != 1500 {
		t.Errorf("other tools: %+v", u)
	}

	// Automatic caching: the whole prompt is cached, and a longer conversation reads it.
	auto := cacheBody([]any{text(longText(6000), nil)}, user(text(longText(400), nil)))
	auto["cache_control"] = eph("1h")
	total := countTokens(t, srv, auto)
	if u := sendMessages(t, srv, auto, true); u != (anthropicUsage{Creation: total, W1h: total}) {
		t.Errorf("automatic, first: %+v (prompt %d)", u, total)
	}
	auto["messages"] = append(auto["messages"].([]any), assistant(text("Fine.", nil)), user(text("More?", nil)))
	if u := sendMessages(t, srv, auto, true); u.Read != total || u.Creation != countTokens(t, srv, auto)-total {
		t.Errorf("automatic, second: %+v", u)
	}
}

// ---- OpenAI ----

// openAIUsage is the cache part of an OpenAI usage object.
type openAIUsage struct{ Prompt, Cached int }

// sendOpenAI posts body to the chat or Responses route, streamed or not, and returns its
// usage, checking the shape and that the cached tokens are at most the prompt's.
func sendOpenAI(t *testing.T, srv *httptest.Server, route string, body map[string]any, streamed bool, header ...string) openAIUsage {
	t.Helper()
	b := map[string]any{}
	for k, v := range body {
		b[k] = v
	}
	var u, top any
	switch {
	case !streamed:
		resp := post(t, srv, route, b, header...)
		raw := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		top = decode(t, raw)
		u = path(t, top, "usage")
	case route == chatPath:
		b["stream"], b["stream_options"] = true, map[string]any{"include_usage": true}
		_, evs := stream(t, srv, route, b, header...)
		top = evs[len(evs)-2].JSON(t)
		u = path(t, top, "usage")
	default:
		b["stream"] = true
		_, evs := stream(t, srv, route, b, header...)
		top = path(t, evs[len(evs)-1].JSON(t), "response")
		u = path(t, top, "usage")
	}
	if path(t, top, "service_tier") != "default" {
		t.Errorf("service_tier %v", path(t, top, "service_tier"))
	}
	var got openAIUsage
	if route == chatPath {
		got = openAIUsage{num(t, path(t, u, "prompt_tokens")), num(t, path(t, u, "prompt_tokens_details.cached_tokens"))}
		_ = num(t, path(t, u, "completion_tokens_details.reasoning_tokens"))
	} else {
		got = openAIUsage{num(t, path(t, u, "input_tokens")), num(t, path(t, u, "input_tokens_details.cached_tokens"))}
		_ = num(t, path(t, u, "output_tokens_details.reasoning_tokens"))
	}
	if got.Cached > got.Prompt || got.Cached%cacheStep != 0 {
		t.Errorf("usage %v", u)
	}
	return got
}

// openAIBody is a chat or Responses request with a long system prompt (instructions) of
// sysChars characters and the user message q.
func openAIBody(route string, sysChars int, q string, extra ...any) map[string]any {
	var b map[string]any
	if route == chatPath {
		b = chatBody(q, nil)
		b["messages"].([]any)[0] = map[string]any{"role": "system", "content": longText(sysChars)}
	} else {
		b = responsesBody(q, map[string]any{"instructions": longText(sysChars)})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

// TestOpenAIPromptCache: "Caching is enabled automatically for prompts that are 1024 tokens or
// longer"; "the cache hits ... in 128-token increments"; usage reports the cached part as
// cached_tokens among the prompt tokens. A first request caches nothing; the same prefix
// again is read.
func TestOpenAIPromptCache(t *testing.T) {
	for _, route := range []string{chatPath, responsesPath} {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", route, streamed), func(t *testing.T) {
				_, srv := newServer(t, Options{})
				body := openAIBody(route, 6000, "Say hello to the gateway.")
				first := sendOpenAI(t, srv, route, body, streamed)
				if first.Cached != 0 || first.Prompt < 1500 {
					t.Errorf("first request: %+v", first)
				}
				// 6,025 or more characters: 11 checkpoints of 512.
				if u := sendOpenAI(t, srv, route, body, streamed); u != (openAIUsage{first.Prompt, 1408}) {
					t.Errorf("second request: %+v, want %d of %d cached", u, 1408, first.Prompt)
				}
				// Another question after the same 6,000 characters reads the first 1,408 tokens.
				other := openAIBody(route, 6000, "Something else entirely, and longer than before.")
				if u := sendOpenAI(t, srv, route, other, streamed); u.Cached != 1408 {
					t.Errorf("another question: %+v", u)
				}
				// Shorter than 1,024 tokens: never cached.
				short := openAIBody(route, 3000, "Hello.")
				for range 2 {
					if u := sendOpenAI(t, srv, route, short, streamed); u.Cached != 0 {
						t.Errorf("short prompt: %+v", u)
					}
				}
				// Unless a directive lowers the minimum: 768 tokens are cached.
				lowered := openAIBody(route, 3100, "Hello. [[sim cache_min=200]]")
				sendOpenAI(t, srv, route, lowered, streamed)
				if u := sendOpenAI(t, srv, route, lowered, streamed); u.Cached != 768 {
					t.Errorf("cache_min=200: %+v", u)
				}
			})
		}
	}
}

// TestOpenAIPromptCacheConversation: a conversation that grows reads the longest prefix seen
// before, counted in 128-token steps.
func TestOpenAIPromptCacheConversation(t *testing.T) {
	_, srv := newServer(t, Options{})
	sys := longText(5000)
	msgs := []any{map[string]any{"role": "system", "content": sys}, map[string]any{"role": "user", "content": longText(1500)}}
	first := sendOpenAI(t, srv, chatPath, map[string]any{"model": "sim-general", "messages": msgs}, false)
	// The first request had 6,500 characters before anything else: 12 checkpoints.
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "An answer."}, map[string]any{"role": "user", "content": "More."})
	second := sendOpenAI(t, srv, chatPath, map[string]any{"model": "sim-general", "messages": msgs}, false)
	if first.Cached != 0 || second.Cached != 12*cacheStep || second.Prompt <= first.Prompt {
		t.Errorf("first %+v, second %+v", first, second)
	}
	// Another model has its own cache.
	if u := sendOpenAI(t, srv, chatPath, map[string]any{"model": "sim-other", "messages": msgs}, false); u.Cached != 0 {
		t.Errorf("another model: %+v", u)
	}
}

// TestOpenAIPromptCacheKey: "prompt_cache_key" is combined with the prefix hash, so requests
// with another key do not share the cache, nor do other accounts.
func TestOpenAIPromptCacheKey(t *testing.T) {
	for _, route := range []string{chatPath, responsesPath} {
		t.Run(route, func(t *testing.T) {
			_, srv := newServer(t, Options{})
			a := openAIBody(route, 6000, "Hello.", "prompt_cache_key", "session-a")
			b := openAIBody(route, 6000, "Hello.", "prompt_cache_key", "session-b")
			sendOpenAI(t, srv, route, a, false)
			if u := sendOpenAI(t, srv, route, b, true); u.Cached != 0 {
				t.Errorf("another key: %+v", u)
			}
			if u := sendOpenAI(t, srv, route, a, true); u.Cached != 1408 {
				t.Errorf("the same key: %+v", u)
			}
			if u := sendOpenAI(t, srv, route, a, false, "Authorization", "Bearer other-account"); u.Cached != 0 {
				t.Errorf("another account: %+v", u)
			}
		})
	}
}

// TestOpenAIPromptCacheRetention: in-memory prefixes "remain active for 5 to 10 minutes of
// inactivity" (the simulator: 5); prompt_cache_retention "24h" keeps them for up to 24 hours.
func TestOpenAIPromptCacheRetention(t *testing.T) {
	for _, route := range []string{chatPath, responsesPath} {
		t.Run(route, func(t *testing.T) {
			clock := newClock()
			_, srv := newServer(t, Options{Now: clock.Now})
			body := openAIBody(route, 6000, "Hello.")
			sendOpenAI(t, srv, route, body, false)
			clock.advance(4 * time.Minute)
			if u := sendOpenAI(t, srv, route, body, false); u.Cached != 1408 {
				t.Errorf("after 4 minutes: %+v", u)
			}
			clock.advance(6 * time.Minute)
			if u := sendOpenAI(t, srv, route, body, false); u.Cached != 0 {
				t.Errorf("after 6 idle minutes: %+v", u)
			}
			long := openAIBody(route, 6000, "Hello.", "prompt_cache_retention", "24h", "prompt_cache_key", "k")
			sendOpenAI(t, srv, route, long, false)
			clock.advance(23 * time.Hour)
			if u := sendOpenAI(t, srv, route, long, false); u.Cached != 1408 {
				t.Errorf("24h retention after 23 hours: %+v", u)
			}
			clock.advance(25 * time.Hour)
			if u := sendOpenAI(t, srv, route, long, false); u.Cached != 0 {
				t.Errorf("24h retention after 25 idle hours: %+v", u)
			}
		})
	}
}

// TestPromptCacheFaults: a request refused before it is processed caches nothing; Reset
// forgets the cache.
func TestPromptCacheFaults(t *testing.T) {
	s, srv := newServer(t, Options{})
	body := openAIBody(chatPath, 6000, "Hello.")
	s.Enqueue("sim-general", Fault{Kind: FaultStatus, Status: 429})
	if resp := post(t, srv, chatPath, body); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if u := sendOpenAI(t, srv, chatPath, body, false); u.Cached != 0 {
		t.Errorf("after a 429: %+v", u)
	}
	s.Reset()
	if u := sendOpenAI(t, srv, chatPath, body, false); u.Cached != 0 {
		t.Errorf("after Reset: %+v", u)
	}
	if u := sendOpenAI(t, srv, chatPath, body, false); u.Cached != 1408 {
		t.Errorf("again: %+v", u)
	}
}

// TestPromptCacheConcurrent runs requests of every format at once (go test -race checks the
// store); each answer's counts add up.
func TestPromptCacheConcurrent(t *testing.T) {
	_, srv := newServer(t, Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				q := fmt.Sprintf("Question %d.", i%3)
				u := sendOpenAI(t, srv, chatPath, openAIBody(chatPath, 6000, q), g%2 == 0)
				if u.Cached != 0 && u.Cached != 1408 {
					t.Errorf("chat %+v", u)
				}
				a := sendMessages(t, srv, cacheBody([]any{text(longText(6000), eph(""))}, user(text(q, nil))), g%2 == 1)
				if a.Read+a.Creation != 1500 {
					t.Errorf("messages %+v", a)
				}
			}
		})
	}
	wg.Wait()
}

// TestPromptCacheStore checks the bounded store: it holds at most cacheEntries prefixes and
// forgets the least recently used first.
func TestPromptCacheStore(t *testing.T) {
	c := newPromptCache()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range uint64(cacheEntries) {
		c.put(k, 0, time.Minute)
	}
	c.put(0, 1, 0) // used again: now the most recent
	for k := uint64(cacheEntries); k < cacheEntries+10; k++ {
		c.put(k, 2, time.Minute)
	}
	if len(c.index) != cacheEntries || len(c.nodes) != cacheEntries {
		t.Errorf("%d entries, %d nodes", len(c.index), len(c.nodes))
	}
	if !c.has(0, 3) || c.has(1, 3) || c.has(10, 3) || !c.has(11, 3) || !c.has(cacheEntries+9, 3) {
		t.Errorf("eviction order")
	}
	if c.has(0, int64(time.Minute)+4) || len(c.index) != cacheEntries-1 {
		t.Errorf("an expired entry is forgotten")
	}
}

// TestCounterCheckpoints checks that the hash at a checkpoint depends only on what precedes
// it, however the text is split, multi-byte characters included.
func TestCounterCheckpoints(t *testing.T) {
	s := New(Options{})
	hash := func(parts ...string) []uint64 {
		var c counter
		c.startHash(s.cacheSeed, 4, 64, "p")
		for _, p := range parts {
			c.add(p)
		}
		return c.points
	}
	a, b := hash("héllo wörld!"), hash("hé", "llo w", "örld!", "")
	if len(a) != 3 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("%v %v", a, b)
	}
	if c := hash("héllX wörld!"); c[0] != a[0] || c[1] == a[1] {
		t.Errorf("a change after a checkpoint changed it, or one before did not: %v %v", a, c)
	}
}

// The SDKs read the cache counts.
func TestPromptCacheSDKUsage(t *testing.T) {
	_, client := anthropicClient(t, 0)
	body := cacheBody([]any{text(longText(6000), eph("1h"))}, user(text("Hello.", nil)))
	raw, _ := json.Marshal(body)
	for i := range 2 {
		var msg struct {
			Usage struct {
				CacheCreation struct {
					Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
				} `json:"cache_creation"`
				Read        int    `json:"cache_read_input_tokens"`
				ServiceTier string `json:"service_tier"`
			} `json:"usage"`
		}
		if err := client.Post(t.Context(), "/v1/messages", raw, &msg); err != nil {
			t.Fatal(err)
		}
		if i == 0 && msg.Usage.CacheCreation.Ephemeral1h != 1500 || i == 1 && msg.Usage.Read != 1500 || msg.Usage.ServiceTier != "standard" {
			t.Errorf("request %d: %+v", i, msg.Usage)
		}
	}
}

// BenchmarkChatLongPrompt sends the same 3,000-token conversation again and again, so every
// request after the first reads its prefix from the prompt cache.
func BenchmarkChatLongPrompt(b *testing.B) {
	s := New(Options{})
	body, _ := json.Marshal(map[string]any{"model": "sim-general", "messages": []any{
		map[string]any{"role": "system", "content": longText(8000)},
		map[string]any{"role": "user", "content": longText(4000)},
	}})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, chatPath, strings.NewReader(string(body))))
	}
}

// BenchmarkMessagesCacheControl sends the same 3,000-token request with breakpoints on the
// system prompt and the last message again and again, so every request after the first reads
// them from the prompt cache.
func BenchmarkMessagesCacheControl(b *testing.B) {
	s := New(Options{})
	body, _ := json.Marshal(map[string]any{"model": "sim-sonnet", "max_tokens": 256,
		"system":   []any{text(longText(8000), eph(""))},
		"messages": []any{user(text(longText(4000), eph("")))},
	})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, messagesPath, strings.NewReader(string(body))))
	}
}
