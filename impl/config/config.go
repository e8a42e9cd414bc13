// Package config owns tollgate's configuration file: the models the gateway offers (family,
// owner, price, limits, and the upstreams behind them), the upstream providers, and the plans
// that decide which models and how much starting credit a new account gets. It parses and
// validates; it never reads the environment (cmd/ passes the lookups it needs).
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/impl/pricecatalog"
)

// Model families: which inference routes serve a model.
const (
	// FamilyChat models are served on /v1/chat/completions and /v1/responses.
	FamilyChat = "chat"
	// FamilyMessages models are served on /v1/messages.
	FamilyMessages = "messages"
)

// Provider kinds: the wire format an upstream speaks.
const (
	KindOpenAIChat        = "openai-chat"
	KindOpenAIResponses   = "openai-responses"
	KindAnthropicMessages = "anthropic-messages"
)

// SimulatorURL as a provider's base_url means the built-in upstream simulator, started in the
// gateway process.
const SimulatorURL = "builtin:simulator"

// Config is the whole configuration file.
type Config struct {
	Server    Server     `yaml:"server"`
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	Plans     []Plan     `yaml:"plans"`
	// Agents configures hosted agents (see Agents; every field has a default).
	Agents Agents `yaml:"agents"`
	// Web configures the signed-in web application (see Web).
	Web Web `yaml:"web"`
	// PriceCatalog adds price lists to the built-in catalog that prices may name (see
	// PriceCatalog).
	PriceCatalog PriceCatalog `yaml:"price_catalog"`
	// Datasets selects where tenant datasets are stored (see Datasets; default: a local
	// directory).
	Datasets Datasets `yaml:"datasets"`
	// Telemetry configures traces (see Telemetry; off unless an endpoint is named).
	Telemetry Telemetry `yaml:"telemetry"`
	// Usage configures the usage table's partitions and retention (see Usage; default: keep
	// everything).
	Usage Usage `yaml:"usage"`

	// catalog is the catalog prices were resolved against (built by Validate).
	catalog *pricecatalog.Catalog
	// dir is the directory of the file the configuration was loaded from, against which
	// relative paths in it are resolved ("" for the current directory).
	dir string
}

// Server holds the listeners.
type Server struct {
	// Listen is the API listener address, e.g. ":8080".
	Listen string `yaml:"listen"`
	// MetricsListen is the Prometheus listener address; empty disables it.
	MetricsListen string `yaml:"metrics_listen"`
	// GCPercent is the garbage collector's target (Go's GOGC; default 400: a gateway's heap is
	// small and short-lived, and collecting less often halves the latency it adds). The GOGC
	// environment variable, when set, wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimitMB is a soft memory limit for the process (Go's GOMEMLIMIT), which makes the
	// collector work harder as the heap nears it, whatever GCPercent says. 0 (the default):
	// tollgate serve derives it from the machine (see DefaultMemoryLimitMB); -1: none. The
	// GOMEMLIMIT environment variable, when set, wins.
	MemoryLimitMB int `yaml:"memory_limit_mb"`
	// BodyBudgetMB bounds the bytes of request bodies over 16 KiB held at once: each is
	// admitted for its Content-Length (or, without one, as its bytes arrive) and holds its
	// share until its request is done; one that finds the budget spent waits up to two
	// seconds for room, then gets 503 with Retry-After. 0 (the default): a quarter of the
	// memory limit, at least 32 MiB (512 MiB when there is no memory limit), which keeps the
	// body, its decoded text and the upstream's copy of every admitted body within the limit;
	// -1: no budget. At least 32 (the largest body) when set.
	BodyBudgetMB int `yaml:"body_budget_mb"`
	// MaxConnections bounds the API listener's open connections (WebSockets included): at
	// the bound the listener accepts no more until one closes, and the new ones wait in the
	// kernel's queue, so that connections held open (by one client, even without a key) cannot
	// take every file descriptor and the memory that each holds (about 27 KiB idle, plus a
	// request body of up to 16 KiB outside the body budget). 0 (the default): one per 128 KiB
	// of the memory limit, between MinConnections and MaxDefaultConnections
	// (MaxDefaultConnections without a memory limit); -1: no bound.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerAddress bounds the API listener's open connections of one client
	// address (an IPv4 address, or an IPv6 /64), so that one address cannot hold every
	// connection max_connections allows, each kept alive by a cheap request now and then, and
	// leave every tenant's new connection waiting in the kernel's queue (trial h16 D1): a
	// connection past it is closed as soon as it is accepted. 0 (the default): an eighth of
	// the connection limit, at least MinConnectionsPerAddress; -1: no bound.
	MaxConnectionsPerAddress int `yaml:"max_connections_per_address"`
	// TrustedProxies are the addresses or prefixes ("10.0.0.5", "10.0.0.0/16", "fd00::/8") of
	// the load balancers and reverse proxies in front of the gateway: their connections carry
	// every client's requests, so they are not held to max_connections_per_address (a balancer
	// holding one connection per stream would otherwise be refused past the share, its clients
	// answered 502; loopback addresses never are), and the X-Forwarded-For they send is
	// believed for the limits per client address (impl/clientaddr): list only proxies that
	// append the address they received from to it (or overwrite it).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// MCPAllowedOrigins are the browser origins ("https://inspector.example.com", scheme, host
	// and port as a browser sends them in Origin) whose pages may call /api/mcp, besides the
	// gateway's own (the request's Host, or web.public_url). A request that sends another Origin
	// is refused 403, the MCP transport's defence against DNS rebinding; one without Origin
	// (command-line and desktop clients) is served.
	MCPAllowedOrigins []string `yaml:"mcp_allowed_origins"`
}

// The bounds of the memory defaults (see DefaultMemoryLimitMB and Server.BodyBudgetBytes).
const (
	// MinMemoryLimitMB and MaxMemoryLimitMB bound the memory limit derived from the host's
	// physical memory (not one derived from a cgroup limit, which the operator chose).
	MinMemoryLimitMB = 256
	MaxMemoryLimitMB = 1024
	// MinBodyBudgetMB is the smallest body budget: the largest request body (32 MiB).
	MinBodyBudgetMB = 32
	// NoLimitBodyBudgetMB is the default body budget of a process without a memory limit.
	NoLimitBodyBudgetMB = 512
	// MinConnections and MaxDefaultConnections bound the default of max_connections.
	MinConnections        = 1024
	MaxDefaultConnections = 16384
	// MinConnectionsPerAddress is the smallest default of max_connections_per_address.
	MinConnectionsPerAddress = 64
)

// TrustedProxyPrefixes parses TrustedProxies (an address is a prefix of its full length).
func (s Server) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range s.TrustedProxies {
		if prefix, err := netip.ParsePrefix(p); err == nil {
			out = append(out, prefix.Masked())
			continue
		}
		addr, err := netip.ParseAddr(p)
		if err != nil {
			return nil, fmt.Errorf("server.trusted_proxies: %q is neither an address nor a prefix (10.0.0.5, 10.0.0.0/16)", p)
		}
		addr = addr.Unmap()
		out = append(out, netip.PrefixFrom(addr, addr.BitLen()))
	}
	return out, nil
}

// ConnectionsPerAddress is the bound of one client address's open API connections (see
// MaxConnectionsPerAddress): 0 when there is none.
func (s Server) ConnectionsPerAddress() int {
	switch {
	case s.MaxConnectionsPerAddress < 0:
		return 0
	case s.MaxConnectionsPerAddress > 0:
		return s.MaxConnectionsPerAddress
	}
	limit := s.ConnectionLimit()
	if limit == 0 {
		return 0
	}
	return min(max(limit/8, MinConnectionsPerAddress), limit)
}

// ConnectionLimit is the bound of the API listener's open connections (see MaxConnections): 0
// when there is none.
func (s Server) ConnectionLimit() int {
	switch {
	case s.MaxConnections < 0:
		return 0
	case s.MaxConnections > 0:
		return s.MaxConnections
	case s.MemoryLimitMB > 0:
		return min(max(s.MemoryLimitMB*8, MinConnections), MaxDefaultConnections)
	}
	return MaxDefaultConnections
}

// DefaultMemoryLimitMB is the memory limit tollgate serve applies when memory_limit_mb is 0,
// from what it learnt of the machine: three quarters of the process's cgroup memory limit when
// it has one (cgroupBytes > 0; the rest is for memory outside Go's heap, such as DuckDB's),
// else a quarter of the physical memory (physicalBytes) between MinMemoryLimitMB and
// MaxMemoryLimitMB, since a gateway shares its host; 0 (none) when neither is known.
func DefaultMemoryLimitMB(cgroupBytes, physicalBytes int64) int {
	switch {
	case cgroupBytes > 0:
		return int(max(cgroupBytes/4*3>>20, 1))
	case physicalBytes > 0:
		return int(min(max(physicalBytes/4>>20, MinMemoryLimitMB), MaxMemoryLimitMB))
	}
	return 0
}

// BodyBudgetBytes is the in-flight budget of large request bodies in bytes (see BodyBudgetMB):
// 0 when there is none.
func (s Server) BodyBudgetBytes() int64 {
	switch {
	case s.BodyBudgetMB < 0:
		return 0
	case s.BodyBudgetMB > 0:
		return int64(s.BodyBudgetMB) << 20
	case s.MemoryLimitMB > 0:
		return int64(max(s.MemoryLimitMB/4, MinBodyBudgetMB)) << 20
	}
	return NoLimitBodyBudgetMB << 20
}

// Provider is one upstream endpoint.
type Provider struct {
	Name string `yaml:"name"`
	// Kind is the wire format the upstream speaks: openai-chat, openai-responses or
	// anthropic-messages.
	Kind string `yaml:"kind"`
	// BaseURL is the upstream's base, e.g. https://api.openai.com/v1, or builtin:simulator.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable that holds the upstream key.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKey is filled in by cmd/ from APIKeyEnv; it is never read from the file.
	APIKey string `yaml:"-"`
	// HostedTools prices the tools this provider runs itself and bills per call, by name
	// (web_search, file_search, code_execution, image_generation; see HostedToolKinds). A
	// hosted tool a client asks for is passed to the provider only when it is priced here, and
	// every call is billed; otherwise it is dropped and named in x-tollgate-dropped-fields.
	HostedTools map[string]HostedTool `yaml:"hosted_tools,omitempty"`
	// PromptCache says whether a request translated for an anthropic-messages provider from
	// an OpenAI format asks for Anthropic's automatic prompt caching (a top-level
	// cache_control) when it continues a conversation or carries a prompt_cache_key:
	// "automatic" (the default) or "off" (for an Anthropic-compatible upstream that refuses
	// the field). OpenAI caches every prompt by itself; Anthropic caches only where asked, so
	// without it an OpenAI client routed to Anthropic pays the full input price on every turn.
	PromptCache string `yaml:"prompt_cache,omitempty"`
	// EndUserIDs is what the provider is sent as a request's end-user identifier (OpenAI's
	// safety_identifier and user, Anthropic's metadata.user_id; impl/enduserid makes the
	// gateway's): "namespaced_always", the gateway's identifier of the client's value for the
	// caller's account, or the account's own when the client sent none, in every format the
	// provider is sent; "namespaced", the gateway's identifier of a value the client sent in
	// the provider's own format, nothing added when it sent none nor to a translated request
	// (the client's field dropped and named); "pass_through", the client's value as it came
	// (none when it sent none); "off", none at all, the client's dropped and named. Unset: the
	// default of where BaseURL points (EndUserPolicy): namespaced_always for the providers
	// known to take the fields (api.openai.com, api.anthropic.com, the built-in simulator),
	// namespaced for any other host, which may refuse a field its client did not send (Azure
	// OpenAI on older api-versions, Mistral, Anthropic-compatible servers and metadata).
	EndUserIDs string `yaml:"end_user_ids,omitempty"`
	// GenAIProvider is the provider's gen_ai.provider.name on traces and metrics, one of the
	// GenAI conventions' values (openai, anthropic, aws.bedrock, azure.ai.openai,
	// gcp.vertex_ai, ...) or a name of its own. Unset: GenAIProviderName's, from the base URL's
	// host when it is a provider the conventions name, else from the kind.
	GenAIProvider string `yaml:"gen_ai_provider,omitempty"`
	// AccountKeys says whether an account must reach the provider with an upstream key of its
	// own (set with tollgate admin provider-key set): "optional" (the default), an account
	// with one is sent with it and any other with the operator's key (APIKey); "required", an
	// account without one is not sent to the provider at all (another expert of the model may
	// serve it; else the request is refused). The provider's prompt cache belongs to the
	// upstream account a key is of, so only accounts of their own keys keep their cached
	// prompts apart (docs/inference.md).
	AccountKeys string `yaml:"account_keys,omitempty"`
}

// Account key settings of a provider (Provider.AccountKeys).
const (
	AccountKeysOptional = "optional"
	AccountKeysRequired = "required"
)

// AccountKeysRequired reports whether an account without an upstream key of its own for the
// provider is kept from it (Provider.AccountKeys).
func (p Provider) AccountKeysRequired() bool { return p.AccountKeys == AccountKeysRequired }

// GenAIProviderName is the provider's gen_ai.provider.name: GenAIProvider when set; else the
// conventions' name of the provider its base URL's host is (api.deepseek.com is deepseek,
// bedrock-runtime.us-east-1.amazonaws.com aws.bedrock, an aiplatform.googleapis.com host
// gcp.vertex_ai), since a well-known value that applies must be used, whatever API the
// provider is spoken to in; else the kind's (anthropic for anthropic-messages, openai for the
// OpenAI formats), the conventions' name for a provider known only by the API it speaks.
func (p Provider) GenAIProviderName() string {
	if p.GenAIProvider != "" {
		return p.GenAIProvider
	}
	if u, err := url.Parse(p.BaseURL); err == nil && u.Hostname() != "" {
		if name := genAIProviderOfHost(strings.ToLower(u.Hostname())); name != "" {
			return name
		}
	}
	if p.Kind == KindAnthropicMessages {
		return "anthropic"
	}
	return "openai"
}

// genAIProviderOfHost is the GenAI conventions' gen_ai.provider.name of the provider whose API
// host is host, "" for a host it does not know.
func genAIProviderOfHost(host string) string {
	under := func(domain string) bool { return host == domain || strings.HasSuffix(host, "."+domain) }
	switch {
	case under("api.openai.com"):
		return "openai"
	case under("api.anthropic.com"):
		return "anthropic"
	case strings.HasPrefix(host, "bedrock") && (under("amazonaws.com") || under("api.aws")):
		return "aws.bedrock"
	case under("openai.azure.com"):
		return "azure.ai.openai"
	case under("inference.ai.azure.com") || under("services.ai.azure.com"):
		return "azure.ai.inference"
	case strings.HasSuffix(host, "aiplatform.googleapis.com"):
		return "gcp.vertex_ai"
	case host == "generativelanguage.googleapis.com":
		return "gcp.gemini"
	case under("groq.com"):
		return "groq"
	case under("deepseek.com"):
		return "deepseek"
	case under("mistral.ai"):
		return "mistral_ai"
	case under("x.ai"):
		return "x_ai"
	case under("perplexity.ai"):
		return "perplexity"
	case under("cohere.com") || under("cohere.ai"):
		return "cohere"
	case under("ml.cloud.ibm.com"):
		return "ibm.watsonx.ai"
	}
	return ""
}

// Prompt-cache settings of an anthropic-messages provider (Provider.PromptCache).
const (
	PromptCacheAutomatic = "automatic"
	PromptCacheOff       = "off"
)

// End-user identifier settings of a provider (Provider.EndUserIDs).
const (
	EndUserIDsNamespacedAlways = "namespaced_always"
	EndUserIDsNamespaced       = "namespaced"
	EndUserIDsPassThrough      = "pass_through"
	EndUserIDsOff              = "off"
)

// EndUserPolicy is what a provider is sent as a request's end-user identifier
// (Provider.EndUserIDs, its default resolved): decided once when the configuration is loaded
// and kept with each of the provider's experts (routing.Expert.EndUserIDs).
type EndUserPolicy uint8

// The end-user policies. The zero value is EndUserNamespaced, which adds no field a client
// did not send.
const (
	// EndUserNamespaced: the gateway's identifier of a value the client sent in the
	// provider's format; nothing added otherwise, and a translated request's value dropped.
	EndUserNamespaced EndUserPolicy = iota
	// EndUserNamespacedAlways: the gateway's identifier of the client's value, or the
	// account's own when it sent none, in every format.
	EndUserNamespacedAlways
	// EndUserPassThrough: the client's value as it came, none when it sent none.
	EndUserPassThrough
	// EndUserOff: none, the client's dropped.
	EndUserOff
)

// EndUserPolicy is the provider's end_user_ids, or, unset, its default for where its base URL
// points: EndUserNamespacedAlways for a provider known to take the end-user fields (the
// built-in simulator, api.openai.com, api.anthropic.com and hosts under them), EndUserNamespaced for any other
// host (an "OpenAI-compatible" or Anthropic-compatible API may refuse a field its client did
// not send, and every request would then fail).
func (p Provider) EndUserPolicy() EndUserPolicy {
	switch p.EndUserIDs {
	case EndUserIDsNamespacedAlways:
		return EndUserNamespacedAlways
	case EndUserIDsNamespaced:
		return EndUserNamespaced
	case EndUserIDsPassThrough:
		return EndUserPassThrough
	case EndUserIDsOff:
		return EndUserOff
	}
	if p.BaseURL == SimulatorURL {
		return EndUserNamespacedAlways
	}
	if u, err := url.Parse(p.BaseURL); err == nil {
		// As GenAIProviderName recognises them: the host or one under it (eu.api.openai.com).
		host := strings.ToLower(u.Hostname())
		for _, known := range []string{"api.openai.com", "api.anthropic.com"} {
			if host == known || strings.HasSuffix(host, "."+known) {
				return EndUserNamespacedAlways
			}
		}
	}
	return EndUserNamespaced
}

// AutomaticPromptCache reports whether requests translated for the provider ask for
// automatic prompt caching (an anthropic-messages provider whose prompt_cache is not off).
func (p Provider) AutomaticPromptCache() bool {
	return p.Kind == KindAnthropicMessages && p.PromptCache != PromptCacheOff
}

// HostedTool is the price of one hosted tool at one provider.
type HostedTool struct {
	// PricePerCallMicros is billed for every call the provider reports.
	PricePerCallMicros int64 `yaml:"price_micros_per_call"`
	// MaxCalls bounds the calls of one request: the provider is told to make no more (where
	// its API has such a cap), the reservation covers that many, and no more are billed.
	MaxCalls int `yaml:"max_calls"`
	// InputTokensPerCall is the most input tokens one call may bring into the request (a web
	// search's results, a file search's chunks, a sandbox's output), which the provider bills
	// at the model's input rates on top of the call's price: the reservation covers that many
	// for each call it covers. Unset: DefaultHostedInputTokens for the tool; 0 where the
	// provider does not bill them (OpenAI's web_search_preview on non-reasoning models).
	InputTokensPerCall *int `yaml:"input_tokens_per_call,omitempty"`
}

// DefaultHostedInputTokens is, per hosted tool, the input tokens one call is reserved for when
// the configuration does not say: cautious bounds, not prices. Anthropic bills a web search's
// results as input tokens ("Web search tool": $10 per 1,000 searches "plus standard token costs
// for search-generated content"), and OpenAI bills search content tokens at the model's rates
// (a fixed 8,000 a call on its mini models); a file search returns up to 20 chunks of about
// 800 tokens; a code sandbox's output comes back as input. An image generation's cost is its
// price per call.
var DefaultHostedInputTokens = map[string]int{"web_search": 20_000, "file_search": 20_000, "code_execution": 10_000, "image_generation": 0}

// InputTokens is the input tokens one call of the hosted tool named name is reserved for.
func (t HostedTool) InputTokens(name string) int {
	if t.InputTokensPerCall != nil {
		return *t.InputTokensPerCall
	}
	return DefaultHostedInputTokens[name]
}

// HostedToolKinds lists, per provider kind, the hosted tools its API can run: chat
// completions' web_search_options; the Responses API's built-in tools; the Messages API's
// versioned server tools.
var HostedToolKinds = map[string][]string{
	KindOpenAIChat:        {"web_search"},
	KindOpenAIResponses:   {"web_search", "file_search", "code_execution", "image_generation"},
	KindAnthropicMessages: {"web_search", "code_execution"},
}

// Upstream is one model at one provider.
type Upstream struct {
	Provider string `yaml:"provider"`
	// Model is the provider's model id.
	Model string `yaml:"model"`
	// Price overrides the gateway model's price for requests served by this upstream.
	Price *Price `yaml:"price,omitempty"`
	// MaxOutputTokens overrides the gateway model's output limit for this upstream.
	MaxOutputTokens int `yaml:"max_output_tokens,omitempty"`
	// ImageTokens is the most input tokens the provider bills for one image on this model,
	// which the reservation counts each image at. Unset (0): the published rule of the
	// provider's model, or of the price's catalog entry, where the catalog knows one
	// (pricecatalog.ImageTokens), else pricecatalog.DefaultImageTokens.
	ImageTokens int `yaml:"image_tokens,omitempty"`
	// Strengths are what the fusion router scores the expert for, from StrengthNames; any
	// other word is refused at start.
	Strengths []string `yaml:"strengths,omitempty"`
}

// The strengths a fusion expert may list. Each earns the expert points in the router's score
// when a request shows the feature it names (routing.Features): the routing package's
// documentation gives the points.
const (
	// StrengthGeneral scores every request (the tie-breaker is the configured order).
	StrengthGeneral = "general"
	// StrengthFast scores a small request: little input and a small output bound.
	StrengthFast = "fast"
	// StrengthCode scores a request whose last user message looks like source code.
	StrengthCode = "code"
	// StrengthTools scores a request that offers tools.
	StrengthTools = "tools"
	// StrengthLong scores a request with a long input or a large output bound.
	StrengthLong = "long"
)

// StrengthNames lists the strengths a fusion expert may list, in the order the documentation
// gives them. A word the router does not score is refused rather than accepted as a hint that
// does nothing (configuration trial: "reasoning", in the shipped configurations, scored
// nothing, and a misspelt "tool" was accepted as silently).
var StrengthNames = []string{StrengthGeneral, StrengthFast, StrengthCode, StrengthTools, StrengthLong}

// Model is one model the gateway offers.
type Model struct {
	ID          string `yaml:"id"`
	Family      string `yaml:"family"`
	OwnedBy     string `yaml:"owned_by"`
	DisplayName string `yaml:"display_name"`
	Price       Price  `yaml:"price"`
	// MaxOutputTokens bounds the output of one request (and the worst-case reservation).
	MaxOutputTokens int `yaml:"max_output_tokens"`
	// ContextTokens is the model's context window.
	ContextTokens int `yaml:"context_tokens"`
	// Backend serves a model without fusion routing.
	Backend *Upstream `yaml:"backend,omitempty"`
	// Experts serve a fusion model: the router picks one per request.
	Experts []Upstream `yaml:"experts,omitempty"`
}

// Plan decides what a new account on it gets.
type Plan struct {
	Name string `yaml:"name"`
	// Models are granted to accounts created on the plan.
	Models []string `yaml:"models"`
	// StartingCreditMicros is granted (as a ledger entry) to accounts created on the plan.
	StartingCreditMicros int64 `yaml:"starting_credit_micros"`
	// DefaultRPM is the requests-per-minute cap of keys created for the plan's accounts (0: none).
	DefaultRPM int `yaml:"default_rpm"`
	// MaxRPM is the highest requests-per-minute cap a key of the plan's accounts may be given
	// (0: no maximum, and a key may have no cap). With a maximum every key has a cap.
	MaxRPM int `yaml:"max_rpm"`
	// MaxKeys is the key quota: the most keys an account of the plan may hold that are not
	// revoked (disabled and expired ones count, since they can work again). 0: no quota.
	MaxKeys int `yaml:"max_keys"`
}

//go:embed default.yaml
var defaultYAML []byte

//go:embed example.yaml
var exampleYAML []byte

// Example returns the example configuration, which routes to the real OpenAI and Anthropic
// APIs with keys from OPENAI_API_KEY and ANTHROPIC_API_KEY.
func Example() *Config {
	c, err := Parse(exampleYAML)
	if err != nil {
		panic("config: the embedded example is invalid: " + err.Error())
	}
	return c
}

// Default returns the built-in configuration: every provider is the built-in simulator.
func Default() *Config {
	c, err := Parse(defaultYAML)
	if err != nil {
		panic("config: the embedded default is invalid: " + err.Error())
	}
	return c
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parse(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates a configuration; unknown keys are errors, and an error of a key or
// a value names its line and its key path (decodeError). Relative paths in it are relative to
// the current directory.
func Parse(b []byte) (*Config, error) { return parse(b, "") }

func parse(b []byte, dir string) (*Config, error) {
	c := Config{dir: dir}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, decodeError(b, err)
	}
	if err := fractionalIntegers(b); err != nil {
		return nil, err
	}
	if c.Server.Listen == "" {
		c.Server.Listen = ":8080"
	}
	if c.Server.GCPercent == 0 {
		c.Server.GCPercent = 400
	}
	c.Web.ApplyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// genAIProviderName is what a provider's gen_ai_provider may be: the conventions' values are
// lower-case names with '.' and '_' ("aws.bedrock", "mistral_ai").
var genAIProviderName = regexp.MustCompile(`^[a-z0-9][a-z0-9._]*$`)

// backendOf is a model's backend as a list: one upstream, or none for a fusion model.
func backendOf(m Model) []Upstream {
	if m.Backend == nil {
		return nil
	}
	return []Upstream{*m.Backend}
}

// Validate checks references and values.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.catalog == nil {
		cat, err := c.PriceCatalog.load(c.dir)
		if err != nil {
			return err
		}
		c.catalog = cat
	}
	if d := c.PriceCatalog.Date; d != "" && !validDay(d) {
		bad("price_catalog: date %q is not a day written YYYY-MM-DD", d)
	}
	if err := c.Telemetry.validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.Server.TrustedProxyPrefixes(); err != nil {
		errs = append(errs, err)
	}
	if c.Server.MemoryLimitMB < -1 {
		bad("server.memory_limit_mb must be -1 (none), 0 (derived from the machine) or a size in MiB")
	}
	if c.Server.BodyBudgetMB < -1 || (c.Server.BodyBudgetMB > 0 && c.Server.BodyBudgetMB < MinBodyBudgetMB) {
		bad("server.body_budget_mb must be -1 (none), 0 (a quarter of the memory limit) or at least %d (the largest request body)", MinBodyBudgetMB)
	}
	providers := map[string]bool{}
	for i, p := range c.Providers {
		switch {
		case p.Name == "":
			bad("providers[%d]: name is required", i)
		case providers[p.Name]:
			bad("providers[%d]: duplicate name %q", i, p.Name)
		}
		providers[p.Name] = true
		if !slices.Contains([]string{KindOpenAIChat, KindOpenAIResponses, KindAnthropicMessages}, p.Kind) {
			bad("provider %q: kind must be openai-chat, openai-responses or anthropic-messages", p.Name)
		}
		if p.BaseURL != SimulatorURL && !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
			bad("provider %q: base_url must be http(s)://… or %s", p.Name, SimulatorURL)
		} else if u, err := url.Parse(p.BaseURL); p.BaseURL != SimulatorURL && (err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
			// The routes' paths are added to it (configuration trial: a query string or a
			// fragment was glued before them, and https:// with no host was accepted).
			bad("provider %q: base_url must be a scheme, a host and at most a path (no query, fragment or credentials), e.g. https://api.openai.com/v1", p.Name)
		}
		if p.APIKeyEnv != "" && !envName.MatchString(p.APIKeyEnv) {
			// Not echoed: it is most likely the key itself, pasted where its variable's name
			// goes (configuration trial: the start-up warning logged it).
			bad("provider %q: api_key_env must name an environment variable (letters, digits and _), not hold the key: put the key in that variable", p.Name)
		}
		if p.GenAIProvider != "" && !genAIProviderName.MatchString(p.GenAIProvider) {
			bad("provider %q: gen_ai_provider must be a lower-case name of letters, digits, '.' and '_', e.g. aws.bedrock", p.Name)
		}
		switch {
		case p.PromptCache != "" && p.PromptCache != PromptCacheAutomatic && p.PromptCache != PromptCacheOff:
			bad("provider %q: prompt_cache must be automatic or off", p.Name)
		case p.PromptCache != "" && p.Kind != KindAnthropicMessages:
			bad("provider %q: prompt_cache applies only to an anthropic-messages provider (OpenAI caches by itself)", p.Name)
		}
		if p.EndUserIDs != "" && !slices.Contains([]string{EndUserIDsNamespacedAlways, EndUserIDsNamespaced, EndUserIDsPassThrough, EndUserIDsOff}, p.EndUserIDs) {
			bad("provider %q: end_user_ids must be namespaced_always, namespaced, pass_through or off (unset: namespaced_always for api.openai.com, api.anthropic.com and %s, namespaced for another host)", p.Name, SimulatorURL)
		}
		if p.AccountKeys != "" && p.AccountKeys != AccountKeysOptional && p.AccountKeys != AccountKeysRequired {
			bad("provider %q: account_keys must be optional or required", p.Name)
		}
		for _, name := range slices.Sorted(maps.Keys(p.HostedTools)) {
			t := p.HostedTools[name]
			switch {
			case !slices.Contains(HostedToolKinds[p.Kind], name):
				bad("provider %q: hosted tool %q: a %s provider runs only %s", p.Name, name, p.Kind, strings.Join(HostedToolKinds[p.Kind], ", "))
			case t.PricePerCallMicros <= 0:
				bad("provider %q: hosted tool %q: price_micros_per_call must be positive", p.Name, name)
			case t.MaxCalls < 1:
				bad("provider %q: hosted tool %q: max_calls must be at least 1", p.Name, name)
			case t.InputTokensPerCall != nil && *t.InputTokensPerCall < 0:
				bad("provider %q: hosted tool %q: input_tokens_per_call must not be negative", p.Name, name)
			}
		}
	}
	// anthropic reports whether a provider is Anthropic's kind, whose cache writes cost more
	// than input (a price's untyped cache writes are billed at Anthropic's multiples there).
	anthropic := map[string]bool{}
	for _, p := range c.Providers {
		anthropic[p.Name] = p.Kind == KindAnthropicMessages
	}
	// unresolved holds the prices whose catalog entry or tiers were refused above: the error
	// names what is wrong with them, and "has no price" would only mislead.
	unresolved := map[*Price]bool{}
	checkUpstream := func(model string, u Upstream) {
		if !providers[u.Provider] {
			bad("model %q: unknown provider %q", model, u.Provider)
		}
		if u.Model == "" {
			bad("model %q: an upstream needs the provider's model id", model)
		}
		if u.ImageTokens < 0 {
			bad("model %q: upstream %s/%s: negative image_tokens %d", model, u.Provider, u.Model, u.ImageTokens)
		}
		for j, s := range u.Strengths {
			switch {
			case !slices.Contains(StrengthNames, s):
				bad("model %q: upstream %s/%s: unknown strength %q: the fusion router scores only %s", model, u.Provider, u.Model, s, strings.Join(StrengthNames, ", "))
			case slices.Contains(u.Strengths[:j], s):
				// The router would count it twice, which no documentation promises.
				bad("model %q: upstream %s/%s: strength %q is listed twice", model, u.Provider, u.Model, s)
			}
		}
		if u.Price != nil {
			if err := c.resolvePrice(u.Price, anthropic[u.Provider]); err != nil {
				bad("model %q: upstream %s/%s: %v", model, u.Provider, u.Model, err)
				unresolved[u.Price] = true
			}
		}
	}
	models := map[string]bool{}
	for i, m := range c.Models {
		switch {
		case m.ID == "":
			bad("models[%d]: id is required", i)
		case models[m.ID]:
			bad("models[%d]: duplicate id %q", i, m.ID)
		}
		models[m.ID] = true
		if m.Family != FamilyChat && m.Family != FamilyMessages {
			bad("model %q: family must be chat or messages", m.ID)
		}
		onAnthropic := m.Backend != nil && anthropic[m.Backend.Provider]
		for _, e := range m.Experts {
			onAnthropic = onAnthropic || anthropic[e.Provider]
		}
		if err := c.resolvePrice(&c.Models[i].Price, onAnthropic); err != nil {
			bad("model %q: %v", m.ID, err)
			unresolved[&c.Models[i].Price] = true
		}
		if m.MaxOutputTokens <= 0 {
			bad("model %q: max_output_tokens must be positive", m.ID)
		}
		if m.ContextTokens < 0 || (m.ContextTokens > 0 && m.ContextTokens <= m.MaxOutputTokens) {
			// Every request would be refused as too long (configuration trial: accepted).
			bad("model %q: context_tokens must be 0 (not enforced) or above max_output_tokens", m.ID)
		}
		seen := map[string]bool{}
		for _, e := range m.Experts {
			if key := e.Provider + "/" + e.Model; seen[key] {
				bad("model %q: expert %s is listed twice", m.ID, key)
			} else {
				seen[key] = true
			}
		}
		if (m.Backend == nil) == (len(m.Experts) == 0) {
			bad("model %q: exactly one of backend or experts is required", m.ID)
		}
		if m.Backend != nil {
			checkUpstream(m.ID, *m.Backend)
		}
		for _, e := range m.Experts {
			checkUpstream(m.ID, e)
		}
		// Every upstream is priced, by its own price or the model's: a forgotten price would
		// serve the model free, and reserve nothing (configuration trial: a fusion expert
		// without a price took every request that looked like code, at 0).
		for _, u := range append(append([]Upstream(nil), m.Experts...), backendOf(m)...) {
			if p := c.Models[i].Price; u.Price != nil {
				p = *u.Price
				if !p.priced() && !unresolved[u.Price] {
					bad("model %q: upstream %s/%s: its price charges nothing; give it one (a catalog entry or input_micros_per_mtok and output_micros_per_mtok), or say free: true to serve it without charge", m.ID, u.Provider, u.Model)
				}
			} else if !p.priced() && !unresolved[&c.Models[i].Price] {
				bad("model %q: upstream %s/%s has no price, and the model has none to give it: set price (a catalog entry or input_micros_per_mtok and output_micros_per_mtok) on the model or the upstream, or say free: true to serve it without charge", m.ID, u.Provider, u.Model)
			}
		}
	}
	plans := map[string]bool{}
	for i, p := range c.Plans {
		if p.Name == "" || plans[p.Name] {
			bad("plans[%d]: missing or duplicate name %q", i, p.Name)
		}
		plans[p.Name] = true
		for _, id := range p.Models {
			if !models[id] {
				bad("plan %q: unknown model %q", p.Name, id)
			}
		}
		if p.StartingCreditMicros < 0 || p.DefaultRPM < 0 || p.MaxRPM < 0 {
			bad("plan %q: negative starting credit or rpm", p.Name)
		}
		if p.MaxKeys < 0 {
			bad("plan %q: negative max_keys %d (0 is no quota)", p.Name, p.MaxKeys)
		}
		if p.MaxRPM > 0 && (p.DefaultRPM == 0 || p.DefaultRPM > p.MaxRPM) {
			bad("plan %q: default_rpm %d is not within max_rpm %d", p.Name, p.DefaultRPM, p.MaxRPM)
		}
	}
	errs = append(errs, c.Web.validate(c))
	errs = append(errs, c.Datasets.Validate())
	errs = append(errs, c.Usage.Validate())
	return errors.Join(errs...)
}

// Model returns the configured model with id.
func (c *Config) Model(id string) (Model, bool) {
	for _, m := range c.Models {
		if m.ID == id {
			return m, true
		}
	}
	return Model{}, false
}

// Simulated reports whether the model with id is configured and every upstream of it is a
// provider whose base URL is the built-in simulator (SimulatorURL): its answers are the
// simulator's placeholder words and scripts, as under `make run` without provider keys.
func (c *Config) Simulated(id string) bool {
	m, ok := c.Model(id)
	if !ok {
		return false
	}
	ups := append(append([]Upstream(nil), m.Experts...), backendOf(m)...)
	for _, u := range ups {
		if p, ok := c.Provider(u.Provider); !ok || p.BaseURL != SimulatorURL {
			return false
		}
	}
	return len(ups) > 0
}

// Provider returns the provider called name.
func (c *Config) Provider(name string) (Provider, bool) {
	for _, p := range c.Providers {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Plan returns the plan called name.
func (c *Config) Plan(name string) (Plan, bool) {
	for _, p := range c.Plans {
		if p.Name == name {
			return p, true
		}
	}
	return Plan{}, false
}

// ResolveSecrets fills each provider's APIKey from the environment variable it names, using
// lookup (cmd/ passes the process environment).
func (c *Config) ResolveSecrets(lookup func(string) (string, bool)) {
	for i := range c.Providers {
		if name := c.Providers[i].APIKeyEnv; name != "" {
			c.Providers[i].APIKey, _ = lookup(name)
		}
	}
}
