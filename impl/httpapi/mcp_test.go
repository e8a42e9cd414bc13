package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// bearerTransport adds the API key to every request, as an MCP client configured with a static
// key does.
type bearerTransport struct {
	key  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func mcpSession(t *testing.T, g *apitest.Gateway, key string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "tollgate-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:   g.URL + "/api/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{key: key, base: apitest.NewValidatingTransport(t, http.DefaultTransport)}},
		MaxRetries: 1,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError
}

// TestMCPDatasetToolsThroughTheGateway: the official MCP Go SDK client connects to the gateway
// with a bearer key, lists the tools and calls each dataset tool on the real engine; another
// tenant's dataset is refused with the exact text.
func TestMCPDatasetToolsThroughTheGateway(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	alpha := g.NewTenant(t, "alpha", 0, 0)
	beta := g.NewTenant(t, "beta", 0, 0)
	ctx := context.Background()
	csv := "region,amount\nnorth,10\nsouth,25\nnorth,7\n"
	if _, err := g.Datasets.Put(ctx, alpha.Account.ID, "sales", dataset.CSV, strings.NewReader(csv)); err != nil {
		t.Fatal(err)
	}
	cs := mcpSession(t, g, alpha.Key)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"list_storage_datasets", "load_storage_dataset", "query_datasets", "query_schema", "query_data"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s", want)
		}
	}
	if text, isErr := callTool(t, cs, "list_storage_datasets", map[string]any{}); isErr || !strings.Contains(text, "sales") {
		t.Errorf("list_storage_datasets: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "load_storage_dataset", map[string]any{"name": "sales", "filter": "region = 'north'"}); isErr || !strings.Contains(text, "2") {
		t.Errorf("load_storage_dataset: %v %s", isErr, text)
	}
	// An integer beyond 2^53-1, which a JSON number does not carry exactly, is refused by the
	// tool's schema with a message naming the bound (trial h9 D14: it was rounded, or refused
	// with the decoder's words about a number the caller never sent).
	if text, isErr := callTool(t, cs, "load_storage_dataset", map[string]any{"name": "sales", "limit": int64(9223372036854775807)}); !isErr || !strings.Contains(text, "maximum") {
		t.Errorf("load_storage_dataset with limit 2^63-1: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "query_datasets", map[string]any{}); isErr || !strings.Contains(text, "sales") {
		t.Errorf("query_datasets: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "query_schema", map[string]any{"dataset": "sales"}); isErr || !strings.Contains(text, "amount") {
		t.Errorf("query_schema: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "query_data", map[string]any{"dataset": "sales", "sql": "SELECT sum(amount) AS total FROM sales"}); isErr || !strings.Contains(text, "17") {
		t.Errorf("query_data: %v %s", isErr, text)
	}
	if text, isErr := callTool(t, cs, "query_data", map[string]any{"dataset": "sales", "sql": "DROP TABLE sales"}); !isErr {
		t.Errorf("DDL was not refused: %s", text)
	}

	// Beta cannot reach alpha's dataset, by name or by path.
	other := mcpSession(t, g, beta.Key)
	for _, name := range []string{"sales", "tenant/" + alpha.Account.ID.String() + "/sales", "../" + alpha.Account.ID.String() + "/sales"} {
		text, isErr := callTool(t, other, "query_schema", map[string]any{"dataset": name})
		if want := "Error: dataset '" + name + "' is not owned by the caller"; !isErr || text != want {
			t.Errorf("beta query_schema(%q): %v %q, want %q", name, isErr, text, want)
		}
	}
	if text, _ := callTool(t, other, "query_datasets", map[string]any{}); strings.Contains(text, "sales") {
		t.Errorf("beta sees alpha's loaded dataset: %s", text)
	}
}
