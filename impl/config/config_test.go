package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultAndExampleAreValid(t *testing.T) {
	c := Default()
	for _, id := range []string{"service-flint", "service-flint-base"} {
		if m, ok := c.Model(id); !ok || m.Family != FamilyChat {
			t.Errorf("default config: %s missing or not chat family", id)
		}
	}
	messages := 0
	for _, m := range c.Models {
		if m.Family == FamilyMessages {
			messages++
		}
	}
	if messages == 0 {
		t.Error("default config has no messages-family model")
	}
	if _, err := Load("example.yaml"); err != nil {
		t.Fatalf("example.yaml: %v", err)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - {name: p, kind: carrier-pigeon, base_url: ftp://x}
models:
  - {id: a, family: chat, max_output_tokens: 0, backend: {provider: nope, model: m}}
  - {id: a, family: weird, max_output_tokens: 5, price: {input_micros_per_mtok: -1}}
plans:
  - {name: default, models: [zzz]}
`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"kind must be", "base_url", "max_output_tokens", "unknown provider", "duplicate id", "family must be", "negative price", "exactly one of backend or experts", `unknown model "zzz"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	if _, err := Parse([]byte("modles: []\n")); err == nil {
		t.Fatal("a misspelt key must be an error")
	}
}

func TestResolveSecrets(t *testing.T) {
	c, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.ResolveSecrets(func(name string) (string, bool) { return "secret-" + name, true })
	for _, p := range c.Providers {
		if p.APIKey != "secret-"+p.APIKeyEnv {
			t.Errorf("provider %s key %q", p.Name, p.APIKey)
		}
	}
}

// TestPlanKeyQuota: the built-in and example plans have a key quota of 20, a negative one is
// refused, and an absent one is 0 (no quota).
func TestPlanKeyQuota(t *testing.T) {
	for _, name := range []string{"default", "demo"} {
		if p, ok := Default().Plan(name); !ok || p.MaxKeys != 20 {
			t.Errorf("default config: plan %s max_keys = %d (found %v), want 20", name, p.MaxKeys, ok)
		}
	}
	ex, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := ex.Plan("default"); p.MaxKeys != 20 {
		t.Errorf("example.yaml: plan default max_keys = %d, want 20", p.MaxKeys)
	}
	const models = "models:\n  - {id: a, family: chat, max_output_tokens: 5, price: {free: true}, backend: {provider: p, model: m}}\nproviders:\n  - {name: p, kind: openai-chat, base_url: http://x}\n"
	if _, err := Parse([]byte(models + "plans:\n  - {name: default, max_keys: -1}\n")); err == nil || !strings.Contains(err.Error(), "max_keys") {
		t.Errorf("a negative max_keys: error %v, want one naming max_keys", err)
	}
	c, err := Parse([]byte(models + "plans:\n  - {name: default}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Plan("default"); p.MaxKeys != 0 {
		t.Errorf("an absent max_keys = %d, want 0 (no quota)", p.MaxKeys)
	}
}

// TestAccountKeys: account_keys is optional (the default) or required; AccountKeysRequired
// follows it.
func TestAccountKeys(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - {name: a, kind: anthropic-messages, base_url: "https://a", account_keys: always}
models:
  - {id: m, family: messages, max_output_tokens: 5, backend: {provider: a, model: x}}
`))
	if err == nil || !strings.Contains(err.Error(), `provider "a": account_keys must be optional or required`) {
		t.Errorf("validation: %v", err)
	}
	c, err := Parse([]byte(`
providers:
  - {name: a, kind: anthropic-messages, base_url: "https://a", account_keys: required}
  - {name: o, kind: openai-chat, base_url: "https://o", account_keys: optional}
  - {name: d, kind: openai-chat, base_url: "https://d"}
models:
  - {id: m, family: messages, max_output_tokens: 5, price: {free: true}, backend: {provider: a, model: x}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Providers {
		if got, want := p.AccountKeysRequired(), p.Name == "a"; got != want {
			t.Errorf("provider %s: AccountKeysRequired %v, want %v", p.Name, got, want)
		}
	}
}

// TestPromptCache: prompt_cache is automatic (the default) or off, on anthropic-messages
// providers only; AutomaticPromptCache follows it.
func TestPromptCache(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - {name: a, kind: anthropic-messages, base_url: "https://a", prompt_cache: sometimes}
  - {name: o, kind: openai-chat, base_url: "https://o", prompt_cache: automatic}
models:
  - {id: m, family: chat, max_output_tokens: 5, backend: {provider: a, model: x}}
`))
	if err == nil || !strings.Contains(err.Error(), `provider "a": prompt_cache must be automatic or off`) ||
		!strings.Contains(err.Error(), `provider "o": prompt_cache applies only to an anthropic-messages provider`) {
		t.Errorf("validation: %v", err)
	}
	for _, c := range []struct {
		p    Provider
		want bool
	}{
		{Provider{Kind: KindAnthropicMessages}, true},
		{Provider{Kind: KindAnthropicMessages, PromptCache: PromptCacheAutomatic}, true},
		{Provider{Kind: KindAnthropicMessages, PromptCache: PromptCacheOff}, false},
		{Provider{Kind: KindOpenAIChat}, false},
	} {
		if got := c.p.AutomaticPromptCache(); got != c.want {
			t.Errorf("%+v: AutomaticPromptCache %v, want %v", c.p, got, c.want)
		}
	}
}

// TestGenAIProviderName: a provider's gen_ai.provider.name is its gen_ai_provider when set
// (which must be a lower-case conventions-style name), else the conventions' name of its base
// URL's host when they name it, else its kind's.
func TestGenAIProviderName(t *testing.T) {
	c, err := Parse([]byte(`
providers:
  - {name: br, kind: openai-chat, base_url: "https://gateway.example/bedrock", gen_ai_provider: aws.bedrock}
models:
  - {id: m, family: chat, max_output_tokens: 5, price: {input_micros_per_mtok: 1, output_micros_per_mtok: 1}, backend: {provider: br, model: x}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Providers[0].GenAIProviderName(); got != "aws.bedrock" {
		t.Errorf("gen_ai_provider aws.bedrock: GenAIProviderName %q", got)
	}
	_, err = Parse([]byte(`
providers:
  - {name: bad, kind: openai-chat, base_url: "https://x", gen_ai_provider: "AWS Bedrock"}
models:
  - {id: m, family: chat, max_output_tokens: 5, backend: {provider: bad, model: x}}
`))
	if err == nil || !strings.Contains(err.Error(), `provider "bad": gen_ai_provider must be a lower-case name`) {
		t.Errorf("validation: %v", err)
	}
	for _, c := range []struct {
		kind, baseURL, want string
	}{
		{KindOpenAIChat, "https://api.openai.com/v1", "openai"},
		{KindAnthropicMessages, "https://api.anthropic.com", "anthropic"},
		{KindOpenAIChat, "https://bedrock-runtime.eu-west-1.amazonaws.com/openai/v1", "aws.bedrock"},
		{KindOpenAIChat, "https://bedrock-mantle.us-east-1.api.aws/v1", "aws.bedrock"},
		{KindAnthropicMessages, "https://us-east5-aiplatform.googleapis.com/v1/projects/p", "gcp.vertex_ai"},
		{KindOpenAIChat, "https://generativelanguage.googleapis.com/v1beta/openai", "gcp.gemini"},
		{KindOpenAIResponses, "https://acme.openai.azure.com/openai/v1", "azure.ai.openai"},
		{KindOpenAIChat, "https://acme.services.ai.azure.com/models", "azure.ai.inference"},
		{KindOpenAIChat, "https://api.groq.com/openai/v1", "groq"},
		{KindOpenAIChat, "https://api.deepseek.com", "deepseek"},
		{KindOpenAIChat, "https://api.mistral.ai/v1", "mistral_ai"},
		{KindOpenAIChat, "https://api.x.ai/v1", "x_ai"},
		{KindOpenAIChat, "https://api.perplexity.ai", "perplexity"},
		{KindOpenAIChat, "https://api.cohere.ai/compatibility/v1", "cohere"},
		{KindOpenAIChat, "https://us-south.ml.cloud.ibm.com/ml/v1", "ibm.watsonx.ai"},
		{KindOpenAIChat, "http://10.0.0.7:8000/v1", "openai"},
		{KindOpenAIChat, "https://notdeepseek.com.example/v1", "openai"},
		{KindAnthropicMessages, "https://llm.internal.example", "anthropic"},
		{KindOpenAIChat, SimulatorURL, "openai"},
	} {
		if got := (Provider{Kind: c.kind, BaseURL: c.baseURL}).GenAIProviderName(); got != c.want {
			t.Errorf("%s at %s: GenAIProviderName %q, want %q", c.kind, c.baseURL, got, c.want)
		}
	}
}

// TestForgottenPriceIsRefused: a model whose upstream has no price of its own and none from
// the model is refused at start, naming both, as is a price that charges nothing, unless the
// price says free: true (and then nothing else); a fusion expert without a price takes the
// model's. price_catalog.date must be a day written YYYY-MM-DD. Configuration trial: such a
// model, or a fusion expert without a price, was served free and reserved nothing; a date
// "2025/06/01" sorted past every catalog entry's.
func TestForgottenPriceIsRefused(t *testing.T) {
	const providers = "providers:\n  - {name: o, kind: openai-chat, base_url: builtin:simulator}\n"
	for _, c := range []struct{ name, yaml, want string }{
		{"no price", "models:\n  - {id: m, family: chat, max_output_tokens: 5, backend: {provider: o, model: x}}\n",
			`model "m": upstream o/x has no price, and the model has none to give it`},
		{"an expert without one, the model none", "models:\n  - {id: m, family: chat, max_output_tokens: 5, experts: [{provider: o, model: x, price: {catalog: gpt-4.1}}, {provider: o, model: y}]}\n",
			`model "m": upstream o/y has no price`},
		{"a price of zero", "models:\n  - {id: m, family: chat, max_output_tokens: 5, backend: {provider: o, model: x, price: {input_micros_per_mtok: 0}}}\n",
			`model "m": upstream o/x: its price charges nothing`},
		{"free and a price", "models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true, catalog: gpt-4.1}, backend: {provider: o, model: x}}\n",
			"free and a price at once"},
		{"a date not YYYY-MM-DD", "price_catalog: {date: 2025/06/01}\nmodels:\n  - {id: m, family: chat, max_output_tokens: 5, price: {catalog: o3}, backend: {provider: o, model: x}}\n",
			`price_catalog: date "2025/06/01" is not a day written YYYY-MM-DD`},
	} {
		if _, err := Parse([]byte(providers + c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// A catalog name that does not resolve is refused for what it is, without the misleading
	// "has no price" of the upstreams that would have taken it (trial of the configuration
	// fixes: both were reported).
	for _, yaml := range []string{
		"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {catalog: no-such-model}, backend: {provider: o, model: x}}\n",
		"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true}, experts: [{provider: o, model: x, price: {catalog: no-such-model}}, {provider: o, model: y}]}\n",
	} {
		_, err := Parse([]byte(providers + yaml))
		if err == nil || !strings.Contains(err.Error(), `no-such-model`) || strings.Contains(err.Error(), "has no price") || strings.Contains(err.Error(), "charges nothing") {
			t.Errorf("%q: %v, want the catalog's error alone", yaml, err)
		}
	}
	for _, ok := range []string{
		"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true}, backend: {provider: o, model: x}}\n",
		"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {catalog: gpt-4.1}, experts: [{provider: o, model: x}, {provider: o, model: y, price: {catalog: gpt-5}}]}\n",
		"price_catalog: {date: 2025-06-01}\nmodels:\n  - {id: m, family: chat, max_output_tokens: 5, price: {catalog: o3}, backend: {provider: o, model: x}}\n",
	} {
		if _, err := Parse([]byte(providers + ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestProviderAddressAndKeyVariable: a base_url with a query, a fragment, credentials or no
// host is refused, and so is an api_key_env that is no variable's name, without repeating it
// (configuration trial: a pasted key was logged by the start-up warning).
func TestProviderAddressAndKeyVariable(t *testing.T) {
	const model = "models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true}, backend: {provider: o, model: x}}\n"
	for _, c := range []struct{ provider, want string }{
		{"{name: o, kind: openai-chat, base_url: \"https://api.example/v1?key=1\"}", "base_url must be a scheme, a host and at most a path"},
		{"{name: o, kind: openai-chat, base_url: \"https://\"}", "base_url must be a scheme, a host and at most a path"},
		{"{name: o, kind: openai-chat, base_url: \"https://u:p@api.example/v1\"}", "base_url must be a scheme, a host and at most a path"},
		{"{name: o, kind: openai-chat, base_url: \"https://api.example/v1\", api_key_env: sk-proj-SECRETSECRET}", "api_key_env must name an environment variable"},
	} {
		_, err := Parse([]byte("providers:\n  - " + c.provider + "\n" + model))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v, want an error saying %q (and not the key)", c.provider, err, c.want)
		}
	}
	if _, err := Parse([]byte("providers:\n  - {name: o, kind: openai-chat, base_url: \"https://api.example/v1/\", api_key_env: EXAMPLE_API_KEY}\n" + model)); err != nil {
		t.Errorf("a good provider: %v", err)
	}
}

// TestModelShapeRefusals: a context window that is negative or leaves no room beyond the
// output bound, and an expert listed twice, are refused (configuration trial: accepted).
func TestModelShapeRefusals(t *testing.T) {
	const providers = "providers:\n  - {name: o, kind: openai-chat, base_url: builtin:simulator}\n"
	for _, c := range []struct{ yaml, want string }{
		{"models:\n  - {id: m, family: chat, max_output_tokens: 5, context_tokens: -1, price: {free: true}, backend: {provider: o, model: x}}\n", "context_tokens must be 0"},
		{"models:\n  - {id: m, family: chat, max_output_tokens: 500, context_tokens: 100, price: {free: true}, backend: {provider: o, model: x}}\n", "context_tokens must be 0"},
		{"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true}, experts: [{provider: o, model: x}, {provider: o, model: x}]}\n", "expert o/x is listed twice"},
	} {
		if _, err := Parse([]byte(providers + c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}

// TestStrengthsAreKnownWords: an expert's strength the fusion router does not score is refused
// at start, naming the model, the expert, the word and the words accepted; a word listed twice
// is refused too. Configuration trial: "reasoning", in the shipped configurations, scored
// nothing, and any misspelling was accepted as silently.
func TestStrengthsAreKnownWords(t *testing.T) {
	const head = "providers:\n  - {name: o, kind: openai-chat, base_url: builtin:simulator}\n" +
		"models:\n  - {id: m, family: chat, max_output_tokens: 5, price: {free: true}, experts: [{provider: o, model: x, strengths: [general]}, "
	for _, c := range []struct{ strengths, want string }{
		{"[long, reasoning]", `model "m": upstream o/y: unknown strength "reasoning": the fusion router scores only general, fast, code, tools, long`},
		{"[tool]", `model "m": upstream o/y: unknown strength "tool"`},
		{"[code, code]", `model "m": upstream o/y: strength "code" is listed twice`},
	} {
		_, err := Parse([]byte(head + "{provider: o, model: y, strengths: " + c.strengths + "}]}\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("strengths %s: %v, want %q", c.strengths, err, c.want)
		}
	}
	if _, err := Parse([]byte(head + "{provider: o, model: y, strengths: [general, fast, code, tools, long]}]}\n")); err != nil {
		t.Errorf("every accepted strength: %v", err)
	}
}

// TestSimulated: a model is simulated when every upstream of it is a builtin:simulator
// provider (every model of the default configuration); one real expert of a fusion model, or a
// real backend, makes it not; an unknown model is not.
func TestSimulated(t *testing.T) {
	c := Default()
	for _, m := range c.Models {
		if !c.Simulated(m.ID) {
			t.Errorf("%s of the default configuration is not simulated", m.ID)
		}
	}
	if c.Simulated("no-such-model") {
		t.Error("an unknown model is simulated")
	}
	flint, _ := c.Model("service-flint")
	sonnet, _ := c.Model("service-sonnet")
	for _, provider := range []string{flint.Experts[len(flint.Experts)-1].Provider, sonnet.Backend.Provider} {
		c := Default()
		for i := range c.Providers {
			if c.Providers[i].Name == provider {
				c.Providers[i].BaseURL = "https://api.example.com/v1"
			}
		}
		for _, id := range []string{"service-flint", "service-sonnet"} {
			m, _ := c.Model(id)
			uses := slices.ContainsFunc(append(append([]Upstream(nil), m.Experts...), backendOf(m)...), func(u Upstream) bool { return u.Provider == provider })
			if c.Simulated(id) == uses {
				t.Errorf("with %s real, %s simulated: %v", provider, id, c.Simulated(id))
			}
		}
	}
}

// TestAgentsSessionSweep: the sweep of lapsed agent sessions has its own interval,
// agents.session_sweep (default a minute), apart from approval_sweep; a value not above zero
// is refused (by Agents.Validate, which agent.New runs), naming it.
func TestAgentsSessionSweep(t *testing.T) {
	c, err := Parse([]byte("agents:\n  session_sweep: 5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents.ApplyDefaults(); c.Agents.SessionSweep != 5*time.Second || c.Agents.ApprovalSweep != DefaultApprovalSweep {
		t.Fatalf("session_sweep %s, approval_sweep %s: want 5s and the default", c.Agents.SessionSweep, c.Agents.ApprovalSweep)
	}
	d := Default().Agents
	if d.ApplyDefaults(); d.SessionSweep != time.Minute {
		t.Fatalf("default session_sweep %s, want 1m", d.SessionSweep)
	}
	if c, err = Parse([]byte("agents:\n  session_sweep: -1s\n")); err != nil {
		t.Fatal(err)
	}
	c.Agents.ApplyDefaults()
	if err := c.Agents.Validate(c); err == nil || !strings.Contains(err.Error(), "session_sweep") {
		t.Fatalf("a negative session_sweep: %v, want an error naming it", err)
	}
}

// TestEndUserPolicy: a provider's end_user_ids, when unset, is namespaced_always where its
// base URL is a provider known to take the end-user fields (api.openai.com, api.anthropic.com,
// hosts under them, the built-in simulator) and namespaced for any other host (Azure OpenAI,
// Mistral, a local server: they may refuse a field the client did not send); set, it is what
// it says there too; another value is refused, naming the four.
func TestEndUserPolicy(t *testing.T) {
	for _, c := range []struct {
		baseURL, set string
		want         EndUserPolicy
	}{
		{"https://api.openai.com/v1", "", EndUserNamespacedAlways},
		{"https://API.OpenAI.com/v1", "", EndUserNamespacedAlways},
		{"https://eu.api.openai.com/v1", "", EndUserNamespacedAlways},
		{"https://api.anthropic.com", "", EndUserNamespacedAlways},
		{SimulatorURL, "", EndUserNamespacedAlways},
		{"https://acme.openai.azure.com/openai/v1", "", EndUserNamespaced},
		{"https://api.mistral.ai/v1", "", EndUserNamespaced},
		{"http://127.0.0.1:8000/v1", "", EndUserNamespaced},
		{"https://api.openai.com.example/v1", "", EndUserNamespaced},
		{"https://acme.openai.azure.com/openai/v1", EndUserIDsNamespacedAlways, EndUserNamespacedAlways},
		{"https://api.openai.com/v1", EndUserIDsNamespaced, EndUserNamespaced},
		{"https://api.openai.com/v1", EndUserIDsPassThrough, EndUserPassThrough},
		{"https://api.openai.com/v1", EndUserIDsOff, EndUserOff},
		{"http://127.0.0.1:8000/v1", EndUserIDsOff, EndUserOff},
	} {
		if got := (Provider{Kind: KindOpenAIChat, BaseURL: c.baseURL, EndUserIDs: c.set}).EndUserPolicy(); got != c.want {
			t.Errorf("%s, end_user_ids %q: EndUserPolicy %d, want %d", c.baseURL, c.set, got, c.want)
		}
	}
	for _, v := range []string{"namespaced_always", "namespaced", "pass_through", "off"} {
		if _, err := Parse([]byte(`
providers:
  - {name: a, kind: openai-chat, base_url: "https://llm.internal.example/v1", end_user_ids: ` + v + `}
models:
  - {id: m, family: chat, max_output_tokens: 5, price: {input_micros_per_mtok: 1, output_micros_per_mtok: 1}, backend: {provider: a, model: x}}
`)); err != nil {
			t.Errorf("end_user_ids %s: %v", v, err)
		}
	}
	_, err := Parse([]byte(`
providers:
  - {name: a, kind: openai-chat, base_url: "https://llm.internal.example/v1", end_user_ids: always}
models:
  - {id: m, family: chat, max_output_tokens: 5, price: {input_micros_per_mtok: 1, output_micros_per_mtok: 1}, backend: {provider: a, model: x}}
`))
	if err == nil || !strings.Contains(err.Error(), `provider "a": end_user_ids must be namespaced_always, namespaced, pass_through or off`) {
		t.Errorf("end_user_ids always: %v", err)
	}
}
