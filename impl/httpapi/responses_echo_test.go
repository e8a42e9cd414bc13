package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestResponsesStreamEchoesTheRequest: every response object of a Responses stream echoes the
// request (instructions, temperature, tools) as the whole answer does, whether the request went
// to its own format as it was or was translated.
func TestResponsesStreamEchoesTheRequest(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: contractConfig(t)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	for _, model := range []string{"test-responses", "service-flint-base"} {
		body := `{"model":"` + model + `","stream":true,"instructions":"be brief","temperature":0.5,"input":"hi",
			"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}}}]}`
		status, _, out := do(t, c, g.URL, request{"POST", "/v1/responses", body}, map[string]string{"Authorization": "Bearer " + tenant.Key})
		if status != 200 {
			t.Fatalf("%s: %d %s", model, status, out)
		}
		objects := 0
		for _, line := range strings.Split(string(out), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type     string `json:"type"`
				Response *struct {
					Instructions *string  `json:"instructions"`
					Temperature  *float64 `json:"temperature"`
					Tools        []struct {
						Name string `json:"name"`
					} `json:"tools"`
				} `json:"response"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Response == nil {
				continue
			}
			objects++
			r := ev.Response
			if r.Instructions == nil || *r.Instructions != "be brief" || r.Temperature == nil || *r.Temperature != 0.5 || len(r.Tools) != 1 || r.Tools[0].Name != "lookup" {
				t.Errorf("%s: %s does not echo the request: %s", model, ev.Type, data)
			}
		}
		if objects < 3 {
			t.Errorf("%s: %d response objects in the stream:\n%s", model, objects, out)
		}
	}
}
