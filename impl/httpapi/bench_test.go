package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// BenchmarkChatDirectVsGateway measures a non-streamed chat request sent straight to the
// simulator and through the gateway (auth, rate limit, validation, metering on); the difference
// is what the gateway adds. Run with -cpuprofile to see where.
func BenchmarkChatDirectVsGateway(b *testing.B) {
	g := apitest.Start(b, apitest.Options{})
	tenant := g.NewTenant(b, "bench", 1_000_000_000, 1_000_000_000_000)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := func(b *testing.B, url, key, model string) {
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16}`
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				res, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) { run(b, g.SimURL+"/v1/chat/completions", "", "sim-general") })
	b.Run("gateway", func(b *testing.B) { run(b, g.URL+"/v1/chat/completions", tenant.Key, "service-flint-base") })
}
