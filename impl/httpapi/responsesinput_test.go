package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestResponsesInputIsAStringOrItems: a Responses request's input is a string or an array of
// at least one input item. Anything else (an empty array, a number, a boolean, an object) is
// refused with a 400 in the OpenAI envelope naming 'input', and nothing goes upstream, whether
// the upstream speaks Responses (the body relayed as it is) or chat (a translation); over the
// WebSocket mode a generating response.create is refused the same way, in the socket's error
// event, while a "generate": false warm-up may have an empty input (Codex's first warm-up of a
// session sends none), and a request continuing from it must then bring input of its own. On
// the old code the empty array and the number went upstream (the relayed body as it came, the
// translated one as a chat request without messages), and the socket sent an empty input
// upstream.
func TestResponsesInputIsAStringOrItems(t *testing.T) {
	g := apitest.Start(t, apitest.Options{Config: passthroughConfig(t)})
	tenant := g.NewTenant(t, "input-kinds", 0, 100_000_000)
	c := g.Client(t)
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	for _, model := range []string{"test-responses", "service-flint"} {
		for input, want := range map[string]string{
			`[]`:                             "invalid 'input': the array is empty",
			` [ ] `:                          "invalid 'input': the array is empty",
			`123`:                            "invalid 'input': expected a string or an array of input items, got a number",
			`true`:                           "invalid 'input': expected a string or an array of input items, got a boolean",
			`{"role":"user","content":"hi"}`: "invalid 'input': expected a string or an array of input items, got an object",
		} {
			before := g.Sim.TotalRequests()
			body := `{"model":"` + model + `","input":` + input + `}`
			status, _, got := do(t, c, g.URL, request{"POST", "/v1/responses", body}, bearer)
			env := errorEnvelopeOf(got)
			if status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" || env.Error.Param == nil || *env.Error.Param != "input" ||
				!strings.HasPrefix(env.Error.Message, want) {
				t.Errorf("%s: %d %s; want 400 invalid_request_error, param input, %q", body, status, got, want)
			}
			if n := g.Sim.TotalRequests() - before; n != 0 {
				t.Errorf("%s: %d requests went upstream", body, n)
			}
		}
		for _, input := range []string{`"hi"`, `""`, `[{"role":"user","content":"hi"}]`, `[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]`} {
			body := `{"model":"` + model + `","max_output_tokens":16,"input":` + input + `}`
			if status, _, got := do(t, c, g.URL, request{"POST", "/v1/responses", body}, bearer); status != http.StatusOK {
				t.Errorf("%s: %d %s; want it served", body, status, got)
			}
		}
	}

	conn, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	refusedInput := func(what string, evs []socketEvent) {
		t.Helper()
		var ev struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		last := evs[len(evs)-1]
		_ = json.Unmarshal(last.raw, &ev)
		if len(evs) != 1 || last.Type != "error" || last.Status != http.StatusBadRequest || ev.Error.Param != "input" {
			t.Errorf("%s: events %v: %s; want one error event, status 400, param input", what, typesOf(evs), last.raw)
		}
	}
	before := g.Sim.TotalRequests()
	sendCreate(t, conn, map[string]any{"model": "service-flint", "input": []any{}})
	refusedInput("a generating response.create with input []", readResponse(t, conn))
	sendCreate(t, conn, map[string]any{"model": "service-flint", "input": 123})
	refusedInput("a generating response.create with input 123", readResponse(t, conn))
	sendCreate(t, conn, map[string]any{"model": "service-flint", "generate": false, "input": []any{}})
	warm := readResponse(t, conn)
	if got := strings.Join(typesOf(warm), " "); got != "response.created response.completed" {
		t.Fatalf("a warm-up with input []: %s: %s", got, warm[len(warm)-1].raw)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "previous_response_id": warm[1].Response.ID, "input": []any{}})
	refusedInput("continuing an empty warm-up with input []", readResponse(t, conn))
	if n := g.Sim.TotalRequests() - before; n != 0 {
		t.Errorf("%d requests went upstream from the refused messages", n)
	}
	sendCreate(t, conn, map[string]any{"model": "service-flint", "previous_response_id": warm[1].Response.ID, "input": []any{userMessage("the question")}})
	if evs := readResponse(t, conn); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("continuing the warm-up with an item: %v: %s", typesOf(evs), evs[len(evs)-1].raw)
	}
}
