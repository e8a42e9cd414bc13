package exchange

import (
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// TestTryMaxTokensIsWhatTheUpstreamWasAsked: a try's gen_ai.request.max_tokens is the bound its
// request carried ("the maximum number of tokens the model generates for a request"): a bound
// under the Responses API's minimum is raised to it for a Responses upstream (upstreamBody), and
// the span says so; other upstreams are asked for the bound itself.
func TestTryMaxTokensIsWhatTheUpstreamWasAsked(t *testing.T) {
	for _, c := range []struct {
		kind  llm.Format
		bound int
		want  int64
	}{
		{llm.FormatResponses, 8, minResponsesOutput},
		{llm.FormatResponses, 100, 100},
		{llm.FormatChat, 8, 8},
		{llm.FormatMessages, 8, 8},
	} {
		o := tryObserver{x: &Exchange{model: &routing.Model{ID: "service-flint"}}, n: 1, bound: c.bound,
			e: routing.Expert{Key: "p/m", Provider: "p", Model: "m", Kind: c.kind}}
		var got int64 = -1
		for _, kv := range o.tryAttributes(nil) {
			if kv.Key == telemetry.GenAIRequestMaxTokens {
				got = kv.Value.AsInt64()
			}
		}
		if got != c.want {
			t.Errorf("%s, bound %d: gen_ai.request.max_tokens %d, want %d", c.kind, c.bound, got, c.want)
		}
	}
}
