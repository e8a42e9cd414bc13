package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
)

// autoCacheConfig has chat-via-anthropic: a chat model served by the simulator's Anthropic
// upstream at claude-sonnet-4-5's catalog prices ($3 input, $3.75 five-minute cache write,
// $0.30 cache read per million tokens: https://platform.claude.com/docs/en/about-claude/pricing),
// with the provider's prompt_cache as given.
func autoCacheConfig(t *testing.T, promptCache string) *config.Config {
	t.Helper()
	cfg := passthroughConfig(t)
	for i := range cfg.Providers {
		if cfg.Providers[i].Name == "sim-anthropic" {
			cfg.Providers[i].PromptCache = promptCache
		}
	}
	cfg.Models = append(cfg.Models, config.Model{ID: "chat-via-anthropic", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "sim-anthropic", Model: "sim-sonnet"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "chat-via-anthropic")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestChatClientOfAnthropicReadsTheCache: an OpenAI chat client whose model is served by an
// Anthropic upstream, through the official openai-go SDK, over three turns of one
// conversation with a long system prompt (about 1,600 tokens, above Anthropic's 1,024-token
// minimum). OpenAI caches every prompt by itself; Anthropic only where asked, so the gateway
// asks (a top-level cache_control) once the conversation goes on: the first turn, a one-off so
// far, writes nothing; the second writes the prefix at the five-minute write price; the third
// reads it at the cache-read price, a tenth of the input price, and the client sees the reads
// as prompt_tokens_details.cached_tokens. Each bill is its record's counts at its price. With
// the provider's prompt_cache off, the third turn reads nothing. Trial h10 D2: before, every
// turn of such a conversation was billed at the full input price.
func TestChatClientOfAnthropicReadsTheCache(t *testing.T) {
	rules := strings.Repeat("Answer in plain words and keep to the point of the question. ", 100) // ~6,300 characters
	for _, c := range []struct {
		promptCache string
		wantReads   bool
	}{{"", true}, {config.PromptCacheOff, false}} {
		g := apitest.Start(t, apitest.Options{Config: autoCacheConfig(t, c.promptCache)})
		tenant := g.NewTenant(t, "acme", 0, 100_000_000)
		client := openAIClient(g, t, tenant.Key)
		msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(rules), openai.UserMessage("First question?")}
		var turns [3]struct {
			cached             int64
			reads, writes, all int64
		}
		for turn := range turns {
			res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "chat-via-anthropic", Messages: msgs, MaxTokens: param.NewOpt[int64](32)})
			if err != nil {
				t.Fatalf("prompt_cache %q, turn %d: %v", c.promptCache, turn+1, err)
			}
			rec := latestUsage(t, g, tenant.Account, int64(turn+1))
			checkReproducible(t, rec)
			if rec.Price.CacheRead != 300_000 || rec.Price.CacheWrite5m != 3_750_000 || rec.Price.Input != 3_000_000 {
				t.Fatalf("the record's price is not claude-sonnet-4-5's: %+v", rec.Price.Rates)
			}
			if rec.CacheReadTokens > 0 && rec.Costs.CacheRead != price.Part(rec.CacheReadTokens, 300_000) {
				t.Errorf("turn %d: %d cache reads cost %d", turn+1, rec.CacheReadTokens, rec.Costs.CacheRead)
			}
			turns[turn].cached = res.Usage.PromptTokensDetails.CachedTokens
			turns[turn].reads, turns[turn].writes, turns[turn].all = rec.CacheReadTokens, rec.CacheWrite5mTokens+rec.CacheWrite1hTokens, rec.InputTokens
			msgs = append(msgs, openai.AssistantMessage(res.Choices[0].Message.Content), openai.UserMessage("And the next question?"))
		}
		t.Logf("prompt_cache %q: %+v", c.promptCache, turns)
		first, second, third := turns[0], turns[1], turns[2]
		if first.reads != 0 || first.writes != 0 {
			t.Errorf("prompt_cache %q: the first turn, a one-off so far, read %d and wrote %d cache tokens; want none", c.promptCache, first.reads, first.writes)
		}
		switch {
		case c.wantReads && (second.writes < 1024 || third.reads < second.writes || third.cached != third.reads):
			t.Errorf("prompt_cache %q: the second turn wrote %d tokens, the third read %d (the client saw %d cached): want the prefix written, then read",
				c.promptCache, second.writes, third.reads, third.cached)
		case !c.wantReads && (second.writes != 0 || third.reads != 0 || third.cached != 0):
			t.Errorf("prompt_cache off: the second turn wrote %d tokens, the third read %d: want none", second.writes, third.reads)
		}
	}
}
