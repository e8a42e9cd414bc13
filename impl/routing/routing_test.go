package routing

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
)

func keys(es []Expert) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

func TestRegistryFromDefaultConfig(t *testing.T) {
	r := NewRegistry(config.Default())
	flint, ok := r.Model("service-flint")
	if !ok || !flint.Fusion || len(flint.Experts) != 3 || flint.Family != config.FamilyChat {
		t.Fatalf("service-flint: %+v", flint)
	}
	base, _ := r.Model("service-flint-base")
	if base.Fusion || len(base.Experts) != 1 {
		t.Fatalf("service-flint-base: %+v", base)
	}
	p := flint.MaxPrice()
	if p.Input != 3_000_000 || p.Output != 15_000_000 {
		t.Fatalf("max price %+v", p)
	}
	if flint.Experts[1].Price.Output != 15_000_000 || flint.Experts[0].Price.Output != 8_000_000 {
		t.Fatal("an expert's own price overrides the model's, and falls back to it")
	}
}

func TestFusionPolicy(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	flint, _ := NewRegistry(config.Default()).Model("service-flint")
	small := Features{InputTokens: 50, OutputTokens: 100}
	if got := keys(r.Order(flint, small))[0]; got != "sim-openai-chat/sim-general" {
		t.Errorf("small plain request went to %s", got)
	}
	if got := keys(r.Order(flint, Features{InputTokens: 50, OutputTokens: 100, Tools: true}))[0]; got != "sim-anthropic/sim-coder" {
		t.Errorf("a request with tools went to %s", got)
	}
	if got := keys(r.Order(flint, Features{InputTokens: 50, Code: true}))[0]; got != "sim-anthropic/sim-coder" {
		t.Errorf("a code request went to %s", got)
	}
	if got := keys(r.Order(flint, Features{InputTokens: 20000, OutputTokens: 100}))[0]; got != "sim-openai-responses/sim-reasoner" {
		t.Errorf("a long request went to %s", got)
	}
	if !LooksLikeCode("please fix:\n```go\nfunc main() {}\n```") || LooksLikeCode("hello there, how are you") {
		t.Error("LooksLikeCode")
	}
	// Health: three failures in a row push the preferred expert back, for 30 s.
	for range 3 {
		r.Observe("sim-openai-chat/sim-general", uuid.Nil, small, 0, true)
	}
	order := keys(r.Order(flint, small))
	if order[0] == "sim-openai-chat/sim-general" || order[len(order)-1] != "sim-openai-chat/sim-general" {
		t.Errorf("an unhealthy expert still leads: %v", order)
	}
	clock = clock.Add(31 * time.Second)
	if got := keys(r.Order(flint, small))[0]; got != "sim-openai-chat/sim-general" {
		t.Errorf("after 30 s the expert is probed again; got %s", got)
	}
	// Latency: a slow expert loses to an equal one.
	r2 := NewRouter(nil)
	medium := Features{InputTokens: 2000, OutputTokens: 2000}
	r2.Observe("sim-openai-chat/sim-general", uuid.Nil, medium, 3*time.Second, false)
	if got := keys(r2.Order(flint, medium))[0]; got == "sim-openai-chat/sim-general" {
		t.Errorf("a 3 s expert should lose on a tie")
	}
}

// TestFailureIsNoLatency: a failed attempt, however long its call took (retries and their
// Retry-After waits), neither seeds nor moves the expert's time to first byte (trial D2: a
// first call that failed after 4 s cost the preferred expert 8 points for ever). It counts
// through the failure penalty only, which ends 30 s after the last failure.
// TestEveryStrengthScores: every strength the configuration accepts earns points for some
// request, so no accepted word is a hint that does nothing (configuration trial: "reasoning"
// was accepted and scored nothing).
func TestEveryStrengthScores(t *testing.T) {
	requests := []Features{{InputTokens: 100, OutputTokens: 100}, {InputTokens: 20_000}, {Tools: true}, {Code: true}}
	for _, s := range config.StrengthNames {
		scored := false
		for _, f := range requests {
			scored = scored || strengthScore(Expert{Strengths: []string{s}}, f) > 0
		}
		if !scored {
			t.Errorf("strength %q scores no request", s)
		}
	}
}

func TestFailureIsNoLatency(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	flint, _ := NewRegistry(config.Default()).Model("service-flint")
	small := Features{InputTokens: 50, OutputTokens: 100}
	const general = "sim-openai-chat/sim-general"
	r.Observe(general, uuid.Nil, small, 4*time.Second, true)
	if got := keys(r.Order(flint, small))[0]; got != general {
		t.Errorf("after one failed call of 4 s the preferred expert lost the lead to %s", got)
	}
	r.Observe(general, uuid.Nil, small, 4*time.Second, true)
	r.Observe(general, uuid.Nil, small, 4*time.Second, true)
	if got := keys(r.Order(flint, small))[0]; got == general {
		t.Errorf("after three failures in a row the expert still leads")
	}
	clock = clock.Add(FailureWindow + time.Second)
	if got := keys(r.Order(flint, small))[0]; got != general {
		t.Errorf("30 s after its last failure the expert is not probed: %s leads", got)
	}
	// A success's time is the answering try's: after the failures it stands alone.
	r.Observe(general, uuid.Nil, small, 100*time.Millisecond, false)
	if s := r.healthScore(general, latencyClassOf(Features{}), clock); !near(s, -0.2) {
		t.Errorf("score %v after one answer in 100 ms, want -0.2", s)
	}
}

// TestBrokenAnswersCount: an answer that began (a success at its head) and then broke off
// counts as a failure instead (trial D3: streams cut off mid-way never counted), so answers
// that keep breaking push the expert back, until 30 s after the last; its latency stands.
func TestBrokenAnswersCount(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	flint, _ := NewRegistry(config.Default()).Model("service-flint")
	small := Features{InputTokens: 50, OutputTokens: 100}
	const general = "sim-openai-chat/sim-general"
	for i := range 3 {
		if got := keys(r.Order(flint, small))[0]; got != general {
			t.Fatalf("after %d broken answers %s leads", i, got)
		}
		r.Observe(general, uuid.Nil, small, 100*time.Millisecond, false)
		r.ObserveBroken(general)
	}
	// Three in a row are a run of failures, as three failed calls are (the review of D3: each
	// answer's head reset the run, so only the failure rate, later, moved traffic).
	if got := keys(r.Order(flint, small))[0]; got == general || r.health[general].streak != 3 {
		t.Errorf("after 3 broken answers in a row the expert still leads (run of %d failures)", r.health[general].streak)
	}
	if h := r.health[general]; h.ttfb(latencyClassOf(Features{}), clock) != 100*time.Millisecond {
		t.Errorf("latency %v after broken answers of 100 ms to the head", h.ttfb(latencyClassOf(Features{}), clock))
	}
	clock = clock.Add(FailureWindow + time.Second)
	if got := keys(r.Order(flint, small))[0]; got != general {
		t.Errorf("30 s after the last broken answer %s leads", got)
	}
}

// near reports whether two scores agree to a thousandth of a point.
func near(a, b float64) bool { return a-b < 1e-3 && b-a < 1e-3 }

// TestLatencyAges: an expert that answered slowly loses on latency, for a while: its latency
// points fade to nothing 60 s after its last answer, so it gets the traffic its strengths earn
// again, and an answer then is measured afresh rather than averaged with the old slowness.
func TestLatencyAges(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	flint, _ := NewRegistry(config.Default()).Model("service-flint")
	small := Features{InputTokens: 50, OutputTokens: 100}
	const general = "sim-openai-chat/sim-general"
	r.Observe(general, uuid.Nil, small, 3*time.Second, false) // -6 points against its strengths' 2
	if got := keys(r.Order(flint, small))[0]; got == general {
		t.Fatal("an expert 3 s to its first byte still leads")
	}
	clock = clock.Add(LatencyMemory / 2)
	if s := r.healthScore(general, latencyClassOf(Features{}), clock); !near(s, -3) {
		t.Errorf("half way, the latency score is %v, want -3", s)
	}
	if got := keys(r.Order(flint, small))[0]; got == general {
		t.Error("half way the slow expert leads already")
	}
	clock = clock.Add(LatencyMemory / 2)
	if got := keys(r.Order(flint, small))[0]; got != general {
		t.Errorf("60 s after its last answer the slow expert is not tried again: %s leads", got)
	}
	r.Observe(general, uuid.Nil, small, 50*time.Millisecond, false)
	if s := r.healthScore(general, latencyClassOf(Features{}), clock); !near(s, -0.1) {
		t.Errorf("an answer after the old latency faded: score %v, want -0.1", s)
	}
	// A fresh average still weighs the newest answer at 0.2.
	r.Observe(general, uuid.Nil, small, 550*time.Millisecond, false)
	if s := r.healthScore(general, latencyClassOf(Features{}), clock); !near(s, -0.3) {
		t.Errorf("score %v, want -0.3 (150 ms smoothed)", s)
	}
}

// TestHostedPrices: the worst case of the hosted tools a request asks for is the dearest
// same-format expert's bound times its price (one call for chat's web_search_options), and
// the most input tokens the calls may bring in, each call at its configured allowance or the
// tool's default; calls are billed up to the bound only.
func TestHostedPrices(t *testing.T) {
	cfg := config.Default()
	perSearch := 60_000
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "dear-responses", Kind: config.KindOpenAIResponses, BaseURL: config.SimulatorURL,
		HostedTools: map[string]config.HostedTool{"web_search": {PricePerCallMicros: 30_000, MaxCalls: 2, InputTokensPerCall: &perSearch}, "file_search": {PricePerCallMicros: 2_500, MaxCalls: 4}}})
	cfg.Providers[0].HostedTools = map[string]config.HostedTool{"web_search": {PricePerCallMicros: 10_000, MaxCalls: 5}} // sim-openai-chat
	cfg.Models = append(cfg.Models, config.Model{ID: "m", Family: config.FamilyChat, Price: config.Price{InputPerMTok: 1, OutputPerMTok: 1}, MaxOutputTokens: 100,
		Experts: []config.Upstream{{Provider: "sim-openai-responses", Model: "a"}, {Provider: "dear-responses", Model: "b"}, {Provider: "sim-openai-chat", Model: "c"}}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "m")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m, _ := NewRegistry(cfg).Model("m")
	if !m.HostedPriced {
		t.Fatal("not HostedPriced")
	}
	web := [llm.NumHostedTools]bool{llm.HostedWebSearch: true}
	both := [llm.NumHostedTools]bool{llm.HostedWebSearch: true, llm.HostedFileSearch: true}
	for _, c := range []struct {
		f                 llm.Format
		present           [llm.NumHostedTools]bool
		fees, inputTokens int64
	}{
		// Fees, dear: 2 × 30,000 beats sim: 5 × 10,000. Input, dear: 2 × 60,000 beats sim: 5
		// searches at the default 20,000.
		{llm.FormatResponses, web, 60_000, 120_000},
		{llm.FormatResponses, both, 70_000, 200_000}, // + 4 × 2,500, and 4 file searches at the default 20,000
		{llm.FormatChat, web, 10_000, 20_000},        // one search an answer
		{llm.FormatMessages, web, 0, 0},              // no Messages expert
		{llm.FormatResponses, [llm.NumHostedTools]bool{}, 0, 0},
	} {
		if fees, in := m.HostedWorst(c.f, c.present); fees != c.fees || in != c.inputTokens {
			t.Errorf("%s %v: worst %d in fees and %d input tokens, want %d and %d", c.f, c.present, fees, in, c.fees, c.inputTokens)
		}
	}
	dear := m.Experts[1]
	if got := dear.HostedCost(llm.HostedCalls{llm.HostedWebSearch: 3, llm.HostedFileSearch: 1}, llm.HostedCalls{llm.HostedWebSearch: 2, llm.HostedFileSearch: 4}); got != 62_500 {
		t.Errorf("cost %d, want 62500 (2 searches billed of 3, and one file search)", got)
	}
}

// TestImageTokensOfAModel: a model's image bound is the largest of its experts', each the
// upstream's configured image_tokens, else the published rule of the provider's model id, else
// that of its price's catalog entry, else the default.
func TestImageTokensOfAModel(t *testing.T) {
	cfg := config.Default()
	prov := cfg.Models[0].Experts[0].Provider
	model := func(id string, ups ...config.Upstream) config.Model {
		return config.Model{ID: id, Family: config.FamilyChat, MaxOutputTokens: 16, Price: config.Price{InputPerMTok: 1}, Experts: ups}
	}
	cfg.Models = append(cfg.Models,
		model("configured", config.Upstream{Provider: prov, Model: "gpt-4o-mini", ImageTokens: 123}),
		model("by-upstream", config.Upstream{Provider: prov, Model: "gpt-4.1-nano-2025-04-14"}),
		model("by-catalog", config.Upstream{Provider: prov, Model: "sim", Price: &config.Price{Catalog: "gpt-4o-mini"}}),
		model("default", config.Upstream{Provider: prov, Model: "sim"}),
		model("largest", config.Upstream{Provider: prov, Model: "gpt-4o"}, config.Upstream{Provider: prov, Model: "gpt-4o-mini"}))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(cfg)
	for id, want := range map[string]int{"configured": 123, "by-upstream": 3779, "by-catalog": 48169, "default": 4800, "largest": 48169} {
		if m, _ := r.Model(id); m.ImageTokens != want {
			t.Errorf("%s: %d, want %d", id, m.ImageTokens, want)
		}
	}
}

// twins is a fusion model of two experts alike in strengths: only their latency tells them
// apart, and the first leads on a tie (an expert not measured in a class counts no latency
// there, so the tests measure the second too).
var twins = &Model{ID: "twins", Fusion: true, Experts: []Expert{
	{Key: "p/first", Strengths: []string{config.StrengthGeneral}},
	{Key: "p/second", Strengths: []string{config.StrengthGeneral}},
}}

// TestOneAccountsLongPromptsMoveNoOtherAccount: the time to first byte of a request grows
// with its prompt (prefill), so an expert's latency is learnt per size class and a request is
// scored with its own class's (security review s14h9: account A's long prompts made the
// expert that served account B's short requests look slow, and B's traffic moved to the other
// expert and back). A's long and medium prompts, however slow, leave B's short requests where
// they were; A's next long prompt does move, on its own class's evidence.
func TestOneAccountsLongPromptsMoveNoOtherAccount(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	a, b := uuid.New(), uuid.New()
	short := Features{InputTokens: 200, OutputTokens: 100}
	medium := Features{InputTokens: 6000, OutputTokens: 100}
	long := Features{InputTokens: 100_000, OutputTokens: 100}
	for i := range 20 {
		r.Observe("p/first", b, short, 150*time.Millisecond, false)
		r.Observe("p/second", b, short, 400*time.Millisecond, false)
		r.Observe("p/first", a, long, 8*time.Second, false)
		r.Observe("p/first", a, medium, 2*time.Second, false)
		clock = clock.Add(time.Second)
		if got := keys(r.Order(twins, short))[0]; got != "p/first" {
			t.Fatalf("after %d of A's long prompts B's short request went to %s", i+1, got)
		}
	}
	if s := r.healthScore("p/first", latencyClassOf(Features{}), clock); s < -0.5 {
		t.Errorf("a short request's latency score is %v after A's long prompts, want B's own -0.3", s)
	}
	for what, f := range map[string]Features{"long": long, "medium": medium} {
		if got := keys(r.Order(twins, f))[0]; got != "p/second" {
			t.Errorf("a %s prompt still goes to the expert slow for its size", what)
		}
	}
}

// TestWholeAnswersMoveNoStream: a non-streamed answer's first byte comes after the whole
// answer, a stream's with its first token, so the two are compared apart: the experts' slow
// whole answers (every account's, a majority) leave the streamed requests of the same size
// where their own first tokens put them, and the reverse. Before, they shared one time per size
// class, and an expert that answered non-streamed requests slowly (long outputs) lost the
// streams it served fastest.
func TestWholeAnswersMoveNoStream(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	whole := Features{InputTokens: 200, OutputTokens: 500}
	streamed := Features{InputTokens: 200, OutputTokens: 500, Stream: true}
	for range 3 {
		account := uuid.New()
		for range 10 {
			r.Observe("p/first", account, streamed, 150*time.Millisecond, false)
			r.Observe("p/second", account, streamed, 400*time.Millisecond, false)
			r.Observe("p/first", account, whole, 9*time.Second, false)
			r.Observe("p/second", account, whole, 3*time.Second, false)
		}
	}
	if got := keys(r.Order(twins, streamed))[0]; got != "p/first" {
		t.Errorf("a streamed request went to %s, slower to its first token, moved by whole answers", got)
	}
	if got := keys(r.Order(twins, whole))[0]; got != "p/second" {
		t.Errorf("a non-streamed request went to %s, slower to its whole answer, moved by streams", got)
	}
	if s := r.healthScore("p/first", latencyClassOf(streamed), clock); !near(s, -0.3) {
		t.Errorf("the streamed class's latency score is %v, want its own -0.3", s)
	}
}

// TestOneAccountIsOneVoice: within a size class, an account is one voice among the accounts
// the expert answered in the last minute, however many requests it sends: the expert's time
// is the lower median of theirs, so one account's slow answers (long non-streamed outputs,
// say) cannot make the expert look slower to the others than they found it; a majority that
// finds it slow moves everyone, and an account alone sets it.
func TestOneAccountIsOneVoice(t *testing.T) {
	clock := time.Unix(0, 0)
	r := NewRouter(func() time.Time { return clock })
	small := Features{InputTokens: 200, OutputTokens: 100}
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	r.Observe("p/second", b, small, 400*time.Millisecond, false)
	r.Observe("p/first", b, small, 100*time.Millisecond, false)
	for range 1000 {
		r.Observe("p/first", a, small, 5*time.Second, false)
	}
	if got := keys(r.Order(twins, small))[0]; got != "p/first" {
		t.Fatalf("a thousand slow answers of one account moved the other's traffic to %s", got)
	}
	if s := r.healthScore("p/first", latencyClassOf(Features{}), clock); !near(s, -0.2) {
		t.Errorf("score %v, want B's -0.2", s)
	}
	// Two accounts of three find it slow: the expert is slow.
	r.Observe("p/first", c, small, 4*time.Second, false)
	if got := keys(r.Order(twins, small))[0]; got != "p/second" {
		t.Errorf("two accounts of three found the expert slow and it still leads")
	}
	// Once B's and C's times have faded, A's alone count.
	clock = clock.Add(LatencyMemory)
	r.Observe("p/first", a, small, 5*time.Second, false)
	if s := r.healthScore("p/first", latencyClassOf(Features{}), clock); !near(s, -10) {
		t.Errorf("score %v with A's time alone, want -10", s)
	}
	// An account takes one place of AccountsPerClass: the latest accounts' times count, the
	// oldest is forgotten first.
	clock = clock.Add(LatencyMemory)
	for i := range AccountsPerClass {
		clock = clock.Add(time.Millisecond)
		r.Observe("p/first", a, small, 5*time.Second, false)
		r.Observe("p/first", uuid.New(), small, time.Duration(i+1)*100*time.Millisecond, false)
	}
	// The places: A's 5 s and the last seven new accounts' 200 to 800 ms (the first new one,
	// and B's and C's faded times, gave theirs up); the lower median is 500 ms.
	if s := r.healthScore("p/first", latencyClassOf(Features{}), clock); !near(s, -1) {
		t.Errorf("score %v among %d accounts, A's one of them, want -1 (500 ms)", s, AccountsPerClass)
	}
}

// TestObserveAllocatesNothing: Observe runs on every request; after an expert's first
// attempt it allocates nothing, whatever the accounts and sizes.
func TestObserveAllocatesNothing(t *testing.T) {
	r := NewRouter(nil)
	accounts := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	sizes := []Features{{InputTokens: 10}, {InputTokens: 5000}, {InputTokens: 50_000}}
	r.Observe("p/first", accounts[0], sizes[0], time.Millisecond, false)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		i++
		r.Observe("p/first", accounts[i%3], sizes[i%3], time.Duration(i)*time.Millisecond, i%7 == 0)
	}); n != 0 {
		t.Errorf("Observe allocates %v times a call", n)
	}
}
