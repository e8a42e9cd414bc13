package httpapi_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/jaegertest"
	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/sim"
)

// TestAccountKeyRefusalTracedAndLoggedWithoutTheKey: the upstream's refusal of an account's own
// key is traced (real Jaeger) as an attempt span failed with error.type
// upstream_credential_refused, not "401" (which said the gateway's credentials were wrong), and
// counted so in gen_ai.client.operation.duration; the gateway logs it as a warning quoting the
// provider's words. Neither the gateway's log (every level, as JSON) nor any span's attributes
// and events (the account's content captured too) hold the key itself, on Messages (x-api-key) or chat (Bearer, whose refusal quotes
// the key masked, as OpenAI's does).
func TestAccountKeyRefusalTracedAndLoggedWithoutTheKey(t *testing.T) {
	j := jaegertest.Start(t)
	m := metrics.New()
	logs := &syncbuf.Buffer{}
	cfg := config.Default()
	for i := range cfg.Providers {
		cfg.Providers[i].APIKey = "sk-operator"
	}
	g := apitest.Start(t, apitest.Options{Config: cfg, Sim: sim.New(sim.Options{APIKey: "sk-operator"}), Metrics: m,
		LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	const key = "sk-alpha-refused-0123456789abcdef"
	for _, p := range []string{"sim-anthropic", "sim-openai-chat"} {
		g.SetUpstreamKey(t, alpha.Account.ID, p, key)
	}
	startTracing(t, j.OTLPHTTP, m, nil, alpha.Account.ID)

	for _, c := range []struct{ route, body, said string }{
		{"/v1/messages", keyMessages, "invalid x-api-key"},
		{"/v1/chat/completions", keyChat, "Incorrect API key provided"},
	} {
		t.Run(c.route, func(t *testing.T) {
			status, h, body := tracedPost(t, g, alpha.Key, c.route, c.body)
			if status != http.StatusBadGateway || strings.Contains(body, key) {
				t.Fatalf("status %d: %s", status, body)
			}
			traceID, _ := traceOf(t, h)
			tr := j.WaitTrace(t, traceID, 4)
			attempts := clientSpans(tr)
			if len(attempts) != 1 || !attempts[0].Error || attempts[0].Attr("error.type") != "upstream_credential_refused" ||
				attempts[0].Attr("http.response.status_code") != "401" {
				t.Errorf("attempt spans of the refused key, want one failed with error.type upstream_credential_refused:\n%s", tr)
			}
			var spans []*jaegertest.Span
			var walk func(s *jaegertest.Span)
			walk = func(s *jaegertest.Span) {
				spans = append(spans, s)
				for _, c := range s.Children {
					walk(c)
				}
			}
			for _, r := range tr.Roots {
				walk(r)
			}
			for _, s := range spans {
				if text := fmt.Sprint(s.Attrs, s.Events); strings.Contains(text, key) {
					t.Errorf("span %s holds the account's key: %s", s.Name, text)
				}
			}
			if !lineWith(logs.String(), `"level":"WARN"`, "account's own key", c.said) {
				t.Errorf("no warning quoting the provider's words %q:\n%s", c.said, logs.String())
			}
		})
	}
	if !lineWith(scrapeOpenMetrics(t, m), "gen_ai_client_operation_duration_seconds_count{", `error_type="upstream_credential_refused"`) {
		t.Errorf("no operation counted with error_type upstream_credential_refused")
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the gateway's log holds the account's key:\n%s", logs.String())
	}
}
