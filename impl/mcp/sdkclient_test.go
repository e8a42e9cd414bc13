package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds an Authorization header to every request, as an MCP client configured with a
// static key does.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connectSDK connects the official Go SDK client over streamable HTTP with the bearer key.
func connectSDK(t *testing.T, ctx context.Context, url, key string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "tollgate-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
		MaxRetries: 1,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callText calls a tool and returns its text and isError.
func callText(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("call %s: %d content items, want 1", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("call %s: content is %T, want text", name, res.Content[0])
	}
	return tc.Text, res.IsError
}

func TestSDKClientListsAndCallsDatasetTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ds := newFakeDatasets()
	url := newTestServer(t, ds, Options{})
	cs := connectSDK(t, ctx, url, "x")

	init := cs.InitializeResult()
	if init.ProtocolVersion != LatestProtocolVersion {
		t.Errorf("negotiated %q, want %q", init.ProtocolVersion, LatestProtocolVersion)
	}
	if init.ServerInfo == nil || init.ServerInfo.Name != "tollgate" {
		t.Errorf("serverInfo = %+v", init.ServerInfo)
	}
	if init.Capabilities == nil || init.Capabilities.Tools == nil {
		t.Errorf("capabilities lack tools: %+v", init.Capabilities)
	}
	if cs.ID() != "" {
		t.Errorf("session id %q issued; the endpoint is stateless", cs.ID())
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	wantRequired := map[string][]string{
		ToolListStorageDatasets: nil,
		ToolLoadStorageDataset:  {"name"},
		ToolQueryDatasets:       nil,
		ToolQuerySchema:         {"dataset"},
		ToolQueryData:           {"sql", "dataset"},
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		want, ok := wantRequired[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
		// Every dataset tool says that the full name tenant/<account-id>/<name> works.
		if !strings.Contains(tool.Description, "tenant/<account-id>/<") {
			t.Errorf("%s: the description does not name the full-name form: %q", tool.Name, tool.Description)
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Type                 string                     `json:"type"`
			Required             []string                   `json:"required"`
			Properties           map[string]json.RawMessage `json:"properties"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
			Description          string                     `json:"description"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: input schema %s: %v", tool.Name, raw, err)
		}
		if schema.Type != "object" {
			t.Errorf("%s: inputSchema.type = %q, want object", tool.Name, schema.Type)
		}
		if !slices.Equal(schema.Required, want) {
			t.Errorf("%s: required = %v, want %v", tool.Name, schema.Required, want)
		}
		if schema.Properties == nil {
			t.Errorf("%s: inputSchema has no properties", tool.Name)
		}
		for _, r := range want {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %q is not a property", tool.Name, r)
			}
		}
		if schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: additionalProperties is not false", tool.Name)
		}
		if schema.Description == "" {
			t.Errorf("%s: inputSchema has no description", tool.Name)
		}
		a := tool.Annotations
		if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint ||
			a.OpenWorldHint == nil || *a.OpenWorldHint || a.Title == "" {
			t.Errorf("%s: annotations %+v are not read-only, idempotent, closed-world and titled", tool.Name, a)
		}
	}
	slices.Sort(names)
	if want := []string{"list_storage_datasets", "load_storage_dataset", "query_data", "query_datasets", "query_schema"}; !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}

	fullA := "tenant/" + accountA.String() + "/"
	steps := []struct {
		tool    string
		args    map[string]any
		want    string
		isError bool
	}{
		{ToolListStorageDatasets, nil, "2 datasets in storage:\n" +
			`{"name":"events","full_name":"` + fullA + `events","format":"parquet","size_bytes":4096,"updated":"2026-01-02T03:04:05Z"}` + "\n" +
			`{"name":"sales","full_name":"` + fullA + `sales","format":"csv","size_bytes":2048,"updated":"2026-01-02T03:04:05Z"}`, false},
		{ToolQueryDatasets, map[string]any{}, "No datasets loaded. Load one with load_storage_dataset.", false},
		{ToolLoadStorageDataset, map[string]any{"name": "sales", "columns": []string{"region", "amount"}, "limit": 2, "filter": "amount > 0"},
			"Loaded dataset 'sales' (" + fullA + "sales): 2 rows, 2 columns.\n" + `{"name":"region","type":"VARCHAR"}` + "\n" + `{"name":"amount","type":"DOUBLE"}`, false},
		{ToolQueryDatasets, nil, "1 dataset loaded:\n" +
			`{"name":"sales","full_name":"` + fullA + `sales","rows":2,"columns":["region","amount"],"limit":2,"filter":"amount > 0","loaded_at":"2026-02-03T04:05:06Z"}`, false},
		{ToolQuerySchema, map[string]any{"dataset": "sales"}, "Dataset 'sales': 2 columns.\n" +
			`{"name":"region","type":"VARCHAR"}` + "\n" + `{"name":"amount","type":"DOUBLE"}`, false},
		{ToolQueryData, map[string]any{"sql": "SELECT region, amount FROM sales", "dataset": "sales"},
			"[\"region\",\"amount\"]\n[\"EU\",120.5]\n[\"US\",80]\n(2 rows)", false},
		// The full name works wherever the short one does.
		{ToolQuerySchema, map[string]any{"dataset": fullA + "sales"}, "Dataset '" + fullA + "sales': 2 columns.\n" +
			`{"name":"region","type":"VARCHAR"}` + "\n" + `{"name":"amount","type":"DOUBLE"}`, false},
		{ToolQueryData, map[string]any{"sql": "SELECT region, amount FROM sales", "dataset": fullA + "sales"},
			"[\"region\",\"amount\"]\n[\"EU\",120.5]\n[\"US\",80]\n(2 rows)", false},
		// Another tenant's full name is refused like its short name.
		{ToolQuerySchema, map[string]any{"dataset": "tenant/" + accountB.String() + "/payroll"},
			"Error: dataset 'tenant/" + accountB.String() + "/payroll' is not owned by the caller", true},
		// Refusals are results, not protocol errors.
		{ToolQueryData, map[string]any{"sql": "DELETE FROM sales", "dataset": "sales"}, "Error: only one SELECT or WITH statement is allowed", true},
		{ToolQuerySchema, map[string]any{"dataset": "events"}, "Error: dataset 'events' is not loaded: load it with load_storage_dataset", true},
		{ToolQuerySchema, map[string]any{"dataset": "payroll"}, "Error: dataset 'payroll' is not owned by the caller", true},
		{ToolLoadStorageDataset, map[string]any{"name": "../payroll"}, "Error: dataset '../payroll' is not owned by the caller", true},
		{ToolLoadStorageDataset, map[string]any{"name": "sales", "filter": "DROP TABLE"}, "Error: invalid filter: not a boolean expression", true},
		{ToolQueryData, map[string]any{"dataset": "sales"}, "Error: invalid arguments for tool 'query_data': arguments: missing property 'sql'", true},
		{ToolLoadStorageDataset, map[string]any{"name": fullA + "events"},
			"Loaded dataset 'events' (" + fullA + "events): 0 rows, 1 column.\n" + `{"name":"at","type":"TIMESTAMP"}`, false},
		{ToolQueryDatasets, nil, "2 datasets loaded:\n" +
			`{"name":"events","full_name":"` + fullA + `events","rows":0,"columns":["at"],"loaded_at":"2026-02-03T04:05:06Z"}` + "\n" +
			`{"name":"sales","full_name":"` + fullA + `sales","rows":2,"columns":["region","amount"],"limit":2,"filter":"amount > 0","loaded_at":"2026-02-03T04:05:06Z"}`, false},
	}
	for _, s := range steps {
		text, isError := callText(t, ctx, cs, s.tool, s.args)
		if text != s.want || isError != s.isError {
			t.Errorf("%s %v:\n got (isError %v) %q\nwant (isError %v) %q", s.tool, s.args, isError, text, s.isError, s.want)
		}
	}
	if n := ds.callsFor(accountB); n != 0 {
		t.Errorf("account B's data was reached %d times by account A's key", n)
	}
	if n := ds.callsFor(accountA); n == 0 {
		t.Error("the caller's account never reached the dataset service")
	}

	// Another tenant's key sees its own data only, through a fresh connection.
	csB := connectSDK(t, ctx, url, "y")
	text, isError := callText(t, ctx, csB, ToolListStorageDatasets, nil)
	if isError || !strings.Contains(text, `"payroll"`) || strings.Contains(text, "sales") {
		t.Errorf("account B lists %q", text)
	}
	text, isError = callText(t, ctx, csB, ToolQuerySchema, map[string]any{"dataset": "sales"})
	if !isError || text != "Error: dataset 'sales' is not owned by the caller" {
		t.Errorf("account B reading account A's dataset: %q (isError %v)", text, isError)
	}

	// Pinging works through the SDK client too.
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("ping: %v", err)
	}
}
