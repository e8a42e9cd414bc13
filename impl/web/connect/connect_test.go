package connect

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/price"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the code")

// target is a gateway behind https with a key of the real shape, and the chat model's facts
// as the console reads them from the default configuration (service-flint: a fusion model
// whose experts are priced differently).
var target = Target{BaseURL: "https://gateway.example.com", Key: "tgk_0123456789ABCDEFabcdef0123456789ABCDEFab",
	ChatModel: "service-flint", MessagesModel: "service-sonnet", Chat: Facts(config.Default(), "service-flint")}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestSettingsExact: each client's settings for a gateway URL and a key, byte for byte
// (testdata/<client>.golden, read there as a person reads them), as the key-created page
// shows them and a terminal command would print them.
func TestSettingsExact(t *testing.T) {
	for _, s := range All(target) {
		if s.Unavailable != "" || len(s.Blocks) == 0 {
			t.Errorf("%s has nothing to paste: %q", s.ID, s.Unavailable)
		}
		golden(t, s.ID, s.Text())
	}
}

// TestSettingsAddresses: the base URL each client wants, which the clients disagree on: the
// Anthropic ones (Claude Code, the Anthropic SDKs) without /v1, the OpenAI ones (Codex,
// opencode, the OpenAI SDKs) with it, MCP at /api/mcp; the key sent as a bearer token
// everywhere (never as ANTHROPIC_API_KEY, which is x-api-key).
func TestSettingsAddresses(t *testing.T) {
	text := map[string]string{}
	for _, s := range All(target) {
		text[s.ID] = s.Text()
	}
	for id, wants := range map[string][]string{
		"claude-code":   {"ANTHROPIC_BASE_URL=https://gateway.example.com\n", "ANTHROPIC_AUTH_TOKEN=" + target.Key + "\n"},
		"codex":         {`base_url = "https://gateway.example.com/v1"`, `env_key = "TOLLGATE_API_KEY"`, `wire_api = "responses"`, "export TOLLGATE_API_KEY=" + target.Key},
		"opencode":      {`"baseURL": "https://gateway.example.com/v1"`, `"apiKey": "{env:TOLLGATE_API_KEY}"`},
		"openai-sdk":    {`baseURL: "https://gateway.example.com/v1"`, `base_url="https://gateway.example.com/v1"`},
		"anthropic-sdk": {`baseURL: "https://gateway.example.com", authToken:`, `base_url="https://gateway.example.com", auth_token=`},
		"ai-sdk":        {`createOpenAI({ baseURL: "https://gateway.example.com/v1", apiKey:`, `createAnthropic({ baseURL: "https://gateway.example.com/v1", authToken:`},
		"langchain":     {`configuration: { baseURL: "https://gateway.example.com/v1" }`, `base_url="https://gateway.example.com/v1"`, `anthropicApiUrl: "https://gateway.example.com",`, `apiKey: null, authToken:`},
		"mcp":           {"URL: https://gateway.example.com/api/mcp\n", "Header: Authorization: Bearer " + target.Key + "\n", `"Authorization": "Bearer ${TOLLGATE_API_KEY}"`, "export TOLLGATE_API_KEY=" + target.Key},
	} {
		for _, want := range wants {
			if !strings.Contains(text[id], want) {
				t.Errorf("%s lacks %q:\n%s", id, want, text[id])
			}
		}
	}
	for _, s := range All(target) {
		for _, b := range s.Blocks {
			if strings.Contains(b.Text, "ANTHROPIC_API_KEY") || strings.Contains(strings.ToLower(b.Text), "x-api-key") {
				t.Errorf("%s sends the key as x-api-key:\n%s", s.ID, b.Text)
			}
		}
	}
}

// TestSettingsQuoting: an address with characters a file format gives meaning to stays one
// string in every block: the JSON blocks parse and hold it as it was, and the shell words are
// quoted.
func TestSettingsQuoting(t *testing.T) {
	odd := Target{BaseURL: `https://gw.example.com/a "b"\c`, Key: "tgk_it's", ChatModel: "m", MessagesModel: "n"}
	for _, s := range All(odd) {
		for _, b := range s.Blocks {
			switch b.Lang {
			case "json":
				var v any
				if err := json.Unmarshal([]byte(b.Text), &v); err != nil {
					t.Errorf("%s: %s is not JSON: %v\n%s", s.ID, b.Where, err, b.Text)
				}
				if !strings.Contains(b.Text, `https://gw.example.com/a \"b\"\\c`) {
					t.Errorf("%s: %s does not hold the address as a JSON string:\n%s", s.ID, b.Where, b.Text)
				}
			case "sh":
				if strings.Contains(b.Text, "tgk_it's") && !strings.Contains(b.Text, `'tgk_it'\''s'`) {
					t.Errorf("%s: the key is not quoted for the shell:\n%s", s.ID, b.Text)
				}
			}
		}
	}
}

// TestSettingsWithoutAModel: a key that may use no model of a family gets no settings for the
// clients that need one, and says why; the MCP endpoint needs no model.
func TestSettingsWithoutAModel(t *testing.T) {
	onlyChat := target
	onlyChat.MessagesModel = ""
	for _, s := range All(onlyChat) {
		wantNone := s.ID == "claude-code" || s.ID == "anthropic-sdk"
		if got := s.Unavailable != ""; got != wantNone || (wantNone && len(s.Blocks) > 0) {
			t.Errorf("%s without a Messages model: unavailable %q, %d blocks", s.ID, s.Unavailable, len(s.Blocks))
		}
		if wantNone && !strings.Contains(s.Text(), "no model served on Anthropic Messages") {
			t.Errorf("%s does not say why: %q", s.ID, s.Text())
		}
	}
}

// TestChooseModels picks the first model of each family among those a key may use, in the
// account's order, by the configuration's families.
func TestChooseModels(t *testing.T) {
	cfg := config.Default()
	for _, c := range []struct {
		ids            []string
		chat, messages string
	}{
		{[]string{"service-flint", "service-flint-base", "service-sonnet"}, "service-flint", "service-sonnet"},
		{[]string{"service-sonnet", "service-flint-base"}, "service-flint-base", "service-sonnet"},
		{[]string{"service-sonnet"}, "", "service-sonnet"},
		{[]string{"no-such-model", "service-flint"}, "service-flint", ""},
		{nil, "", ""},
	} {
		chat, messages := ChooseModels(cfg, c.ids)
		if chat != c.chat || messages != c.messages {
			t.Errorf("ChooseModels(%v) = %q, %q; want %q, %q", c.ids, chat, messages, c.chat, c.messages)
		}
	}
}

// capped is target with service-sonnet's facts from the default configuration and a credit
// cap of micros.
func capped(t *testing.T, micros int64) Target {
	t.Helper()
	c := target
	c.Messages, c.CreditCapMicros = Facts(config.Default(), c.MessagesModel), &micros
	if c.Messages == nil {
		t.Fatal("no facts for service-sonnet")
	}
	return c
}

// TestClaudeCodeCapWarning (newcomer trial: a key made with a $0.25 daily cap got Claude Code's
// settings and a 402 on every turn): a key whose credit cap is below what one Claude Code turn
// holds is told so beside the settings, with README's figure ($0.65 on service-sonnet), the
// cap to raise to, and the CLAUDE_CODE_MAX_OUTPUT_TOKENS that fits if one does; a cap that
// holds a turn, no cap, or a model whose price is not known say nothing.
func TestClaudeCodeCapWarning(t *testing.T) {
	for _, c := range []struct {
		micros int64
		wants  []string
	}{
		{250_000, []string{"credit cap ($0.25)", "about $0.65", "28,000 tokens", "32,000 output tokens", "402",
			"Raise the key's credit cap to $0.65 or more", "export CLAUDE_CODE_MAX_OUTPUT_TOKENS=5000", "holds about $0.25", "approximate"}},
		{550_000, []string{"credit cap ($0.55)", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=25000"}},
		{100_000, []string{"credit cap ($0.10)", "no CLAUDE_CODE_MAX_OUTPUT_TOKENS fits", "instructions alone hold about $0.17"}},
		{2_505_000, nil},
		{650_000, nil},
	} {
		s := ClaudeCode(capped(t, c.micros))
		if (s.Warning != "") != (c.wants != nil) {
			t.Errorf("cap %d: warning %q", c.micros, s.Warning)
		}
		for _, want := range c.wants {
			if !strings.Contains(s.Warning, want) || !strings.Contains(s.Text(), want) {
				t.Errorf("cap %d: the warning lacks %q:\n%s", c.micros, want, s.Text())
			}
		}
	}
	golden(t, "claude-code-capped", ClaudeCode(capped(t, 250_000)).Text())

	unknown := capped(t, 250_000)
	unknown.Messages = nil
	uncapped := capped(t, 0)
	uncapped.CreditCapMicros = nil
	for _, tg := range []Target{unknown, uncapped, target} {
		if w := ClaudeCode(tg).Warning; w != "" {
			t.Errorf("a warning without a known cap and price: %q", w)
		}
	}
}

// TestClaudeCodeFittingOutput: the output bound the warning suggests is the reservation's own
// arithmetic (price.Worst at the model's price) under the cap, and the next thousand is not.
func TestClaudeCodeFittingOutput(t *testing.T) {
	f := *capped(t, 0).Messages
	for _, limit := range []int64{200_000, 250_000, 288_000, 550_000, 640_000} {
		fit := claudeCodeFittingOutput(f, limit)
		if fit == 0 || fit%1000 != 0 {
			t.Fatalf("cap %d: fit %d", limit, fit)
		}
		if got := price.Worst(ClaudeCodeInstructionTokens, int64(fit), f.Price); got > limit {
			t.Errorf("cap %d: %d output tokens hold %d", limit, fit, got)
		}
		if next := price.Worst(ClaudeCodeInstructionTokens, int64(fit+1000), f.Price); next <= limit && fit+1000 < ClaudeCodeMaxTokens {
			t.Errorf("cap %d: %d fits, %d would too", limit, fit, fit+1000)
		}
	}
	if fit := claudeCodeFittingOutput(f, 160_000); fit != 0 {
		t.Errorf("a cap below the instructions' hold fits %d", fit)
	}
}

// TestClaudeCodeContextWindow: with the model's context window known, the note gives Claude
// Code's CLAUDE_CODE_AUTO_COMPACT_WINDOW (README: it otherwise assumes 1M tokens and warns).
func TestClaudeCodeContextWindow(t *testing.T) {
	if n := ClaudeCode(capped(t, 0)).Note; !strings.Contains(n, "export CLAUDE_CODE_AUTO_COMPACT_WINDOW=200000") {
		t.Errorf("the note lacks the context window: %q", n)
	}
	if n := ClaudeCode(target).Note; strings.Contains(n, "AUTO_COMPACT") {
		t.Errorf("a window said without one known: %q", n)
	}
}

// TestClaudeCodeTurnWithoutFacts: without the model's price and the key's cap (`tollgate
// connect`, which cannot learn them from the gateway), Claude Code's note gives the rule a
// small cap runs into, and what to do, rather than nothing; with them, the warning does.
func TestClaudeCodeTurnWithoutFacts(t *testing.T) {
	n := ClaudeCode(target).Note
	for _, want := range []string{"28,000 tokens", "32,000 output tokens", "credit cap", "402", "CLAUDE_CODE_MAX_OUTPUT_TOKENS"} {
		if !strings.Contains(n, want) {
			t.Errorf("the note lacks %q: %q", want, n)
		}
	}
	if n := ClaudeCode(capped(t, 0)).Note; strings.Contains(n, "402") {
		t.Errorf("the rule said where the figure is known: %q", n)
	}
}

// TestFactsOfTheModelList: a model of GET /v1/models gives the facts its pricing, max_tokens
// and context_length say, the long-context tier included, so that `tollgate connect` reserves a
// turn as the console does (a long turn at the tier's rates); a model whose answer says no
// price gives none, and the rule is said.
func TestFactsOfTheModelList(t *testing.T) {
	maxTokens, window := 64000, 200000
	m := api.Model{Id: "service-sonnet", MaxTokens: &maxTokens, ContextLength: &window, Pricing: &api.ModelPricing{
		InputMicrosPerMtok: 3_000_000, CacheReadMicrosPerMtok: 300_000, CacheWrite5mMicrosPerMtok: 3_750_000,
		CacheWrite1hMicrosPerMtok: 6_000_000, OutputMicrosPerMtok: 15_000_000,
		LongContext: &api.ModelLongContextRates{AboveInputTokens: 200_000, InputMicrosPerMtok: 6_000_000, CacheReadMicrosPerMtok: 600_000,
			CacheWrite5mMicrosPerMtok: 7_500_000, CacheWrite1hMicrosPerMtok: 12_000_000, OutputMicrosPerMtok: 22_500_000},
	}}
	want := ModelFacts{MaxOutputTokens: 64000, ContextTokens: 200000, Price: price.Price{
		Rates: price.Rates{Input: 3_000_000, CacheRead: 300_000, CacheWrite5m: 3_750_000, CacheWrite1h: 6_000_000, Output: 15_000_000},
		LongContext: &price.Tier{AboveInputTokens: 200_000,
			Rates: price.Rates{Input: 6_000_000, CacheRead: 600_000, CacheWrite5m: 7_500_000, CacheWrite1h: 12_000_000, Output: 22_500_000}},
	}}
	got := FactsOf(m)
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("FactsOf: %+v, want %+v", got, want)
	}
	if long := price.Worst(300_000, 0, got.Price); long != 300_000*12 {
		t.Errorf("300,000 input tokens are held at %d micro-units, want the long-context tier's dearest input rate", long)
	}
	if f := FactsOf(api.Model{Id: "service-sonnet", MaxTokens: &maxTokens}); f != nil {
		t.Errorf("a model without pricing: %+v, want no facts", f)
	}
}

// opencodeEntry is the model's entry in opencode's configuration of the setup.
func opencodeEntry(t *testing.T, s Setup, model string) map[string]any {
	t.Helper()
	var cfg struct {
		Provider map[string]struct {
			Models map[string]map[string]any `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(s.Blocks[0].Text), &cfg); err != nil {
		t.Fatalf("opencode's configuration is not JSON: %v\n%s", err, s.Blocks[0].Text)
	}
	entry, ok := cfg.Provider["tollgate"].Models[model]
	if !ok {
		t.Fatalf("opencode's configuration has no %s:\n%s", model, s.Blocks[0].Text)
	}
	return entry
}

// TestAgentsToldCostAndWindow: with the chat model's facts known, opencode's model entry says
// its price in US dollars per million tokens, exactly (service-flint-base: $0.50 input, $0.125
// cache reads, $0.50 cache writes, the configuration's default, $1.50 output) and its limit
// (the window and output bound), and Codex's config.toml its window; a fusion model priced
// differently by its experts says the dearest expert's rates and the note says they bound the
// bill; without facts neither says any.
func TestAgentsToldCostAndWindow(t *testing.T) {
	base := target
	base.ChatModel, base.Chat = "service-flint-base", Facts(config.Default(), "service-flint-base")
	oc := Opencode(base)
	golden(t, "opencode-flint-base", oc.Text())
	golden(t, "codex-flint-base", Codex(base).Text())
	entry := opencodeEntry(t, oc, "service-flint-base")
	wantCost := map[string]any{"input": 0.5, "output": 1.5, "cache_read": 0.125, "cache_write": 0.5}
	if !reflect.DeepEqual(entry["cost"], wantCost) {
		t.Errorf("opencode's cost: %v, want %v", entry["cost"], wantCost)
	}
	if want := map[string]any{"context": 128000.0, "output": 32768.0}; !reflect.DeepEqual(entry["limit"], want) {
		t.Errorf("opencode's limit: %v, want %v", entry["limit"], want)
	}
	if strings.Contains(oc.Note, "fusion") {
		t.Errorf("a model with one price is said to be a fusion model's dearest: %q", oc.Note)
	}
	if !strings.Contains(Codex(base).Blocks[0].Text, "\nmodel_context_window = 128000\n") {
		t.Errorf("Codex is not told the window:\n%s", Codex(base).Blocks[0].Text)
	}

	if n := Opencode(target).Note; !strings.Contains(n, "service-flint is a fusion model") || !strings.Contains(n, "the most the session can have cost") {
		t.Errorf("the fusion model's note does not say its cost is the dearest expert's: %q", n)
	}

	unknown := base
	unknown.Chat = nil
	entry = opencodeEntry(t, Opencode(unknown), "service-flint-base")
	if _, ok := entry["cost"]; ok || entry["limit"] != nil {
		t.Errorf("opencode is told a price or limit that is not known: %v", entry)
	}
	if text := Codex(unknown).Text(); strings.Contains(text, "model_context_window") {
		t.Errorf("Codex is told a window that is not known:\n%s", text)
	}
}

// TestOpencodeLongContext: opencode 1.18.33 does not use a long-context price for a model of
// its configuration, so none is given, and when the model's window holds a request above the
// tier's threshold the note says opencode's figure is then below the bill; service-flint,
// whose tier (the dearest of its experts') starts at its window, and a model without a tier
// say nothing of it.
func TestOpencodeLongContext(t *testing.T) {
	long := *target.Chat
	if long.Price.LongContext == nil || long.Price.LongContext.AboveInputTokens != 200_000 {
		t.Fatalf("service-flint's long-context tier: %+v", long.Price.LongContext)
	}
	long.ContextTokens = 1_000_000
	tg := target
	tg.Chat = &long
	s := Opencode(tg)
	if strings.Contains(s.Blocks[0].Text, "context_over_200k") {
		t.Errorf("opencode is given a long-context price it does not use:\n%s", s.Blocks[0].Text)
	}
	if !strings.Contains(s.Note, "above 200,000 input tokens") || !strings.Contains(s.Note, "below the bill") {
		t.Errorf("the note does not say opencode's figure is below the bill above the tier: %q", s.Note)
	}
	base := target
	base.ChatModel, base.Chat = "service-flint-base", Facts(config.Default(), "service-flint-base")
	for _, tg := range []Target{target, base} {
		if n := Opencode(tg).Note; strings.Contains(n, "below the bill") {
			t.Errorf("%s: %q", tg.ChatModel, n)
		}
	}
}

// TestUSDPerMillion: micro-units per million tokens are written as exact decimal dollars.
func TestUSDPerMillion(t *testing.T) {
	for micros, want := range map[int64]string{0: "0", 1: "0.000001", 125_000: "0.125", 1_500_000: "1.5", 3_750_000: "3.75", 15_000_000: "15"} {
		if got := usdPerMillion(micros); string(got) != want {
			t.Errorf("usdPerMillion(%d) = %s, want %s", micros, got, want)
		}
	}
}

// TestFilesHoldNoKey: a settings file the page gives (JSON, TOML) names the key's environment
// variable and never holds the key: such files live in a project or a home directory and get
// committed or shared, where the shell's export does not.
func TestFilesHoldNoKey(t *testing.T) {
	for _, s := range All(target) {
		for _, b := range s.Blocks {
			if (b.Lang == "json" || b.Lang == "toml") && strings.Contains(b.Text, target.Key) {
				t.Errorf("%s, %s holds the key:\n%s", s.ID, b.Where, b.Text)
			}
		}
	}
}
