package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
)

// keyEchoingUpstream is an OpenAI-compatible chat upstream that answers every request with a
// 200 holding an error that quotes the key it was sent (Authorization: Bearer), as some
// compatible servers and proxies answer (OpenRouter puts errors in 200 bodies and streams): a
// prompt "invalid" gets an invalid_request_error (whose words the gateway passes on to the
// client), any other an authentication_error (whose words go to the log only); a streamed
// request gets the error as its stream's one chunk.
func keyEchoingUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		typ := "authentication_error"
		if strings.Contains(string(body), `"content":"invalid"`) {
			typ = "invalid_request_error"
		}
		envelope := fmt.Sprintf(`{"error":{"message":"this request cannot be served with the key %s","type":%q}}`, key, typ)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", envelope)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, envelope)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// TestUpstreamErrorsInAnswersNeverQuoteTheKey: an upstream that quotes back the key it was sent
// in an error it answers with a 200 (a JSON body, or a stream's chunk) never has the key
// reach the client (an invalid_request_error's words are passed on), the gateway's log (every
// level, as JSON): neither an account's own key nor the operator's. The
// review of s15h6: 1443640 cleared the key from error statuses only, and a 200's error went to
// the client's 400, the stream's error event and the log as the upstream wrote it.
func TestUpstreamErrorsInAnswersNeverQuoteTheKey(t *testing.T) {
	const operator, own = "sk-operator-echoed-0123456789abcdef", "sk-alpha-echoed-0123456789abcdef"
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "echo", Kind: config.KindOpenAIChat, BaseURL: keyEchoingUpstream(t), APIKey: operator})
	cfg.Models = append(cfg.Models, config.Model{ID: "echo-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{Catalog: "gpt-4.1-mini"}, MaxOutputTokens: 1000, ContextTokens: 200_000,
		Backend: &config.Upstream{Provider: "echo", Model: "gpt-4.1-mini"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "echo-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	g := apitest.Start(t, apitest.Options{Config: cfg, LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	alpha := g.NewTenant(t, "alpha", 0, 100_000_000)
	beta := g.NewTenant(t, "beta", 0, 100_000_000)
	g.SetUpstreamKey(t, alpha.Account.ID, "echo", own)

	for _, tenant := range []struct {
		name string
		who  apitest.Tenant
	}{{"own key", alpha}, {"operator's key", beta}} {
		for _, prompt := range []string{"invalid", "refused"} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", tenant.name, prompt, stream), func(t *testing.T) {
					status, body := post(t, g, tenant.who.Key, "/v1/chat/completions", inferenceBody("/v1/chat/completions", "echo-chat", prompt, stream))
					if status == http.StatusOK && !stream {
						t.Fatalf("an error answer served: %s", body)
					}
					if strings.Contains(string(body), own) || strings.Contains(string(body), operator) {
						t.Errorf("the client's answer quotes the upstream key: %d %s", status, body)
					}
					if !strings.Contains(string(body), "[the upstream key]") && prompt == "invalid" {
						t.Errorf("the refusal's words are not passed on with the key elided: %d %s", status, body)
					}
				})
			}
		}
	}
	if text := logs.String(); strings.Contains(text, own) || strings.Contains(text, operator) {
		t.Errorf("the gateway's log quotes the upstream key:\n%s", text)
	}
	if !strings.Contains(logs.String(), "[the upstream key]") {
		t.Errorf("no log line quotes the upstream's words with the key elided:\n%s", logs.String())
	}
}
