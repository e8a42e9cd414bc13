package httpapi_test

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// BenchmarkStreamDirectVsGateway is BenchmarkChatDirectVsGateway for streams: a streamed chat
// completion of 64 words read to its end, straight from the simulator (direct), through the
// gateway to a model of the client's format (gateway: the stream relayed), and through it on
// the Responses route to the same chat upstream (translated: every event decoded and encoded
// again). Each stream is read whole and must end with its terminal event; the per-stream
// allocations and time guard the streaming path, which the non-streamed benchmark does not
// cross (the held opening, the decoders, the usage of a stream).
func BenchmarkStreamDirectVsGateway(b *testing.B) {
	g := apitest.Start(b, apitest.Options{})
	tenant := g.NewTenant(b, "bench", 1_000_000_000, 1_000_000_000_000)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	const prompt = "Say hello to the benchmark. [[sim words=64]]"
	chat := func(model string) string {
		return `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":128}`
	}
	run := func(b *testing.B, url, key, body, last string) {
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
				if res.StatusCode != 200 {
					res.Body.Close()
					b.Fatalf("status %d", res.StatusCode)
				}
				sc := bufio.NewScanner(res.Body)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				ended := false
				for sc.Scan() {
					if bytes.HasPrefix(sc.Bytes(), []byte(last)) {
						ended = true
					}
				}
				res.Body.Close()
				if !ended {
					b.Fatalf("the stream from %s ended without %q", url, last)
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) {
		run(b, g.SimURL+"/v1/chat/completions", "", chat("sim-general"), "data: [DONE]")
	})
	b.Run("gateway", func(b *testing.B) {
		run(b, g.URL+"/v1/chat/completions", tenant.Key, chat("service-flint-base"), "data: [DONE]")
	})
	b.Run("translated", func(b *testing.B) {
		body := `{"model":"service-flint-base","stream":true,"input":"` + prompt + `","max_output_tokens":128}`
		run(b, g.URL+"/v1/responses", tenant.Key, body, "event: response.completed")
	})
}
