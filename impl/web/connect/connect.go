// Package connect writes the settings that point a client at a tollgate gateway with a key:
// Claude Code, the Codex CLI, opencode, the OpenAI and Anthropic SDKs, Vercel's AI SDK,
// LangChain and MCP clients. The web
// console's key-created page shows them, filled with the gateway's public URL and the new key;
// a command for a person at a terminal can print the same (Setup.Text).
//
// The settings are the ones the test suite runs the real clients with (impl/realclients:
// Claude Code's environment, Codex's config.toml with a custom Responses provider, the MCP
// configurations of Claude Code and Codex, opencode's opencode.json, the MCP TypeScript SDK and
// Inspector, the OpenAI and Anthropic TypeScript SDKs, and the TypeScript lines of the AI SDK
// and LangChain, which impl/realclients runs as they are written here), except where a Setup's
// Note says otherwise (the Python lines, which follow those clients' documentation). Changing a setting here
// without the test that runs it is inventing one: keep them in step with impl/realclients.
//
// Every function is pure: the same Target gives the same text, byte for byte.
package connect

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/routing"
)

// KeyVariable is the environment variable the settings keep the key in, for the clients that
// read it from one (Codex, opencode, the SDK lines, Codex's MCP server).
const KeyVariable = "TOLLGATE_API_KEY"

// Target is the gateway and the key a client is pointed at, and the models it asks for.
type Target struct {
	// BaseURL is the gateway's public URL, without a trailing slash and without /v1
	// ("https://gateway.example.com").
	BaseURL string
	// Key is the API key (tgk_…).
	Key string
	// ChatModel is a model served on chat completions and Responses (Codex, opencode, the
	// OpenAI SDKs); "" when the key may use none.
	ChatModel string
	// MessagesModel is a model served on Anthropic Messages (Claude Code, the Anthropic SDKs);
	// "" when the key may use none.
	MessagesModel string
	// Chat is ChatModel's price, output bound and window (Facts, or FactsOf from GET
	// /v1/models), which Codex's and opencode's settings give them; nil when they are not
	// known, and then those settings say nothing of them.
	Chat *ModelFacts
	// Messages is what the gateway reserves a turn on MessagesModel by (Facts, or FactsOf from
	// GET /v1/models); nil when it is not known, and then the rule is said rather than the
	// figure.
	Messages *ModelFacts
	// CreditCapMicros is the key's credit cap (store.APIKey.CreditCapMicros); nil when the key
	// has none or it is not known.
	CreditCapMicros *int64
}

// ModelFacts are what the gateway reserves a request to a model by: its price (the dearest of
// its upstreams', kind by kind, as routing.Model.MaxPrice) and its output limit; and its
// context window (0: not known).
type ModelFacts struct {
	Price           price.Price
	MaxOutputTokens int
	ContextTokens   int
	// HighestOfExperts reports that Price is, kind by kind, the highest rate of a fusion
	// model's experts, which are priced differently: the most a token can cost, while each
	// request is billed at the rates of the expert that answered it (GET /v1/models says basis
	// highest_of_experts).
	HighestOfExperts bool
}

// Facts are the configured model id's facts as a registry built from cfg reads them, priced as
// cfg was validated; nil for a model the configuration does not have. The console gives the
// facts of the model as the exchange holds it today (FactsFor), whose prices change on the
// day a dated catalog price does.
func Facts(cfg *config.Config, id string) *ModelFacts {
	m, ok := routing.NewRegistry(cfg).Model(id)
	if !ok {
		return nil
	}
	return FactsFor(m)
}

// FactsFor are a model's facts as the gateway's reservation reads them (routing.Model).
func FactsFor(m *routing.Model) *ModelFacts {
	return &ModelFacts{Price: m.MaxPrice(), MaxOutputTokens: m.MaxOutputTokens, ContextTokens: m.ContextTokens,
		HighestOfExperts: !m.PricedAlike()}
}

// FactsOf are a model's facts as the gateway says them on GET /v1/models (what `tollgate
// connect` learns, where the console reads the configuration): its price's base rates and
// long-context tier (for a fusion model the highest of any expert's, what the reservation
// holds, as Facts), its output bound and its window; nil when the answer gives no
// price (a gateway that does not say it), and then the rule is said rather than the figure.
func FactsOf(m api.Model) *ModelFacts {
	w := m.Pricing
	if w == nil {
		return nil
	}
	f := &ModelFacts{Price: price.Price{Rates: price.Rates{
		Input: w.InputMicrosPerMtok, CacheRead: w.CacheReadMicrosPerMtok, CacheWrite5m: w.CacheWrite5mMicrosPerMtok,
		CacheWrite1h: w.CacheWrite1hMicrosPerMtok, Output: w.OutputMicrosPerMtok,
	}}, HighestOfExperts: w.Basis == api.ModelPricingBasisHighestOfExperts}
	if t := w.LongContext; t != nil {
		f.Price.LongContext = &price.Tier{AboveInputTokens: t.AboveInputTokens, Rates: price.Rates{
			Input: t.InputMicrosPerMtok, CacheRead: t.CacheReadMicrosPerMtok, CacheWrite5m: t.CacheWrite5mMicrosPerMtok,
			CacheWrite1h: t.CacheWrite1hMicrosPerMtok, Output: t.OutputMicrosPerMtok,
		}}
	}
	if m.MaxTokens != nil {
		f.MaxOutputTokens = *m.MaxTokens
	}
	if m.ContextLength != nil {
		f.ContextTokens = *m.ContextLength
	}
	return f
}

// Block is one piece of text to paste somewhere.
type Block struct {
	// Where says where the text goes: "Your shell", "~/.codex/config.toml".
	Where string
	// Lang is the text's language: "sh", "toml", "json", "python", "typescript" or "text".
	Lang string
	// Text is the text itself, ending with a newline.
	Text string
}

// Setup is what one client needs to use the gateway.
type Setup struct {
	// ID names the client in a URL fragment or a command's argument: "claude-code", "codex",
	// "opencode", "openai-sdk", "anthropic-sdk", "mcp".
	ID string
	// Client is the client's name for people.
	Client string
	// Blocks are the texts to paste, in order.
	Blocks []Block
	// Note says how the settings are known to work, and what to run once they are in place.
	Note string
	// Warning says why the settings, pasted as they are, will not work with this key (its
	// credit cap is below what one of the client's requests holds), and what to do; "" when
	// nothing is known to stand in the way.
	Warning string
	// Unavailable says why there is nothing to paste (the key may use no model the client
	// speaks to); Blocks is then empty.
	Unavailable string
}

// Text is the setup as plain text for a terminal: each block under a "# <where>" line, the
// note (or why there is nothing to paste) first.
func (s Setup) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", s.Client)
	if s.Unavailable != "" {
		fmt.Fprintf(&b, "# %s\n", s.Unavailable)
		return b.String()
	}
	if s.Warning != "" {
		fmt.Fprintf(&b, "# Warning: %s\n", s.Warning)
	}
	if s.Note != "" {
		fmt.Fprintf(&b, "# %s\n", s.Note)
	}
	for _, bl := range s.Blocks {
		fmt.Fprintf(&b, "\n# %s\n%s", bl.Where, bl.Text)
	}
	return b.String()
}

// All is the setup of every client, in the order the console shows them.
func All(t Target) []Setup {
	return []Setup{ClaudeCode(t), Codex(t), Opencode(t), OpenAISDK(t), AnthropicSDK(t), AISDK(t), LangChain(t), MCP(t), Curl(t)}
}

// ChooseModels picks, among the model ids a key may use (in the account's order), the first
// one served on chat completions and Responses and the first one served on Messages, as the
// configuration's model families say; "" for a family the key has none of.
func ChooseModels(cfg *config.Config, ids []string) (chat, messages string) {
	return ChooseByFamily(ids, func(id string) string {
		m, ok := cfg.Model(id)
		if !ok {
			return ""
		}
		return m.Family
	})
}

// ChooseByFamily is ChooseModels for a caller that learns each model's family elsewhere than
// from the configuration (from GET /v1/models, whose models carry their family): family
// returns config.FamilyChat, config.FamilyMessages or "" (unknown) for an id.
func ChooseByFamily(ids []string, family func(id string) string) (chat, messages string) {
	for _, id := range ids {
		switch f := family(id); {
		case f == config.FamilyChat && chat == "":
			chat = id
		case f == config.FamilyMessages && messages == "":
			messages = id
		}
	}
	return chat, messages
}

// noModel is the Unavailable text of a client the key has no model for: none granted on the
// route, or none the account can call there (a granted model whose every provider serves only
// accounts with an upstream key of their own, which the operator has not set: the key-created
// page's model choice leaves those out).
func noModel(route string) string {
	return "This key may use no model served on " + route + " that the account can call, which this client needs: create a key with one, " +
		"or, if such a model is granted but marked \"Not yet\" on the Plan & limits page, ask the operator to set the account's upstream key for its provider (tollgate admin provider-key set)."
}

// exportKey is the shell line that keeps the key in KeyVariable.
func exportKey(t Target) string { return "export " + KeyVariable + "=" + ShellWord(t.Key) + "\n" }

// ClaudeCode is Claude Code's environment: the gateway as its Anthropic base URL (without
// /v1), the key as a bearer token (ANTHROPIC_AUTH_TOKEN: ANTHROPIC_API_KEY would send
// x-api-key, which the gateway refuses), the Messages model for every model slot, and its
// calls to api.anthropic.com off.
func ClaudeCode(t Target) Setup {
	s := Setup{ID: "claude-code", Client: "Claude Code"}
	if t.MessagesModel == "" {
		s.Unavailable = noModel("Anthropic Messages")
		return s
	}
	m := ShellWord(t.MessagesModel)
	s.Blocks = []Block{{Where: "Your shell (or your shell's profile)", Lang: "sh", Text: "" +
		"export ANTHROPIC_BASE_URL=" + ShellWord(t.BaseURL) + "\n" +
		"export ANTHROPIC_AUTH_TOKEN=" + ShellWord(t.Key) + "\n" +
		"export ANTHROPIC_MODEL=" + m + " ANTHROPIC_DEFAULT_SONNET_MODEL=" + m + " \\\n" +
		"       ANTHROPIC_DEFAULT_OPUS_MODEL=" + m + " ANTHROPIC_DEFAULT_HAIKU_MODEL=" + m + "\n" +
		"export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n" +
		"claude\n"}}
	s.Note = "Run by the test suite (impl/realclients) with these settings. The base URL has no /v1, " +
		"and the key goes in ANTHROPIC_AUTH_TOKEN (sent as Authorization: Bearer), not ANTHROPIC_API_KEY."
	if t.Messages == nil {
		// Without the model's price (a gateway whose model list does not say it), the rule
		// rather than the figure.
		s.Note += fmt.Sprintf(" Each turn holds, until it is answered, what its input (on the first turn some %s tokens of instructions and tools, "+
			"approximately) at the model's dearest input rate and %s output tokens cost: a key whose credit cap is below that is refused every turn "+
			"with a 402 that gives the figure. Raise the cap, or lower the output with CLAUDE_CODE_MAX_OUTPUT_TOKENS.",
			thousands(ClaudeCodeInstructionTokens), thousands(ClaudeCodeMaxTokens))
	}
	if t.Messages != nil && t.Messages.ContextTokens > 0 {
		s.Note += fmt.Sprintf(" Claude Code 2.1 assumes a context window of 1M tokens for a model it does not know, and says so on each run; "+
			"export CLAUDE_CODE_AUTO_COMPACT_WINDOW=%d gives it %s's window and silences the warning.", t.Messages.ContextTokens, t.MessagesModel)
	}
	s.Warning = ClaudeCodeCapWarning(t)
	return s
}

// ClaudeCodeInstructionTokens is about how many input tokens Claude Code's first turn sends
// before a word of the conversation: its instructions and tool definitions, some 28,000 tokens
// by the gateway's count (README, "Claude Code", measured with Claude Code 2.1). It is
// approximate: it changes with the version, the tools and the MCP servers configured.
const ClaudeCodeInstructionTokens = 28_000

// ClaudeCodeMaxTokens is the max_tokens Claude Code asks for of any model (README), unless
// CLAUDE_CODE_MAX_OUTPUT_TOKENS sets another.
const ClaudeCodeMaxTokens = 32_000

// claudeCodeTurn is what the gateway reserves for a Claude Code turn on the model with up to
// output tokens of output (clamped to the model's limit), its input at its instructions'
// size: the reservation's arithmetic (price.Worst: every input token at the dearest input
// rate, the output at the output rate).
func claudeCodeTurn(f ModelFacts, output int) int64 {
	if f.MaxOutputTokens > 0 {
		output = min(output, f.MaxOutputTokens)
	}
	return price.Worst(ClaudeCodeInstructionTokens, int64(output), f.Price)
}

// ClaudeCodeCapWarning says, for a key whose credit cap is below what Claude Code's first
// turn holds, that every turn would be refused and what to do: raise the cap, or lower
// Claude Code's output bound to one that fits (a whole thousand, at least 1,000), if one does.
// It is "" when t says nothing of the Messages model's facts or of a cap, or the cap holds a
// turn. Claude Code's setup carries it (Setup.Warning); the console says it too where a key's
// cap is changed.
func ClaudeCodeCapWarning(t Target) string {
	if t.Messages == nil || t.CreditCapMicros == nil {
		return ""
	}
	limit := *t.CreditCapMicros
	turn := claudeCodeTurn(*t.Messages, ClaudeCodeMaxTokens)
	if turn <= limit {
		return ""
	}
	w := fmt.Sprintf("this key's credit cap (%s) is below what one Claude Code turn on %s holds until it is answered, "+
		"about %s (its instructions and tools, some %s tokens, at the dearest input rate, and %s output tokens at the output rate), "+
		"so the gateway refuses every turn with a 402. Raise the key's credit cap to %s or more",
		dollars(limit, false), t.MessagesModel, dollars(turn, true), thousands(ClaudeCodeInstructionTokens),
		thousands(min(ClaudeCodeMaxTokens, orMax(t.Messages.MaxOutputTokens))), dollars(turn, true))
	if fit := claudeCodeFittingOutput(*t.Messages, limit); fit > 0 {
		w += fmt.Sprintf(", or export CLAUDE_CODE_MAX_OUTPUT_TOKENS=%d (a first turn then holds about %s; later turns hold more as the conversation grows)",
			fit, dollars(claudeCodeTurn(*t.Messages, fit), true))
	} else {
		w += fmt.Sprintf(": no CLAUDE_CODE_MAX_OUTPUT_TOKENS fits, its instructions alone hold about %s", dollars(claudeCodeTurn(*t.Messages, 0), true))
	}
	return w + ". The instructions' size is approximate (measured with Claude Code 2.1), and so are these figures."
}

// claudeCodeFittingOutput is the largest output bound, a whole thousand of at least 1,000
// tokens, whose Claude Code turn fits under limit; 0 when none does.
func claudeCodeFittingOutput(f ModelFacts, limit int64) int {
	best := 0
	for out := 1000; out < ClaudeCodeMaxTokens && claudeCodeTurn(f, out) <= limit; out += 1000 {
		best = out
	}
	return best
}

// orMax is n, or the largest int when n is 0 (no limit).
func orMax(n int) int {
	if n <= 0 {
		return int(^uint(0) >> 1)
	}
	return n
}

// dollars writes micros as dollars to the cent (rounded up when up, so that an amount said to
// be enough is), or exactly when the amount has a part below a cent and up is false.
func dollars(micros int64, up bool) string {
	if up {
		micros = (micros + 9_999) / 10_000 * 10_000
	}
	whole, frac := micros/1_000_000, micros%1_000_000
	if frac%10_000 == 0 {
		return fmt.Sprintf("$%d.%02d", whole, frac/10_000)
	}
	return strings.TrimRight(fmt.Sprintf("$%d.%06d", whole, frac), "0")
}

// thousands writes n with a comma between each three digits (28,000).
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Codex is the Codex CLI's config.toml with the gateway as a custom provider on the Responses
// API, the key read from KeyVariable, the model's context window when it is known (Codex
// knows no window of a model it has no metadata for, and compacts by it), and its calls to
// github.com and chatgpt.com off. Codex 0.169 and 0.171 have no setting for a model's output bound
// (model_max_output_tokens is an unknown field to their --strict-config) nor for its price.
func Codex(t Target) Setup {
	s := Setup{ID: "codex", Client: "Codex CLI"}
	if t.ChatModel == "" {
		s.Unavailable = noModel("OpenAI Responses")
		return s
	}
	window := ""
	if t.Chat != nil && t.Chat.ContextTokens > 0 {
		window = fmt.Sprintf("model_context_window = %d\n", t.Chat.ContextTokens)
	}
	s.Blocks = []Block{
		{Where: "~/.codex/config.toml (or $CODEX_HOME/config.toml)", Lang: "toml", Text: "" +
			"model = " + tomlString(t.ChatModel) + "\n" +
			window +
			"model_provider = \"tollgate\"\n" +
			"# These four keep Codex from calling github.com and chatgpt.com.\n" +
			"check_for_update_on_startup = false\n" +
			"[analytics]\n" +
			"enabled = false\n" +
			"[feedback]\n" +
			"enabled = false\n" +
			"[features]\n" +
			"plugins = false\n" +
			"\n" +
			"[model_providers.tollgate]\n" +
			"name = \"tollgate\"\n" +
			"base_url = " + tomlString(t.BaseURL+"/v1") + "\n" +
			"env_key = " + tomlString(KeyVariable) + "\n" +
			"wire_api = \"responses\"\n"},
		{Where: "Your shell", Lang: "sh", Text: exportKey(t) + "codex\n"},
	}
	s.Note = "Run by the test suite (impl/realclients, Codex 0.171.0, with --strict-config) with these settings. Outside a git repository, " +
		"codex exec needs --skip-git-repo-check."
	return s
}

// Opencode is opencode's configuration with the gateway as an OpenAI-compatible provider (chat
// completions), the key read from KeyVariable, and the model's limit and cost when they are
// known (opencodeModel).
func Opencode(t Target) Setup {
	s := Setup{ID: "opencode", Client: "opencode"}
	if t.ChatModel == "" {
		s.Unavailable = noModel("OpenAI chat completions")
		return s
	}
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"tollgate": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "tollgate",
			"options": map[string]any{"baseURL": t.BaseURL + "/v1", "apiKey": "{env:" + KeyVariable + "}"},
			"models":  map[string]any{t.ChatModel: opencodeModel(t.ChatModel, t.Chat)},
		}},
		"model": "tollgate/" + t.ChatModel,
	}
	s.Blocks = []Block{
		{Where: "opencode.json in your project (or ~/.config/opencode/opencode.json)", Lang: "json", Text: jsonText(cfg)},
		{Where: "Your shell", Lang: "sh", Text: exportKey(t) + "opencode\n"},
	}
	s.Note = "Run by the test suite (impl/realclients, opencode 1.18.33) with these settings: " +
		"opencode streams from /v1/chat/completions and reports the tokens the gateway bills."
	if f := t.Chat; f != nil {
		s.Note += " The model's cost is the gateway's price in US dollars per million tokens, from which opencode shows what a session spent"
		if f.HighestOfExperts {
			s.Note += fmt.Sprintf(" (%s is a fusion model whose experts are priced differently: these are the dearest expert's rates, "+
				"so opencode's figure is the most the session can have cost; each request is billed at the rates of the expert that answered it)", t.ChatModel)
		}
		s.Note += "."
		if lc := f.Price.LongContext; lc != nil && (f.ContextTokens == 0 || lc.AboveInputTokens < int64(f.ContextTokens)) {
			s.Note += fmt.Sprintf(" opencode prices a model of its configuration at these rates whatever the prompt's length, "+
				"so for a request above %s input tokens, which the gateway bills at its long-context rates, its figure is below the bill.",
				thousands(int(lc.AboveInputTokens)))
		}
	}
	if opencodeLimit(t.Chat) != nil {
		s.Note += " Its limit is the model's window and output bound, by which opencode compacts the conversation before it outgrows the window."
	}
	return s
}

// opencodeModel is the model's entry in opencode's provider configuration: its name, and with
// its facts known, its cost and limit (the schema of opencode 1.18.33's ConfigProviderV1.Model:
// cost {input, output, cache_read, cache_write} in US dollars per million tokens, limit
// {context, output} in tokens, both required in a limit). opencode prices a session as the
// gateway bills it: input less cache reads and writes at input, cache reads at cache_read,
// cache writes at cache_write (the gateway's five-minute rate: opencode has one), output with
// reasoning at output; it computes exactly where the gateway rounds each part of a bill up to
// a micro-unit. The schema's cost.context_over_200k is left out: opencode 1.18.33 accepts it
// but does not carry it into a configured model (`opencode models --verbose` shows no
// long-context rates), so it would say a price opencode does not use.
func opencodeModel(id string, f *ModelFacts) map[string]any {
	m := map[string]any{"name": id}
	if f == nil {
		return m
	}
	m["cost"] = opencodeRates(f.Price.Rates)
	if limit := opencodeLimit(f); limit != nil {
		m["limit"] = limit
	}
	return m
}

// opencodeRates are rates as opencode's cost says them, in US dollars per million tokens.
func opencodeRates(r price.Rates) map[string]any {
	return map[string]any{"input": usdPerMillion(r.Input), "output": usdPerMillion(r.Output),
		"cache_read": usdPerMillion(r.CacheRead), "cache_write": usdPerMillion(r.CacheWrite5m)}
}

// opencodeLimit is opencode's limit for a model, its window and output bound; nil unless both
// are known (opencode's schema needs both).
func opencodeLimit(f *ModelFacts) map[string]any {
	if f == nil || f.ContextTokens <= 0 || f.MaxOutputTokens <= 0 {
		return nil
	}
	return map[string]any{"context": f.ContextTokens, "output": f.MaxOutputTokens}
}

// usdPerMillion is a rate in micro-units per million tokens as US dollars per million tokens,
// exactly (a decimal JSON number: 1250000 is 1.25).
func usdPerMillion(micros int64) json.Number { return json.Number(price.Decimal(micros, 6)) }

// OpenAISDK is the OpenAI SDKs' base URL (with /v1) and key, in TypeScript and Python.
func OpenAISDK(t Target) Setup {
	s := Setup{ID: "openai-sdk", Client: "OpenAI SDKs"}
	if t.ChatModel == "" {
		s.Unavailable = noModel("OpenAI chat completions and Responses")
		return s
	}
	base := t.BaseURL + "/v1"
	s.Blocks = []Block{
		{Where: "Your shell", Lang: "sh", Text: exportKey(t)},
		{Where: "TypeScript (openai)", Lang: "typescript", Text: "" +
			"import OpenAI from \"openai\";\n" +
			"const client = new OpenAI({ baseURL: " + jsString(base) + ", apiKey: process.env." + KeyVariable + " });\n" +
			"// model: " + jsString(t.ChatModel) + "\n"},
		{Where: "Python (openai)", Lang: "python", Text: "" +
			"import os\n" +
			"from openai import OpenAI\n" +
			"client = OpenAI(base_url=" + pyString(base) + ", api_key=os.environ[" + pyString(KeyVariable) + "])\n" +
			"# model: " + pyString(t.ChatModel) + "\n"},
	}
	s.Note = "The TypeScript line is run by the test suite (impl/realclients); the Python line follows the SDK's documentation."
	return s
}

// AnthropicSDK is the Anthropic SDKs' base URL (without /v1) and key, sent as a bearer token
// (authToken), in TypeScript and Python.
func AnthropicSDK(t Target) Setup {
	s := Setup{ID: "anthropic-sdk", Client: "Anthropic SDKs"}
	if t.MessagesModel == "" {
		s.Unavailable = noModel("Anthropic Messages")
		return s
	}
	s.Blocks = []Block{
		{Where: "Your shell", Lang: "sh", Text: exportKey(t)},
		{Where: "TypeScript (@anthropic-ai/sdk)", Lang: "typescript", Text: "" +
			"import Anthropic from \"@anthropic-ai/sdk\";\n" +
			"const client = new Anthropic({ baseURL: " + jsString(t.BaseURL) + ", authToken: process.env." + KeyVariable + ", apiKey: null });\n" +
			"// model: " + jsString(t.MessagesModel) + "\n"},
		{Where: "Python (anthropic)", Lang: "python", Text: "" +
			"import os\n" +
			"from anthropic import Anthropic\n" +
			"client = Anthropic(base_url=" + pyString(t.BaseURL) + ", auth_token=os.environ[" + pyString(KeyVariable) + "])\n" +
			"# model: " + pyString(t.MessagesModel) + "\n"},
	}
	s.Note = "The key is an auth token (Authorization: Bearer), not an API key: an x-api-key header alone is refused. " +
		"The TypeScript line is run by the test suite (impl/realclients); the Python line follows the SDK's documentation."
	return s
}

// AISDK is Vercel's AI SDK (npm ai) with its OpenAI provider (@ai-sdk/openai: the base URL
// with /v1, the key as its API key, sent as Authorization: Bearer) and its Anthropic provider
// (@ai-sdk/anthropic: the same base URL, the key as its authToken; its apiKey would be sent as
// x-api-key, which the gateway refuses), each in TypeScript ending with the model to pass to
// generateText or streamText.
func AISDK(t Target) Setup {
	s := Setup{ID: "ai-sdk", Client: "Vercel AI SDK"}
	if t.ChatModel == "" && t.MessagesModel == "" {
		s.Unavailable = noModel("OpenAI Responses or Anthropic Messages")
		return s
	}
	base := t.BaseURL + "/v1"
	s.Blocks = []Block{{Where: "Your shell", Lang: "sh", Text: exportKey(t)}}
	if t.ChatModel != "" {
		s.Blocks = append(s.Blocks, Block{Where: "TypeScript (ai with @ai-sdk/openai)", Lang: "typescript", Text: "" +
			"import { createOpenAI } from \"@ai-sdk/openai\";\n" +
			"const tollgate = createOpenAI({ baseURL: " + jsString(base) + ", apiKey: process.env." + KeyVariable + " });\n" +
			"// The Responses API; tollgate.chat(" + jsString(t.ChatModel) + ") is the same model on chat completions.\n" +
			"const model = tollgate(" + jsString(t.ChatModel) + ");\n"})
	}
	if t.MessagesModel != "" {
		s.Blocks = append(s.Blocks, Block{Where: "TypeScript (ai with @ai-sdk/anthropic)", Lang: "typescript", Text: "" +
			"import { createAnthropic } from \"@ai-sdk/anthropic\";\n" +
			"const tollgate = createAnthropic({ baseURL: " + jsString(base) + ", authToken: process.env." + KeyVariable + " });\n" +
			"const model = tollgate(" + jsString(t.MessagesModel) + ");\n"})
	}
	s.Note = "Pass model to generateText or streamText. Run by the test suite (impl/realclients, ai 7) as written here. " +
		"The Anthropic provider takes the key as authToken (Authorization: Bearer), not apiKey: an x-api-key header alone is refused. " +
		"@ai-sdk/openai-compatible works too, with the same baseURL and apiKey (and includeUsage: true for streamed usage)."
	return s
}

// LangChain is LangChain's chat models: ChatOpenAI with the base URL (with /v1) and the key, in
// TypeScript (@langchain/openai) and Python (langchain-openai), and in TypeScript
// ChatAnthropic (@langchain/anthropic) with the gateway (without /v1) and a createClient that
// gives the Anthropic SDK the key as its authToken, since ChatAnthropic hands its client the
// key as an API key (x-api-key, which the gateway refuses). Python's langchain-anthropic has
// no such setting (its ChatAnthropic builds its client with the key as api_key only), and the
// note says so rather than show a setting that fails.
func LangChain(t Target) Setup {
	s := Setup{ID: "langchain", Client: "LangChain"}
	if t.ChatModel == "" && t.MessagesModel == "" {
		s.Unavailable = noModel("OpenAI chat completions or Anthropic Messages")
		return s
	}
	base := t.BaseURL + "/v1"
	s.Blocks = []Block{{Where: "Your shell", Lang: "sh", Text: exportKey(t)}}
	if t.ChatModel != "" {
		s.Blocks = append(s.Blocks,
			Block{Where: "TypeScript (@langchain/openai)", Lang: "typescript", Text: "" +
				"import { ChatOpenAI } from \"@langchain/openai\";\n" +
				"// Add useResponsesApi: true for the Responses API.\n" +
				"const model = new ChatOpenAI({ model: " + jsString(t.ChatModel) + ", apiKey: process.env." + KeyVariable +
				", configuration: { baseURL: " + jsString(base) + " } });\n"},
			Block{Where: "Python (langchain-openai)", Lang: "python", Text: "" +
				"import os\n" +
				"from langchain_openai import ChatOpenAI\n" +
				"model = ChatOpenAI(model=" + pyString(t.ChatModel) + ", base_url=" + pyString(base) +
				", api_key=os.environ[" + pyString(KeyVariable) + "])\n"})
	}
	if t.MessagesModel != "" {
		s.Blocks = append(s.Blocks, Block{Where: "TypeScript (@langchain/anthropic)", Lang: "typescript", Text: "" +
			"import Anthropic from \"@anthropic-ai/sdk\";\n" +
			"import { ChatAnthropic } from \"@langchain/anthropic\";\n" +
			"const model = new ChatAnthropic({\n" +
			"  model: " + jsString(t.MessagesModel) + ",\n" +
			"  anthropicApiUrl: " + jsString(t.BaseURL) + ",\n" +
			"  createClient: (options) => new Anthropic({ ...options, apiKey: null, authToken: process.env." + KeyVariable + " }),\n" +
			"});\n"})
	}
	s.Note = "The TypeScript lines are run by the test suite (impl/realclients, @langchain/openai and @langchain/anthropic 1) as written here; " +
		"the Python line follows langchain-openai's documentation."
	if t.MessagesModel != "" {
		s.Note += " ChatAnthropic hands its client the key as an API key, sent as x-api-key, which the gateway refuses: " +
			"createClient gives the Anthropic SDK's client the key as its authToken (Authorization: Bearer) instead."
	}
	if t.MessagesModel != "" {
		s.Note += " Python's langchain-anthropic has no setting for a bearer token: its ChatAnthropic sends the key only as x-api-key, " +
			"which the gateway refuses, so it cannot be pointed at the gateway as it is."
	}
	return s
}

// MCP is the gateway's MCP endpoint (streamable HTTP, /api/mcp) with the key as a bearer
// header, as a URL and header, Claude Code's --mcp-config file and Codex's config.toml section.
// The files name the key's environment variable rather than hold the key: a settings file in a
// project is the kind of file that gets committed (Claude Code expands ${VAR} in an MCP
// server's url and headers, its documentation's "Environment variable expansion in .mcp.json";
// Codex reads bearer_token_env_var). Codex's server is required: Codex 0.171 builds the first
// turn's tools waiting for a server that is not only mcp_optional_startup_grace_ms (1,000 ms by
// default), so on a slow machine or network the turn went without the gateway's tools;
// required makes it wait up to the server's startup_timeout_sec (10 s) and fail loudly when the
// server cannot start. Its note says what impl/realclients sets for Claude Code
// against the simulator (ENABLE_TOOL_SEARCH=false; newcomer trial finding 4).
func MCP(t Target) Setup {
	url := t.BaseURL + "/api/mcp"
	claude := map[string]any{"mcpServers": map[string]any{"tollgate": map[string]any{
		"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer ${" + KeyVariable + "}"},
	}}}
	return Setup{ID: "mcp", Client: "MCP clients", Blocks: []Block{
		{Where: "Your shell", Lang: "sh", Text: exportKey(t)},
		{Where: "Any MCP client (streamable HTTP)", Lang: "text", Text: "" +
			"URL: " + url + "\n" +
			"Header: Authorization: Bearer " + t.Key + "\n"},
		{Where: "Claude Code: tollgate-mcp.json (the key stays in " + KeyVariable + "), then claude --mcp-config tollgate-mcp.json", Lang: "json", Text: jsonText(claude)},
		{Where: "Codex: add to ~/.codex/config.toml (the key in " + KeyVariable + ", as above)", Lang: "toml", Text: "" +
			"[mcp_servers.tollgate]\n" +
			"url = " + tomlString(url) + "\n" +
			"bearer_token_env_var = " + tomlString(KeyVariable) + "\n" +
			"# Codex waits for a server that is not required only 1 s before the first turn, which then goes without its tools.\n" +
			"required = true\n"},
	}, Note: "Run by the test suite (impl/realclients) with Claude Code, Codex, the MCP TypeScript SDK and the MCP Inspector. " +
		"Against the built-in simulator (make run), run Claude Code with ENABLE_TOOL_SEARCH=false to have it call the tools: " +
		"it otherwise hides MCP tools behind its ToolSearch tool, which the simulator does not use (real models do)."}
}

// Curl is a plain check that the key works, with curl: the key's models (GET /v1/models), then
// one chat completion on the chat model (or, for a key without one, one Anthropic message on
// the Messages model). Its note says that the same key starts an agent (POST /v1/agents), and
// that the MCP agent tools only ask for an owner's approval.
func Curl(t Target) Setup {
	s := Setup{ID: "curl", Client: "curl (a quick check)"}
	auth := ` -H "Authorization: Bearer $` + KeyVariable + `"`
	text := exportKey(t) + "curl -s " + ShellWord(t.BaseURL+"/v1/models") + auth + "\n"
	switch {
	case t.ChatModel != "":
		body := `{"model":` + jsonString(t.ChatModel) + `,"messages":[{"role":"user","content":"Hello!"}]}`
		text += "curl -s " + ShellWord(t.BaseURL+"/v1/chat/completions") + auth + " \\\n" +
			"  -H 'Content-Type: application/json' -d " + ShellWord(body) + "\n"
	case t.MessagesModel != "":
		body := `{"model":` + jsonString(t.MessagesModel) + `,"max_tokens":200,"messages":[{"role":"user","content":"Hello!"}]}`
		text += "curl -s " + ShellWord(t.BaseURL+"/v1/messages") + auth + " \\\n" +
			"  -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' -d " + ShellWord(body) + "\n"
	}
	s.Blocks = []Block{{Where: "Your shell", Lang: "sh", Text: text}}
	s.Note = "The model list, then one request: a key that works gets JSON back, a refused one an error that says why. " +
		"When the account has agent slots (an operator assigns them; GET /v1/agents lists them), the same key starts an agent session in one (POST /v1/agents); " +
		"the MCP agent tools (agent_spawn, agent_prompt) only ask, and wait for an owner's approval on the web console's Approvals page."
	return s
}

// ShellWord is s as one shell word: as it is when it holds only characters the shell takes
// literally, else in single quotes.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@%+=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// jsonText is v as indented JSON with a final newline (keys sorted, as encoding/json writes
// maps).
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return b.String()
}

// tomlString, jsString and pyString are s as a string literal of TOML, JavaScript and Python:
// a JSON string is one in each of them.
func tomlString(s string) string { return jsonString(s) }
func jsString(s string) string   { return jsonString(s) }
func pyString(s string) string   { return jsonString(s) }

func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
