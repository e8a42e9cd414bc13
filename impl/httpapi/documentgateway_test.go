package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// documentGateway is a gateway for the document tests, with two models named prefix+"-sonnet"
// (Messages, claude-sonnet-4-5's catalog price) and prefix+"-mini" (Responses, gpt-4.1-mini's),
// each of window tokens, served by a stand-in of its provider that answers every request with
// a short text and the usage of 300 output tokens and anthropicInput or openAIInput input
// tokens, as the provider would report a document's pages; calls counts the requests the
// stand-ins answered.
func documentGateway(t *testing.T, prefix string, anthropicInput, openAIInput, window int) (g *apitest.Gateway, calls *atomic.Int64) {
	t.Helper()
	calls = new(atomic.Int64)
	standIn := func(answer string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	anthropic := standIn(fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A summary."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":300}}`, anthropicInput))
	responses := standIn(fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-mini","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A summary.","annotations":[]}]}],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`, openAIInput, openAIInput+300))
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: prefix + "-anthropic", Kind: config.KindAnthropicMessages, BaseURL: anthropic},
		config.Provider{Name: prefix + "-openai", Kind: config.KindOpenAIResponses, BaseURL: responses})
	cfg.Models = append(cfg.Models,
		config.Model{ID: prefix + "-sonnet", Family: config.FamilyMessages, OwnedBy: "test",
			Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 1000, ContextTokens: window,
			Backend: &config.Upstream{Provider: prefix + "-anthropic", Model: "claude-sonnet-4-5"}},
		config.Model{ID: prefix + "-mini", Family: config.FamilyChat, OwnedBy: "test",
			Price: config.Price{Catalog: "gpt-4.1-mini"}, MaxOutputTokens: 1000, ContextTokens: window,
			Backend: &config.Upstream{Provider: prefix + "-openai", Model: "gpt-4.1-mini"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, prefix+"-sonnet", prefix+"-mini")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg}), calls
}
