// Package routing decides where a request goes. The Registry knows, from the configuration,
// which route family serves each model, its price and output limit, and the upstreams behind
// it. For a fusion model the Router picks one expert per request, by a documented policy over
// the request's features and the experts' live health and latency, and orders the rest for
// failover; a base model has its one backend.
//
// The fusion policy scores every expert and tries them best first:
//
//   - strengths: +3 when the expert lists "tools" and the request offers tools; +3 for "code"
//     when the request looks like code (fenced blocks, or common keywords of programming
//     languages, looked for in the first and last 16 KiB of the last user message only: see
//     LooksLikeCode); +2 for "long" when the input estimate exceeds 8,000 tokens or the requested
//     output exceeds 4,000; +1 for "fast" when the input is under 1,000 tokens and the output
//     under 1,000; +1 for "general" always (the tie-breaker of last resort is the configured
//     order). These are the only strengths (config.StrengthNames): the configuration refuses
//     any other word, since the router would score it nothing. In particular the router does
//     not see whether a request asks for reasoning, so there is no "reasoning" strength;
//     clients that want a reasoning model name one (a base model whose backend is it);
//   - health: an expert whose recent attempts failed (an exponentially weighted failure rate
//     over 0.5, or 3 failures in a row) loses 10 points for 30 seconds after its last failure,
//     so traffic moves away from it but comes back to probe. An attempt is one upstream call,
//     its own retries included; it fails on a 429, a 5xx or a connection failure before its
//     answer began, and a streamed answer fails when it breaks off (cut off, an in-band error
//     of the upstream's making, silent for too long), which then counts as a failure instead
//     of the success its head counted (ObserveBroken). A failure says nothing of latency;
//   - latency: minus one point per 500 ms of the expert's time to first byte for requests of
//     this one's size and streaming, so a slower expert wins only on strengths. The time is the answering
//     try's own, from its start to its head: not the tries that failed before it nor the waits
//     between them (a Retry-After), and a failed attempt adds none. A prompt's first byte
//     comes after its prefill, so the times are kept per size class, the classes of the
//     strengths above (SizeClass: small, under 1,000 tokens in and out; long, over 8,000 in or
//     4,000 out; medium, the rest), each apart for streamed and non-streamed answers (a
//     non-streamed answer's first byte waits for the whole answer, a stream's for its first
//     token), and a request is scored with its own class's only: a long prompt's time says
//     nothing of a short one's, nor a whole answer's of a first token's. Within a class the time is kept per
//     account, each account's smoothed with weight 0.2 for its newest answer, for the last
//     AccountsPerClass (8) accounts the expert answered there; the expert's time is the lower
//     median of theirs, so an account is one voice however many requests it sends, and one
//     tenant's slow answers cannot make the expert look slower to the others than they found
//     it (security review s14h9); alone in a class in the last minute, an account's time is
//     the class's. Each account's time ages: it counts in full at its last answer and fades
//     linearly to nothing 60 seconds later (LatencyMemory), and its new answer weighs against
//     what is left of its average (the whole, once it has faded). An expert that once answered
//     slowly therefore gets back, within a minute, the traffic its strengths earn, and is
//     measured afresh, instead of never. An expert not measured in a class in the last minute
//     counts no latency points there.
//
// Reading the request for these signals is bounded: the code test is a plain substring search
// for each marker over at most 32 KiB, whatever the request's size, so a prompt of tens of
// megabytes costs the router microseconds, not the seconds a regular expression over the
// whole text took (BenchmarkLooksLikeCode; issue 23). A request's size is judged against the
// context window before the router reads it at all.
package routing

import (
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/pricecatalog"
)

// Expert is one upstream that can serve a model, with its price and limit.
type Expert struct {
	// Key identifies the expert in health records: "provider/model".
	Key      string
	Provider string
	// Model is the provider's model id.
	Model string
	Kind  llm.Format
	// Price is what the expert's tokens cost, per kind.
	Price           price.Price
	MaxOutputTokens int
	Strengths       []string
	// Hosted prices the hosted tools the expert's provider runs for the gateway's tenants, by
	// llm.HostedTool (a zero MaxCalls: not run, the tool is dropped).
	Hosted [llm.NumHostedTools]config.HostedTool
	// AutomaticCache is true when a request translated for the expert from an OpenAI format
	// may ask for the provider's automatic prompt caching (config.Provider.PromptCache).
	AutomaticCache bool
	// EndUserIDs is what the expert's provider is sent as a request's end-user identifier
	// (config.Provider.EndUserPolicy: its end_user_ids, or the default of its host), decided
	// once here rather than per request.
	EndUserIDs config.EndUserPolicy
	// Host and Port are the provider's address, from its base URL (empty and 0 for the
	// built-in simulator), for the upstream tries' trace spans.
	Host string
	Port int
	// GenAIProvider is the provider's gen_ai.provider.name on the tries' spans and in the GenAI
	// metrics (config.Provider.GenAIProviderName).
	GenAIProvider string
}

// HostedPolicy is the expert's hosted tools as the converters ask for them.
func (e *Expert) HostedPolicy(t llm.HostedTool) (maxCalls int, ok bool) {
	h := e.Hosted[t]
	return h.MaxCalls, h.MaxCalls > 0
}

// HostedCost is what the calls cost at the expert's prices, each tool's count capped at
// bounds (the calls the reservation covered), in micro-units.
func (e *Expert) HostedCost(calls, bounds llm.HostedCalls) int64 {
	var total int64
	for t, n := range calls {
		total += min(n, bounds[t]) * e.Hosted[t].PricePerCallMicros
	}
	return total
}

// Model is a configured model as routing sees it.
type Model struct {
	ID              string
	Family          string
	MaxOutputTokens int
	// ContextTokens is the context window (0: unknown, not enforced).
	ContextTokens int
	// ImageTokens is the most input tokens one image may cost through any expert: what the
	// reservation counts each image at.
	ImageTokens int
	// Fusion is true when the model has experts rather than one backend.
	Fusion  bool
	Experts []Expert
	// HostedPriced is set when an expert runs a hosted tool: requests that may ask for one
	// are then read for them before the reservation.
	HostedPriced bool
}

// HostedWorst is the most the hosted tools present (by llm.HostedTool) may cost through any
// expert of kind f, each at its bound of calls: the calls' prices (fees), and the input tokens
// they may bring into the request (a search's results, billed at the model's input rates),
// which the reservation covers on top of the request's own. Only an expert of the client's own
// format passes hosted tools.
func (m *Model) HostedWorst(f llm.Format, present [llm.NumHostedTools]bool) (fees, inputTokens int64) {
	for _, e := range m.Experts {
		if e.Kind != f {
			continue
		}
		var cost, tokens int64
		for t, on := range present {
			if !on {
				continue
			}
			h := e.Hosted[t]
			calls := int64(h.MaxCalls)
			if f == llm.FormatChat {
				calls = min(calls, 1) // web_search_options: one search an answer
			}
			cost += calls * h.PricePerCallMicros
			if h.InputTokensPerCall != nil {
				tokens += calls * int64(*h.InputTokensPerCall)
			}
		}
		fees, inputTokens = max(fees, cost), max(inputTokens, tokens)
	}
	return fees, inputTokens
}

// HostedCalls is the most calls the hosted tools present (by llm.HostedTool) may make in one
// request through any expert of kind f, each tool at its bound of calls, as HostedWorst counts
// them: the server-tool rounds a request may take.
func (m *Model) HostedCalls(f llm.Format, present [llm.NumHostedTools]bool) int64 {
	var most int64
	for _, e := range m.Experts {
		if e.Kind != f {
			continue
		}
		var calls int64
		for t, on := range present {
			if on {
				calls += int64(e.Hosted[t].MaxCalls)
			}
		}
		most = max(most, calls)
	}
	return most
}

// MaxPrice is, kind by kind, the highest price among the model's experts (and the lowest
// long-context threshold), for the worst-case reservation.
func (m *Model) MaxPrice() price.Price {
	if len(m.Experts) == 1 {
		return m.Experts[0].Price
	}
	var p price.Price
	for _, e := range m.Experts {
		p = price.Max(p, e.Price)
	}
	return p
}

// PricedAlike reports whether every expert bills at the same rates (their catalog entries'
// names and dates aside), so that the model has one price; when not, MaxPrice is the highest
// rate of any expert, kind by kind, and no one expert's.
func (m *Model) PricedAlike() bool {
	for _, e := range m.Experts[1:] {
		if !reflect.DeepEqual(ratesOf(e.Price), ratesOf(m.Experts[0].Price)) {
			return false
		}
	}
	return true
}

// ratesOf is p's rates and tiers without where they came from.
func ratesOf(p price.Price) price.Price {
	return price.Price{Rates: p.Rates, LongContext: p.LongContext, ServiceTiers: p.ServiceTiers}
}

// Registry holds the configured models.
type Registry struct {
	models map[string]*Model
}

// NewRegistry builds the registry from a validated configuration.
func NewRegistry(cfg *config.Config) *Registry {
	// What each provider gives its experts: its wire format, hosted tools, prompt caching,
	// address and gen_ai.provider.name.
	type providerFacts struct {
		kind      llm.Format
		hosted    [llm.NumHostedTools]config.HostedTool
		autoCache bool
		endUsers  config.EndUserPolicy
		host      string
		port      int
		genAI     string
	}
	providers := map[string]providerFacts{}
	for _, p := range cfg.Providers {
		f := providerFacts{kind: llm.Format(p.Kind), autoCache: p.AutomaticPromptCache(), endUsers: p.EndUserPolicy(), genAI: p.GenAIProviderName()}
		for name, price := range p.HostedTools {
			if t, ok := llm.HostedToolNamed(name); ok {
				n := price.InputTokens(name)
				price.InputTokensPerCall = &n // resolved: the default when unset
				f.hosted[t] = price
			}
		}
		if u, err := url.Parse(p.BaseURL); err == nil && u.Host != "" {
			f.host = u.Hostname()
			if f.port, err = strconv.Atoi(u.Port()); err != nil {
				f.port = map[string]int{"https": 443, "http": 80}[u.Scheme]
			}
		}
		providers[p.Name] = f
	}
	r := &Registry{models: map[string]*Model{}}
	for _, m := range cfg.Models {
		rm := &Model{ID: m.ID, Family: m.Family, MaxOutputTokens: m.MaxOutputTokens, ContextTokens: m.ContextTokens, Fusion: len(m.Experts) > 0}
		ups := m.Experts
		if m.Backend != nil {
			ups = []config.Upstream{*m.Backend}
		}
		for _, u := range ups {
			f := providers[u.Provider]
			e := Expert{Key: u.Provider + "/" + u.Model, Provider: u.Provider, Model: u.Model, Kind: f.kind,
				Price: m.Price.Resolved(), MaxOutputTokens: m.MaxOutputTokens, Strengths: u.Strengths, Hosted: f.hosted,
				AutomaticCache: f.autoCache, EndUserIDs: f.endUsers, Host: f.host, Port: f.port, GenAIProvider: f.genAI}
			for _, h := range e.Hosted {
				rm.HostedPriced = rm.HostedPriced || h.MaxCalls > 0
			}
			if u.Price != nil {
				e.Price = u.Price.Resolved()
			}
			if u.MaxOutputTokens > 0 {
				e.MaxOutputTokens = min(u.MaxOutputTokens, m.MaxOutputTokens)
			}
			rm.ImageTokens = max(rm.ImageTokens, imageTokens(u, m.Price))
			rm.Experts = append(rm.Experts, e)
		}
		r.models[m.ID] = rm
	}
	return r
}

// imageTokens is the most one image costs through upstream u (priced by its own price or the
// model's): the configured bound, else the published rule of the provider's model id, else
// that of the price's catalog entry, else pricecatalog.DefaultImageTokens.
func imageTokens(u config.Upstream, modelPrice config.Price) int {
	if u.ImageTokens > 0 {
		return u.ImageTokens
	}
	if n, ok := pricecatalog.ImageTokens(u.Model); ok {
		return n
	}
	catalog := modelPrice.Catalog
	if u.Price != nil {
		catalog = u.Price.Catalog
	}
	if n, ok := pricecatalog.ImageTokens(catalog); ok {
		return n
	}
	return pricecatalog.DefaultImageTokens
}

// Model returns the configured model with id.
func (r *Registry) Model(id string) (*Model, bool) {
	m, ok := r.models[id]
	return m, ok
}

// Features are what the policy reads from a request.
type Features struct {
	InputTokens  int
	OutputTokens int
	Tools        bool
	Code         bool
	// Stream says whether the answer is streamed: a streamed answer's first byte comes with
	// its first token, a non-streamed one's after the whole answer, so the router compares the
	// experts' times to first byte of the two apart (latencyClass).
	Stream bool
}

// CodeWindow is how much of each end of a text LooksLikeCode reads: a text longer than twice
// this is judged by its first and its last CodeWindow bytes.
const CodeWindow = 16 << 10

// codeMarkers are what LooksLikeCode looks for; a marker with word set must not follow a word
// character (an ASCII letter, digit or '_'), as the regular expression's \b would say.
var codeMarkers = []struct {
	text string
	word bool
}{
	{"```", false}, {"func ", true}, {"def ", true}, {"class ", true}, {"import ", true},
	{"return ", true}, {"#include", false}, {"fn ", true}, {"=>", false}, {"const ", true},
	{"SELECT ", true},
}

// LooksLikeCode reports whether text reads like source code: whether its first or last
// CodeWindow bytes hold a fenced block or a common keyword of a programming language (see
// codeMarkers). It reads at most 2*CodeWindow bytes, with one substring search a marker, so
// its cost does not grow with the text.
func LooksLikeCode(text string) bool {
	if len(text) <= 2*CodeWindow {
		return hasCodeMarker(text)
	}
	return hasCodeMarker(text[:CodeWindow]) || hasCodeMarker(text[len(text)-CodeWindow:])
}

// LooksLikeCodeBytes is LooksLikeCode of b, without copying more than the windows it reads.
func LooksLikeCodeBytes(b []byte) bool {
	if len(b) <= 2*CodeWindow {
		return hasCodeMarker(string(b))
	}
	return hasCodeMarker(string(b[:CodeWindow])) || hasCodeMarker(string(b[len(b)-CodeWindow:]))
}

// hasCodeMarker reports whether text holds one of codeMarkers where it may stand.
func hasCodeMarker(text string) bool {
	for _, m := range codeMarkers {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], m.text)
			if i < 0 {
				break
			}
			at := from + i
			if !m.word || at == 0 || !isWordByte(text[at-1]) {
				return true
			}
			from = at + 1
		}
	}
	return false
}

// isWordByte reports whether c is an ASCII word character, as regexp's \b reads them.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Router orders a model's experts per request and learns their health and latency.
type Router struct {
	mu     sync.Mutex
	health map[string]*health
	now    func() time.Time
}

// LatencyMemory is how long an expert's smoothed time to first byte counts for after its
// last answer: fully at the answer, fading linearly to nothing at LatencyMemory.
const LatencyMemory = 60 * time.Second

// FailureWindow is how long an unhealthy expert loses its health points after its last
// failure.
const FailureWindow = 30 * time.Second

// alpha is the weight of the newest observation in the smoothed failure rate and time to first
// byte.
const alpha = 0.2

// SizeClass is a request's size as the policy's strengths read it, the class whose times to
// first byte the router compares the experts on: a prompt's first byte comes after its
// prefill, so a long prompt's time says little about a short one's.
type SizeClass uint8

// The size classes, by the thresholds of the "fast" and "long" strengths.
const (
	// SizeSmall is a request of fewer than 1,000 input tokens asking for fewer than 1,000
	// output tokens (what "fast" earns its point on).
	SizeSmall SizeClass = iota
	// SizeMedium is any request neither small nor long.
	SizeMedium
	// SizeLong is a request of more than 8,000 input tokens or asking for more than 4,000
	// output tokens (what "long" earns its points on).
	SizeLong
	numSizeClasses
)

// Size is the size class of a request with features f.
func (f Features) Size() SizeClass {
	switch {
	case f.InputTokens > 8000 || f.OutputTokens > 4000:
		return SizeLong
	case f.InputTokens < 1000 && f.OutputTokens < 1000:
		return SizeSmall
	}
	return SizeMedium
}

// latencyClass is the class a request's time to first byte is kept and compared in: its size
// class, and whether its answer is streamed (a non-streamed answer's first byte waits for the
// whole answer, so its time says nothing of a stream's first token, nor the reverse).
type latencyClass uint8

// numLatencyClasses is the number of latency classes: each size class, streamed or not.
const numLatencyClasses = 2 * numSizeClasses

// latencyClassOf is the latency class of a request with features f.
func latencyClassOf(f Features) latencyClass {
	c := latencyClass(f.Size())
	if f.Stream {
		c += latencyClass(numSizeClasses)
	}
	return c
}

// AccountsPerClass is how many accounts' times to first byte the router keeps per expert and
// latency class (a size class, streamed or not): the accounts that answered there most
// recently. An account holds one place, so however many requests it sends it is one voice of
// AccountsPerClass.
const AccountsPerClass = 8

type health struct {
	failRate float64 // EWMA of failures (1) and successes (0)
	streak   int     // consecutive failures
	// resetStreak is the streak the last success ended, which ObserveBroken restores: an
	// answer that broke off was no success.
	resetStreak int
	lastFailure time.Time
	// latency is, by latency class, the smoothed times to first byte of the accounts whose
	// requests the expert answered most recently, one place an account.
	latency [numLatencyClasses][AccountsPerClass]accountLatency
}

// accountLatency is one account's smoothed time to first byte at an expert in a latency class.
type accountLatency struct {
	account    uuid.UUID
	ttfb       time.Duration // EWMA of the answering tries' time to first byte
	lastAnswer time.Time     // when ttfb was last observed (zero: never, the place is free)
}

// NewRouter returns a Router; now is the clock (nil: time.Now).
func NewRouter(now func() time.Time) *Router {
	if now == nil {
		now = time.Now
	}
	return &Router{health: map[string]*health{}, now: now}
}

// Order returns the experts to try, best first. A base model has its one backend.
func (r *Router) Order(m *Model, f Features) []Expert {
	if !m.Fusion || len(m.Experts) < 2 {
		return m.Experts
	}
	type scored struct {
		e     Expert
		score float64
		pos   int
	}
	now := r.now()
	class := latencyClassOf(f)
	r.mu.Lock()
	list := make([]scored, len(m.Experts))
	for i, e := range m.Experts {
		list[i] = scored{e: e, score: strengthScore(e, f) + r.healthScore(e.Key, class, now), pos: i}
	}
	r.mu.Unlock()
	slices.SortStableFunc(list, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return a.pos - b.pos
	})
	out := make([]Expert, len(list))
	for i, s := range list {
		out[i] = s.e
	}
	return out
}

// strengthScore is what the expert's strengths earn it for a request with features f (the
// package documentation gives the points). Every strength config.StrengthNames accepts must
// have its case here.
func strengthScore(e Expert, f Features) float64 {
	score := 0.0
	for _, s := range e.Strengths {
		switch s {
		case config.StrengthTools:
			if f.Tools {
				score += 3
			}
		case config.StrengthCode:
			if f.Code {
				score += 3
			}
		case config.StrengthLong:
			if f.InputTokens > 8000 || f.OutputTokens > 4000 {
				score += 2
			}
		case config.StrengthFast:
			if f.InputTokens < 1000 && f.OutputTokens < 1000 {
				score++
			}
		case config.StrengthGeneral:
			score++
		}
	}
	return score
}

// healthScore is the expert's health and latency points for a request of the latency class;
// it must be called with r.mu held.
func (r *Router) healthScore(key string, class latencyClass, now time.Time) float64 {
	h := r.health[key]
	if h == nil {
		return 0
	}
	score := -float64(h.ttfb(class, now)) / float64(500*time.Millisecond)
	if (h.failRate > 0.5 || h.streak >= 3) && now.Sub(h.lastFailure) < FailureWindow {
		score -= 10
	}
	return score
}

// ttfb is the expert's time to first byte for a request of the latency class, as the latency
// points count it at now: the lower median of the accounts' smoothed times in that class,
// each faded by its age (latencyWeight), among the accounts whose time has not faded out; 0
// when none. One account alone sets it; among several, it is no higher than what half of
// them (rounded up) saw, so one account's slow answers cannot make the expert look slower
// for the others than they found it.
func (h *health) ttfb(class latencyClass, now time.Time) time.Duration {
	var seen [AccountsPerClass]time.Duration
	n := 0
	for i := range h.latency[class] {
		a := &h.latency[class][i]
		if w := a.latencyWeight(now); w > 0 {
			// Insertion in order: at most AccountsPerClass values, no allocation.
			v := time.Duration(float64(a.ttfb) * w)
			j := n
			for ; j > 0 && seen[j-1] > v; j-- {
				seen[j] = seen[j-1]
			}
			seen[j] = v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return seen[(n-1)/2]
}

// latencyWeight is how much of the smoothed time to first byte still counts at now: 1 at the
// last answer, falling linearly to 0 at LatencyMemory after it (0 when there was none).
func (a *accountLatency) latencyWeight(now time.Time) float64 {
	if a.lastAnswer.IsZero() {
		return 0
	}
	age := now.Sub(a.lastAnswer)
	if age <= 0 {
		return 1
	}
	return max(0, 1-float64(age)/float64(LatencyMemory))
}

// place is the account's place among the latencies of a latency class: its own, else a free
// one, else the one whose last answer is the oldest (that account's time is forgotten).
func place(class *[AccountsPerClass]accountLatency, account uuid.UUID) *accountLatency {
	var free, oldest *accountLatency
	for i := range class {
		a := &class[i]
		switch {
		case a.lastAnswer.IsZero():
			if free == nil {
				free = a
			}
		case a.account == account:
			return a
		case oldest == nil || a.lastAnswer.Before(oldest.lastAnswer):
			oldest = a
		}
	}
	if free != nil {
		return free
	}
	return oldest
}

// Observe records one attempt at an expert, made for account by a request with features f.
// A success's ttfb is the answering try's own time to first byte (from the try's start, not
// the call's), and it teaches the router the expert's latency for requests of f's latency
// class (its size class, streamed or not) only, in the account's own place (see health.ttfb). A failure's ttfb, account and features
// are ignored: a failure counts through the health penalty only, and never seeds or moves the
// latency. Observe allocates nothing (it runs on every request): an expert's record is made
// at its first attempt and keeps a fixed number of places.
func (r *Router) Observe(key string, account uuid.UUID, f Features, ttfb time.Duration, failed bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.entry(key)
	if failed {
		h.failRate = h.failRate*(1-alpha) + alpha
		h.streak++
		h.lastFailure = now
		return
	}
	h.failRate *= 1 - alpha
	h.streak, h.resetStreak = 0, h.streak
	a := place(&h.latency[latencyClassOf(f)], account)
	if a.account != account {
		*a = accountLatency{account: account}
	}
	// The older average weighs what is left of it: an answer after a long silence replaces it.
	w := (1 - alpha) * a.latencyWeight(now)
	a.ttfb = time.Duration(float64(a.ttfb)*w + float64(ttfb)*(1-w))
	a.lastAnswer = now
}

// ObserveBroken records that an answer the expert began, already observed as a success, broke
// off before its end (a stream cut off, failed in-band or silent for too long): it counts as a
// failure instead of that success. The failure rate gains what a failure would have added
// rather than the success, the run of failures that success ended goes on, and the latency
// observed at its head stands.
func (r *Router) ObserveBroken(key string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.entry(key)
	h.failRate = min(1, h.failRate+alpha)
	h.streak = max(h.streak, h.resetStreak) + 1
	h.resetStreak = 0
	h.lastFailure = now
}

// entry is key's health record, created empty; r.mu must be held.
func (r *Router) entry(key string) *health {
	h := r.health[key]
	if h == nil {
		h = &health{}
		r.health[key] = h
	}
	return h
}
