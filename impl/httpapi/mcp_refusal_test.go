package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/ratelimit"
)

// rpcIDOf is the id of the JSON-RPC response body, as written ("" when body is not one).
func rpcIDOf(body []byte) string {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	return string(env.ID)
}

// TestMCPRefusalsEchoTheID (h4): the gateway's edge refused an MCP request (401 without a
// verified caller, 429 over the key's cap) with a JSON-RPC error whose id was null, though the
// body was a JSON-RPC request with an id, which JSON-RPC 2.0 has the response carry (null only
// when it cannot be read; wire-protocols.md 5.2: echo the id exactly, keeping its type). The MCP
// Go SDK client reads the error of a non-2xx answer only when it has an id: with null it
// reported a bare "Unauthorized" for a bad key. Now the refusal echoes a request's id, string
// or number; a notification, a batch, a body that is not JSON, an id of another type and a
// body beyond mcp.RefusedIDBytes keep null. (The 503 of a database outage:
// TestDatabaseOutageDegradedMode.)
func TestMCPRefusalsEchoTheID(t *testing.T) {
	clock := newFakeClock()
	g := apitest.Start(t, apitest.Options{Limiter: ratelimit.NewLocal(clock.Now)})
	tenant := g.NewTenant(t, "acme", 1, 0)
	c := g.Client(t)
	mcpPost := func(body string) request { return request{"POST", "/api/mcp", body} }

	long := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{"pad":"` +
		strings.Repeat("x", 17<<10) + `"}}}`
	for _, tc := range []struct{ name, body, id string }{
		{"string id", `{"jsonrpc":"2.0","id":"req-7","method":"tools/list"}`, `"req-7"`},
		{"number id", `{"jsonrpc":"2.0","id":42,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, `42`},
		{"id after the method", `{"method":"ping","jsonrpc":"2.0","id":0}`, `0`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, `null`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, `null`},
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":`, `null`},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, `null`},
		{"object id", `{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}`, `null`},
		{"beyond the bound", long, `null`},
	} {
		status, h, body := do(t, c, g.URL, mcpPost(tc.body), nil)
		checkUnauthenticated(t, "POST /api/mcp", status, h, body)
		if got := rpcIDOf(body); got != tc.id {
			t.Errorf("401, %s: id %s, want %s: %s", tc.name, got, tc.id, body)
		}
	}

	// Over the key's cap of one request a minute.
	bearer := map[string]string{"Authorization": "Bearer " + tenant.Key}
	status, _, body := do(t, c, g.URL, mcpPost(`{"jsonrpc":"2.0","id":"first","method":"tools/list"}`), bearer)
	if status != http.StatusOK || rpcIDOf(body) != `"first"` {
		t.Fatalf("the first request: %d %s", status, body)
	}
	status, h, body := do(t, c, g.URL, mcpPost(`{"jsonrpc":"2.0","id":"second","method":"tools/list"}`), bearer)
	checkRateLimited(t, "POST /api/mcp", status, h, body, "")
	if got := rpcIDOf(body); got != `"second"` {
		t.Errorf("429: id %s, want \"second\": %s", got, body)
	}

	// The MCP Go SDK client, given a key the gateway does not take, reports the refusal's
	// reason rather than the bare status.
	client := sdk.NewClient(&sdk.Implementation{Name: "tollgate-test", Version: "1.0.0"}, nil)
	_, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:   g.URL + "/api/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{key: "tgk_unknown", base: apitest.NewValidatingTransport(t, http.DefaultTransport)}},
		MaxRetries: 1,
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "unauthenticated: no verified caller: malformed API key") {
		t.Errorf("the SDK client with a malformed key: %v, want the gateway's -32001 message", err)
	}
}
