package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestUpstreamConnectionsAreReused sends requests one after another, streamed and not, on
// every route with a same-format upstream, and checks that the gateway reuses its connections
// to the upstream instead of opening one per request: a stream is read to the end of the
// upstream's body before the request's context ends.
func TestUpstreamConnectionsAreReused(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: passthroughConfig(t)})
	tenant := g.NewTenant(t, "reuse", 0, 1_000_000_000)
	client := g.Client(t)
	routes := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"service-flint-base","messages":[{"role":"user","content":"hi"}],"max_tokens":8%s}`},
		{"/v1/responses", `{"model":"test-responses","input":"hi","max_output_tokens":16%s}`},
		{"/v1/messages", `{"model":"service-sonnet","messages":[{"role":"user","content":"hi"}],"max_tokens":8%s}`},
	}
	for _, rt := range routes {
		for _, stream := range []string{"", `,"stream":true`} {
			before := int64(-1)
			for i := range 6 {
				req, _ := http.NewRequest("POST", g.URL+rt.path, strings.NewReader(strings.Replace(rt.body, "%s", stream, 1)))
				req.Header.Set("Authorization", "Bearer "+tenant.Key)
				req.Header.Set("Content-Type", "application/json")
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Fatalf("%s %q: %d %s", rt.path, stream, res.StatusCode, b)
				}
				if i == 0 {
					// The first request may open a connection; the next five must not.
					before = g.UpstreamConnections()
				}
			}
			if opened := g.UpstreamConnections() - before; opened != 0 {
				t.Errorf("%s stream=%v: %d new upstream connections for 5 sequential requests, want 0", rt.path, stream != "", opened)
			}
		}
	}
}
