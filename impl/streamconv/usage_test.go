package streamconv

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// cacheStreams are streams whose usage has the shapes of the providers' documentation (the
// sources are named in the files, under testdata/usage), with the usage each must meter.
var cacheStreams = []struct {
	f    llm.Format
	file string
	want llm.Usage
}{
	// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching: 2,000 uncached, 10,000
	// written for one hour, 50,000 read.
	{llm.FormatMessages, "messages_cache.sse",
		llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite1hTokens: 10000, OutputTokens: 500, ServiceTier: "priority"}},
	// https://platform.openai.com/docs/api-reference/chat/object: 52,000 prompt tokens, 50,000 of
	// them cached.
	{llm.FormatChat, "chat_cache.sse",
		llm.Usage{InputTokens: 52000, CachedInputTokens: 50000, OutputTokens: 500, ReasoningTokens: 128, ServiceTier: "priority"}},
	// https://platform.openai.com/docs/api-reference/responses/object.
	{llm.FormatResponses, "responses_cache.sse",
		llm.Usage{InputTokens: 52000, CachedInputTokens: 50000, OutputTokens: 500, ReasoningTokens: 128, ServiceTier: "priority"}},
}

// translatedUsage are the usage objects each client format is told, by upstream file: the
// cache counts in the client's own terms.
var translatedUsage = map[string]map[llm.Format][]string{
	"messages_cache.sse": {
		llm.FormatChat:      {`"service_tier":"priority","choices":[],"usage":{"prompt_tokens":62000,"completion_tokens":500,"total_tokens":62500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`},
		llm.FormatResponses: {`"usage":{"input_tokens":62000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":62500},"service_tier":"priority"`},
		llm.FormatMessages: {
			`"usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":1,"service_tier":"priority"}`,
			`"usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"output_tokens":500}`,
		},
	},
	"chat_cache.sse": {
		llm.FormatChat:      {`"service_tier":"priority","choices":[],"usage":{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`},
		llm.FormatResponses: {`"usage":{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500},"service_tier":"priority"`},
		// message_start comes before the chat usage: it has the estimate; message_delta the
		// real counts.
		llm.FormatMessages: {`"usage":{"input_tokens":2000,"cache_creation_input_tokens":0,"cache_read_input_tokens":50000,"output_tokens":500,"output_tokens_details":{"thinking_tokens":128}}`},
	},
	"responses_cache.sse": {
		llm.FormatChat:      {`"service_tier":"priority","choices":[],"usage":{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`},
		llm.FormatResponses: {`"usage":{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500},"service_tier":"priority"`},
		llm.FormatMessages:  {`"usage":{"input_tokens":2000,"cache_creation_input_tokens":0,"cache_read_input_tokens":50000,"output_tokens":500,"output_tokens_details":{"thinking_tokens":128}}`},
	},
}

func usageFixture(t testing.TB, name string) []byte {
	return readFile(t, filepath.Join("testdata", "usage", name))
}

// TestCacheUsageInStreams: each documented stream meters its exact counts, decoded with the fast
// paths and without, translated to every client format and relayed to a client of its own; the
// translated usage objects carry the counts in the client's format (and the official SDKs read
// them so); the relayed stream is the upstream's, usage included, byte for byte.
func TestCacheUsageInStreams(t *testing.T) {
	for _, s := range cacheStreams {
		raw := usageFixture(t, s.file)
		for _, disable := range []bool{false, true} {
			disableFastPath = disable
			evs, done := decodeAll(t, s.f, raw)
			disableFastPath = false
			if got := accumulate(evs).Usage; !done || got != s.want {
				t.Errorf("%s (fast paths off %v): decoded %+v, want %+v", s.file, disable, got, s.want)
			}
		}
		for _, client := range formats {
			t.Run(s.file+".to_"+client.short, func(t *testing.T) {
				meta := metaFor(client.f)
				tr, metered := pipe(t, s.f, client.f, meta, raw)
				if metered != s.want {
					t.Errorf("metered %+v, want %+v", metered, s.want)
				}
				for _, w := range translatedUsage[s.file][client.f] {
					if !bytes.Contains(tr, []byte(w)) {
						t.Errorf("the client is not told\n%s\nin\n%s", w, tr)
					}
				}
				want := result{Text: "The cached answer.", Stop: llm.StopEnd, Usage: s.want}
				compareResult(t, "client", client.f, meta, checkClient(t, client.f, tr, meta), want)
				compareResult(t, "SDK", client.f, meta, sdkRead(t, client.f, tr), want)
			})
		}
		relayed, enc := relayAll(t, s.f, raw, true)
		if u := enc.Usage(); u != s.want {
			t.Errorf("%s relayed: metered %+v, want %+v", s.file, u, s.want)
		}
		if !bytes.Equal(relayed, sameFormatTranscript(t, raw)) {
			t.Errorf("%s relayed: not the upstream's stream:\n%s", s.file, relayed)
		}
	}
}

// sameFormatTranscript is what a relay of raw sends: every event as it came, with the model
// (which the relay rewrites to "pub") and the comments and pings aside.
func sameFormatTranscript(t *testing.T, raw []byte) []byte {
	var out []byte
	for _, ev := range readEvents(t, raw) {
		data := bytes.ReplaceAll(ev.Data, []byte(`"model":"claude-sonnet-4-5-20250929"`), []byte(`"model":"pub"`))
		data = bytes.ReplaceAll(data, []byte(`"model":"gpt-5-mini-2025-08-07"`), []byte(`"model":"pub"`))
		out = sse.AppendEvent(out, sse.Event{Name: ev.Name, Data: data})
	}
	return out
}

// cutAfter is raw up to and including the event whose data contains marker: a stream whose
// connection dropped there.
func cutAfter(t *testing.T, raw []byte, marker string) []byte {
	i := bytes.Index(raw, []byte(marker))
	if i < 0 {
		t.Fatalf("no %q in the stream", marker)
	}
	end := bytes.Index(raw[i:], []byte("\n\n"))
	return raw[:i+end+2]
}

// TestCutStreamKeepsCacheCounts: a Messages stream cut off after its first text keeps the input
// and cache counts of message_start (and its tier), translated or relayed, so that what the
// upstream bills for the input is billed.
func TestCutStreamKeepsCacheCounts(t *testing.T) {
	raw := cutAfter(t, usageFixture(t, "messages_cache.sse"), `"text":"The cached"`)
	want := llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite1hTokens: 10000, ServiceTier: "priority"}
	for _, client := range formats {
		tr, metered := pipe(t, llm.FormatMessages, client.f, metaFor(client.f), raw)
		if metered != want {
			t.Errorf("to %s: metered %+v, want %+v", client.short, metered, want)
		}
		if !bytes.Contains(tr, []byte("the upstream stream ended early")) {
			t.Errorf("to %s: the stream does not fail:\n%s", client.short, tr)
		}
	}
	if _, enc := relayAll(t, llm.FormatMessages, raw, false); enc.Usage() != want {
		t.Errorf("relayed: metered %+v, want %+v", enc.Usage(), want)
	}
}

// TestMessagesUsageRepeatedInDelta: newer Messages streams repeat the input and cache counts in
// message_delta; a count repeated as zero, or left out, keeps the one before, a new non-zero one
// replaces it, and a breakdown given late splits the writes anew without counting them twice.
func TestMessagesUsageRepeatedInDelta(t *testing.T) {
	const start = `{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"output_tokens":1}}}`
	for _, c := range []struct {
		name, delta string
		want        llm.Usage
	}{
		{"zeros", `{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":500}`,
			llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite5mTokens: 10000, OutputTokens: 500}},
		{"output only", `{"output_tokens":500}`,
			llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite5mTokens: 10000, OutputTokens: 500}},
		{"grown by a server tool", `{"input_tokens":2600,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"output_tokens":500}`,
			llm.Usage{InputTokens: 62600, CachedInputTokens: 50000, CacheWrite5mTokens: 10000, OutputTokens: 500}},
		{"breakdown late", `{"cache_creation_input_tokens":10000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500}`,
			llm.Usage{InputTokens: 62000, CachedInputTokens: 50000, CacheWrite1hTokens: 10000, OutputTokens: 500}},
		// Server-side compaction: its iteration is billed and left out of the top-level counts.
		{"compaction", `{"output_tokens":500,"iterations":[{"type":"compaction","input_tokens":170000,"cache_read_input_tokens":10000,"cache_creation_input_tokens":0,"output_tokens":3500},{"type":"message","input_tokens":2000,"cache_read_input_tokens":50000,"cache_creation_input_tokens":10000,"output_tokens":500}]}`,
			llm.Usage{InputTokens: 242000, CachedInputTokens: 60000, CacheWrite5mTokens: 10000, OutputTokens: 4000, CompactionOutputTokens: 3500}},
		{"two compactions", `{"output_tokens":500,"iterations":[{"type":"compaction","input_tokens":100000,"output_tokens":2000},{"type":"message","input_tokens":2000,"output_tokens":100},{"type":"compaction","input_tokens":80000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1500},{"type":"message","input_tokens":2000,"output_tokens":400}]}`,
			llm.Usage{InputTokens: 242000, CachedInputTokens: 50000, CacheWrite5mTokens: 10000, OutputTokens: 4000, CompactionOutputTokens: 3500}},
	} {
		evs := [][2]string{
			{"message_start", start},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":` + c.delta + `}`},
			{"message_stop", `{"type":"message_stop"}`},
		}
		decoded, _ := decodeEvents(t, llm.FormatMessages, evs...)
		if got := accumulate(decoded).Usage; got != c.want {
			t.Errorf("%s: decoded %+v, want %+v", c.name, got, c.want)
		}
		var raw []byte
		for _, e := range evs {
			raw = sse.AppendEvent(raw, sse.Event{Name: e[0], Data: []byte(e[1])})
		}
		for _, client := range formats {
			if _, metered := pipe(t, llm.FormatMessages, client.f, metaFor(client.f), raw); metered != c.want {
				t.Errorf("%s to %s: metered %+v, want %+v", c.name, client.short, metered, c.want)
			}
		}
	}
}

// TestChatChunksNameTheTier: a chat client's chunks name the tier that serves the answer from
// when the upstream says it; before that, default.
func TestChatChunksNameTheTier(t *testing.T) {
	tr, _ := pipe(t, llm.FormatMessages, llm.FormatChat, metaFor(llm.FormatChat), usageFixture(t, "messages_cache.sse"))
	chunks := strings.Split(strings.TrimSpace(string(tr)), "\n\n")
	if !strings.Contains(chunks[0], `"service_tier":"default"`) {
		t.Errorf("the role chunk, written before the upstream's usage: %s", chunks[0])
	}
	for _, c := range chunks[1 : len(chunks)-1] {
		if !strings.Contains(c, `"service_tier":"priority"`) {
			t.Errorf("a chunk after message_start: %s", c)
		}
	}
	// An Anthropic standard tier is OpenAI's default; batch has no OpenAI equivalent, so an
	// OpenAI client is told default. A Messages client is told either as it is.
	for tier, want := range map[string][2]string{"standard": {"default", `"service_tier":"standard"`}, "batch": {"default", `"service_tier":"batch"`}} {
		raw := bytes.ReplaceAll(usageFixture(t, "messages_cache.sse"), []byte(`"service_tier":"priority"`), []byte(`"service_tier":"`+tier+`"`))
		tr, _ := pipe(t, llm.FormatMessages, llm.FormatChat, metaFor(llm.FormatChat), raw)
		if strings.Count(string(tr), `"service_tier":"`+want[0]+`"`) != len(strings.Split(strings.TrimSpace(string(tr)), "\n\n"))-1 {
			t.Errorf("%s to chat:\n%s", tier, tr)
		}
		tr, _ = pipe(t, llm.FormatMessages, llm.FormatMessages, metaFor(llm.FormatMessages), raw)
		if !strings.Contains(string(tr), want[1]) {
			t.Errorf("%s to Messages:\n%s", tier, tr)
		}
	}
	// An OpenAI tier without an Anthropic name is left out of a Messages client's usage.
	raw := bytes.ReplaceAll(usageFixture(t, "messages_cache.sse"), []byte(`"service_tier":"priority"`), []byte(`"service_tier":"flex"`))
	if tr, _ := pipe(t, llm.FormatMessages, llm.FormatMessages, metaFor(llm.FormatMessages), raw); strings.Contains(string(tr), `"service_tier"`) {
		t.Errorf("flex to Messages:\n%s", tr)
	}
}

// TestResponsesFailureAfterErrorKeepsItsUsage: an upstream Responses stream that fails the way
// §2.5 describes (the error event, then response.failed carrying the usage of what was
// generated) is metered at that usage, for every client format, as it is when response.failed
// comes alone (trial h1: the error first left the request billed at its estimate).
func TestResponsesFailureAfterErrorKeepsItsUsage(t *testing.T) {
	const usage = `"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":800,"output_tokens_details":{"reasoning_tokens":700},"total_tokens":1800}`
	want := llm.Usage{InputTokens: 1000, OutputTokens: 800, ReasoningTokens: 700}
	for _, withError := range []bool{true, false} {
		evs := [][2]string{
			{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-5","status":"in_progress","output":[]}}`},
			{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}`},
		}
		if withError {
			evs = append(evs, [2]string{"error", `{"type":"error","sequence_number":2,"code":"server_error","message":"The server had an error.","param":null}`})
		}
		evs = append(evs, [2]string{"response.failed", `{"type":"response.failed","sequence_number":3,"response":{"id":"resp_1","model":"gpt-5","status":"failed","error":{"code":"server_error","message":"The server had an error."},"output":[],` + usage + `}}`})
		decoded, _ := decodeEvents(t, llm.FormatResponses, evs...)
		if got := accumulate(decoded); got.Usage != want || !got.HasError {
			t.Errorf("error first %v: decoded usage %+v (error %v), want %+v", withError, got.Usage, got.HasError, want)
		}
		var raw []byte
		for _, e := range evs {
			raw = sse.AppendEvent(raw, sse.Event{Name: e[0], Data: []byte(e[1])})
		}
		for _, client := range formats {
			if _, metered := pipe(t, llm.FormatResponses, client.f, metaFor(client.f), raw); metered != want {
				t.Errorf("error first %v, to %s: metered %+v, want %+v", withError, client.short, metered, want)
			}
		}
	}
}

// TestChatAudioTokensReported: the audio tokens a chat stream's usage chunk reports
// (prompt_tokens_details.audio_tokens, completion_tokens_details.audio_tokens) reach the usage
// the exchange settles, relayed or translated, so that it can log an answer the meter cannot
// price in full.
func TestChatAudioTokensReported(t *testing.T) {
	raw := usageFixture(t, "chat_cache.sse")
	raw = bytes.Replace(raw, []byte(`"cached_tokens":50000,"audio_tokens":0`), []byte(`"cached_tokens":50000,"audio_tokens":1000`), 1)
	raw = bytes.Replace(raw, []byte(`"reasoning_tokens":128,"audio_tokens":0`), []byte(`"reasoning_tokens":128,"audio_tokens":300`), 1)
	if _, enc := relayAll(t, llm.FormatChat, raw, true); enc.Usage().AudioInputTokens != 1000 || enc.Usage().AudioOutputTokens != 300 {
		t.Errorf("relayed: %+v", enc.Usage())
	}
	if _, u := pipe(t, llm.FormatChat, llm.FormatMessages, metaFor(llm.FormatMessages), raw); u.AudioInputTokens != 1000 || u.AudioOutputTokens != 300 {
		t.Errorf("translated: %+v", u)
	}
}
