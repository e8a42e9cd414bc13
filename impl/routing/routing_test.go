package routing

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
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
	if p.InputPerMTok != 3_000_000 || p.OutputPerMTok != 15_000_000 {
		t.Fatalf("max price %+v", p)
	}
	if flint.Experts[1].Price.OutputPerMTok != 15_000_000 || flint.Experts[0].Price.OutputPerMTok != 8_000_000 {
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
		r.Observe("sim-openai-chat/sim-general", 0, true)
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
	r2.Observe("sim-openai-chat/sim-general", 3*time.Second, false)
	if got := keys(r2.Order(flint, Features{InputTokens: 2000, OutputTokens: 2000}))[0]; got == "sim-openai-chat/sim-general" {
		t.Errorf("a 3 s expert should lose on a tie")
	}
}
