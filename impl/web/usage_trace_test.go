package web_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// TestRequestLogLinksTraces: each row of the Usage page's request log shows its request's trace
// id: a link into the trace viewer of config telemetry.trace_url when one is configured, else
// the whole id to copy; a request that was not traced shows none.
func TestRequestLogLinksTraces(t *testing.T) {
	traced := [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	id := hex.EncodeToString(traced[:])
	for _, c := range []struct {
		name, template string
		want           string
	}{
		{"with a trace viewer", "http://jaeger.example:16686/trace/{trace_id}",
			`<a href="http://jaeger.example:16686/trace/` + id + `" rel="noopener noreferrer" title="Open trace ` + id + `"><code>` + id[:8] + `</code></a>`},
		{"without one", "", `<td class="trace"><code>` + id + `</code></td>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startConfig(t, func(cfg *config.Config) { cfg.Telemetry.TraceUI.URL = c.template })
			acme := e.account(t, "acme", aliceEmail, "member")
			now := time.Now().UTC()
			rec := func(reqID string, trace [16]byte, ago time.Duration) store.UsageRecord {
				return store.UsageRecord{AccountID: acme.ID, RequestID: reqID, Model: "service-flint", Route: "/v1/chat/completions",
					Provider: "sim", UpstreamModel: "expert", InputTokens: 10, OutputTokens: 20, CostMicros: 100,
					Status: "completed", StartedAt: now.Add(-ago), FinishedAt: now.Add(-ago + time.Second), TraceID: trace}
			}
			if _, err := e.Store.WriteUsage(context.Background(), "web-test",
				[]store.UsageRecord{rec("traced", traced, 2*time.Minute), rec("untraced", [16]byte{}, time.Minute)}); err != nil {
				t.Fatal(err)
			}
			b := e.browser(t)
			b.signIn(e, aliceEmail, alicePass)
			p := b.get("/usage")
			if p.Status != http.StatusOK {
				t.Fatalf("GET /usage: %d %.300s", p.Status, p.Body)
			}
			log := logTable(p.Body)
			if !strings.Contains(log, `<th scope="col">Trace</th>`) {
				t.Errorf("the log has no Trace column: %.2000s", log)
			}
			if !strings.Contains(log, c.want) {
				t.Errorf("the traced request's row lacks %s:\n%.3000s", c.want, log)
			}
			if n := strings.Count(log, id); n != map[bool]int{true: 2, false: 1}[c.template != ""] {
				t.Errorf("the trace id appears %d times", n)
			}
			if !strings.Contains(log, `<td class="trace">—</td>`) {
				t.Errorf("the untraced request's row does not say it has no trace:\n%.3000s", log)
			}
		})
	}
}
