package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// largePrompt is n bytes of prose with no code in it: the worst case for a scan that looks
// for code, which reads to the end when it finds none.
func largePrompt(n int) string {
	const words = "lorem ipsum dolor sit amet the quick brown fox "
	return strings.Repeat(words, n/len(words)+1)[:n]
}

// largeBodies are the routes a large prompt may arrive on, with a body of about n bytes each.
func largeBodies(n int) []struct{ name, path, body string } {
	prompt, _ := json.Marshal(largePrompt(n))
	return []struct{ name, path, body string }{
		{"responses/service-flint", "/v1/responses", `{"model":"service-flint","max_output_tokens":16,"input":` + string(prompt) + `}`},
		{"responses/service-flint-base", "/v1/responses", `{"model":"service-flint-base","max_output_tokens":16,"input":` + string(prompt) + `}`},
		{"responses-items/service-flint", "/v1/responses", `{"model":"service-flint","max_output_tokens":16,"input":[{"role":"user","content":[{"type":"input_text","text":` + string(prompt) + `}]}]}`},
		{"chat/service-flint", "/v1/chat/completions", `{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":` + string(prompt) + `}]}`},
		{"chat/service-flint-base", "/v1/chat/completions", `{"model":"service-flint-base","max_tokens":16,"messages":[{"role":"user","content":` + string(prompt) + `}]}`},
	}
}

func postLarge(c *http.Client, url, key, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res.StatusCode, answer, err
}

// TestHugePromptIsRefusedBeforeRouting: a 30 MB prompt, far beyond any context window, is
// refused with 400 context_length_exceeded in the route's envelope on every route and model,
// before any upstream is called (issue 23, item 1: the router's code detection and the
// Responses decoding used to cost seconds of CPU first).
func TestHugePromptIsRefusedBeforeRouting(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 1_000_000_000_000)
	c := g.Client(t)
	calls := g.Sim.TotalRequests()
	for _, r := range largeBodies(30 << 20) {
		status, answer, err := postLarge(c, g.URL+r.path, tenant.Key, r.body)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		var env struct {
			Error struct{ Type, Code, Param string }
		}
		if status != 400 || json.Unmarshal(answer, &env) != nil || env.Error.Code != "context_length_exceeded" || env.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %.300s, want 400 context_length_exceeded", r.name, status, answer)
		}
	}
	if g.Sim.TotalRequests() != calls {
		t.Error("an upstream was called for a prompt beyond the context window")
	}
}

// BenchmarkLargePrompt measures the CPU one large prompt (5 MB of prose, refused as beyond
// the context window) costs the gateway, per route and model; ns/op is the whole round trip
// on the loopback, MB/s the body's bytes over it.
func BenchmarkLargePrompt(b *testing.B) {
	g := apitest.Start(b, apitest.Options{})
	tenant := g.NewTenant(b, "bench", 1_000_000_000, 1_000_000_000_000)
	c := &http.Client{}
	// 5 MB, and 30 MB: about the largest prompt a body within the 32 MiB limit can carry.
	for _, size := range []int{5 << 20, 30 << 20} {
		for _, r := range largeBodies(size) {
			b.Run(fmt.Sprintf("%dMB/%s", size>>20, r.name), func(b *testing.B) {
				b.SetBytes(int64(len(r.body)))
				for b.Loop() {
					status, answer, err := postLarge(c, g.URL+r.path, tenant.Key, r.body)
					if err != nil || status != 400 {
						b.Fatal(fmt.Sprintf("%d %.200s %v", status, answer, err))
					}
				}
			})
		}
	}
	// A legitimate 400 KB prompt (about 100,000 tokens, within both windows) is served.
	prompt, _ := json.Marshal(largePrompt(400 << 10))
	for _, model := range []string{"service-flint", "service-flint-base"} {
		body := `{"model":"` + model + `","max_output_tokens":16,"input":` + string(prompt) + `}`
		b.Run("responses-400KB-served/"+model, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				status, answer, err := postLarge(c, g.URL+"/v1/responses", tenant.Key, body)
				if err != nil || status != 200 {
					b.Fatal(fmt.Sprintf("%d %.200s %v", status, answer, err))
				}
			}
		})
	}
}
