package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// request is one call to an operation with a body that passes validation.
type request struct {
	method, path, body string
}

// validRequests has, for every operation of the document, a request that passes validation.
var validRequests = map[string]request{
	"POST /v1/chat/completions":       {"POST", "/v1/chat/completions", `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`},
	"POST /v1/responses":              {"POST", "/v1/responses", `{"model":"service-flint","input":"hi"}`},
	"POST /v1/messages":               {"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`},
	"POST /v1/messages/count_tokens":  {"POST", "/v1/messages/count_tokens", `{"model":"service-sonnet","messages":[{"role":"user","content":"hi"}]}`},
	"GET /v1/models":                  {"GET", "/v1/models", ""},
	"GET /v1/models/{model}":          {"GET", "/v1/models/service-flint", ""},
	"GET /v1/credits":                 {"GET", "/v1/credits", ""},
	"GET /v1/agents":                  {"GET", "/v1/agents", ""},
	"POST /v1/agents":                 {"POST", "/v1/agents", `{"slot":"slot-1","prompt":"hello"}`},
	"POST /v1/agents/{slot}/messages": {"POST", "/v1/agents/slot-1/messages", `{"text":"hello"}`},
	"DELETE /v1/agents/{slot}":        {"DELETE", "/v1/agents/slot-1", ""},
	"GET /v1/agents/{slot}/events":    {"GET", "/v1/agents/slot-1/events", ""},
	"POST /api/mcp":                   {"POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	"GET /api/mcp":                    {"GET", "/api/mcp", ""},
}

// errorEnvelope is an error answer in either envelope: the chat-completions one
// ({"error":{"message","type","param","code"}}) or the Messages one ({"type":"error",
// "error":{"type","message"}}).
type errorEnvelope struct {
	Type  string `json:"type"`
	Error struct {
		Type    string  `json:"type"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// errorEnvelopeOf reads an error answer; a body that is not JSON gives the zero envelope.
func errorEnvelopeOf(body []byte) errorEnvelope {
	var env errorEnvelope
	_ = json.Unmarshal(body, &env)
	return env
}

// do sends r with the given headers and returns the status, headers and body.
func do(t *testing.T, c *http.Client, base string, r request, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// TestEveryOperationIsRouted walks the embedded document: every operation is served by its own
// handler (which authenticates it), never by the catch-all.
func TestEveryOperationIsRouted(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	c := g.Client(t)
	ops := apitest.Operations(t)
	sort.Strings(ops)
	if len(ops) != len(validRequests) {
		t.Errorf("the document has %d operations, the test knows %d: %v", len(ops), len(validRequests), ops)
	}
	for _, op := range ops {
		r, ok := validRequests[op]
		if !ok {
			t.Errorf("operation %s has no request in this test", op)
			continue
		}
		status, _, body := do(t, c, g.URL, r, nil)
		if status != http.StatusUnauthorized {
			t.Errorf("%s without a key: status %d (%s), want 401 from the operation's own pipeline", op, status, body)
		}
	}
}

func TestUnknownRouteAnswersInEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	res, err := http.Get(g.URL + "/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var env struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil || res.StatusCode != 404 || !strings.Contains(env.Error.Message, "Invalid URL") {
		t.Fatalf("status %d, %+v, %v", res.StatusCode, env, err)
	}
}

// opPath is the path of an operation name such as "POST /v1/messages [no header]".
func opPath(op string) string {
	f := strings.Fields(op)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestEncodedSlashIsNoRoute: a path that spells a separator as %2F is no route: 404 naming the
// path as sent, not a 405 whose Allow lists the request's own method (trial h16 D5); a method a
// route does not serve is still a 405.
func TestEncodedSlashIsNoRoute(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/v1%2Fchat/completions", 404},
		{"POST", "/v1/chat%2Fcompletions", 404},
		{"GET", "/v1%2Fcredits", 404},
		{"GET", "/v1/chat/completions", 405},
	} {
		req, _ := http.NewRequest(c.method, g.URL+"/", strings.NewReader("{}"))
		req.URL.Opaque = "//" + req.URL.Host + c.path // sent as it is
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, res.StatusCode, body, c.status)
		}
		if c.status == 404 && !strings.Contains(string(body), "Invalid URL ("+c.method+" "+c.path+")") {
			t.Errorf("%s %s: %s", c.method, c.path, body)
		}
	}
}
