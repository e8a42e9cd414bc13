package tenanttools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// bearer adds the API key to every request, as an MCP client configured with a static key does.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect connects the official MCP Go SDK client to the gateway's MCP endpoint with key.
func connect(t *testing.T, ctx context.Context, g *apitest.Gateway, key string) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "tenanttools-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{
		Endpoint:   g.URL + "/api/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key, base: apitest.NewValidatingTransport(t, http.DefaultTransport)}},
		MaxRetries: 1,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls a tool and returns its one text content and isError.
func call(t *testing.T, ctx context.Context, cs *sdk.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s %v: %d content items, want 1", tool, args, len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("%s %v: content is %T, want text", tool, args, res.Content[0])
	}
	return tc.Text, res.IsError
}

// listed is one line of list_storage_datasets or query_datasets.
type listed struct {
	Name     string `json:"name"`
	FullName string `json:"full_name"`
	Rows     int64  `json:"rows"`
}

// parseListing reads the JSON lines after the first line of a listing.
func parseListing(t *testing.T, text string) []listed {
	t.Helper()
	lines := strings.Split(text, "\n")
	var out []listed
	for _, line := range lines[1:] {
		var l listed
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("listing line %q: %v\n%s", line, err, text)
		}
		out = append(out, l)
	}
	return out
}

// world is a gateway with two tenants: alpha owns sales and events, beta owns its own sales and
// payroll.
type world struct {
	g           *apitest.Gateway
	alpha, beta apitest.Tenant
}

func newWorld(t *testing.T) world {
	t.Helper()
	g := apitest.Start(t, apitest.Options{})
	w := world{g: g, alpha: g.NewTenant(t, "alpha", 0, 0), beta: g.NewTenant(t, "beta", 0, 0)}
	ctx := context.Background()
	for _, d := range []struct {
		tenant  apitest.Tenant
		name    string
		format  dataset.Format
		content string
	}{
		{w.alpha, "sales", dataset.CSV, "region,amount\nnorth,10\nsouth,25\nnorth,7\n"},
		{w.alpha, "events", dataset.JSONL, `{"user":"ann","ms":12}` + "\n" + `{"user":"bob","ms":40}` + "\n"},
		{w.beta, "sales", dataset.CSV, "region,amount\nmars,1000\n"},
		{w.beta, "payroll", dataset.CSV, "name,salary\nsecret person,1000000\n"},
	} {
		if _, err := g.Datasets.Put(ctx, d.tenant.Account.ID, d.name, d.format, strings.NewReader(d.content)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// fullName is the tenant's full name of its dataset name.
func fullName(tenant apitest.Tenant, name string) string {
	return "tenant/" + tenant.Account.ID.String() + "/" + name
}

// TestDatasetToolsTakeFullAndShortNames runs every dataset tool on the real gateway, dataset
// engine and database through the official MCP Go SDK client: each takes the caller's full
// name tenant/<account-id>/<dataset> and the short name, the listings show both, and the SQL
// of query_data calls the table by its short name either way.
func TestDatasetToolsTakeFullAndShortNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	w := newWorld(t)
	cs := connect(t, ctx, w.g, w.alpha.Key)

	// tools/list says which names work.
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The profile's twelve tools: the five dataset tools, the six agent tools and get_credits.
	if len(tools.Tools) != 12 {
		t.Fatalf("%d tools, want the 5 dataset tools, the 6 agent tools and get_credits", len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		if strings.Contains(tool.Name, "agent") || tool.Name == "get_credits" {
			continue
		}
		if !strings.Contains(tool.Description, "tenant/<account-id>/<") || !strings.Contains(tool.Description, "short name") {
			t.Errorf("%s: the description does not say that the full and the short name work: %q", tool.Name, tool.Description)
		}
	}
	for _, tool := range tools.Tools {
		if tool.Name == "query_data" && !strings.Contains(tool.Description, "FROM sales") {
			t.Errorf("query_data: the description does not say what the SQL calls the table: %q", tool.Description)
		}
	}

	// list_storage_datasets shows both names of each of the caller's datasets, and no one else's.
	text, isError := call(t, ctx, cs, "list_storage_datasets", nil)
	if isError || strings.Contains(text, w.beta.Account.ID.String()) || strings.Contains(text, "payroll") {
		t.Fatalf("list_storage_datasets: %q (isError %v)", text, isError)
	}
	stored := parseListing(t, text)
	if len(stored) != 2 || stored[0].Name != "events" || stored[1].Name != "sales" {
		t.Fatalf("stored = %+v", stored)
	}
	for _, d := range stored {
		if d.FullName != fullName(w.alpha, d.Name) {
			t.Errorf("%s: full_name %q, want %q", d.Name, d.FullName, fullName(w.alpha, d.Name))
		}
	}

	// Every tool that takes a name takes the full one, the full one with the format's extension
	// and the short one, for the same dataset.
	for _, name := range []string{fullName(w.alpha, "sales"), "sales", fullName(w.alpha, "sales.csv"), "sales.csv"} {
		text, isError := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": name, "filter": "region = 'north'"})
		if want := "Loaded dataset 'sales' (" + fullName(w.alpha, "sales") + "): 2 rows, 2 columns.\n"; isError || !strings.HasPrefix(text, want) {
			t.Errorf("load_storage_dataset %q: %q (isError %v), want it to start %q", name, text, isError, want)
		}
		text, isError = call(t, ctx, cs, "query_schema", map[string]any{"dataset": name})
		if want := "Dataset '" + name + "': 2 columns.\n" + `{"name":"region","type":"VARCHAR"}` + "\n" + `{"name":"amount","type":"BIGINT"}`; isError || text != want {
			t.Errorf("query_schema %q: %q (isError %v), want %q", name, text, isError, want)
		}
		// In the SQL the table is the short name, whichever name the dataset argument has.
		text, isError = call(t, ctx, cs, "query_data", map[string]any{"dataset": name, "sql": "SELECT sum(amount) AS total FROM sales"})
		if isError || !strings.Contains(text, "17") {
			t.Errorf("query_data %q: %q (isError %v)", name, text, isError)
		}
	}
	// The full name is not a table name in the SQL: the engine's error names only what the caller wrote.
	text, isError = call(t, ctx, cs, "query_data", map[string]any{"dataset": fullName(w.alpha, "sales"),
		"sql": `SELECT sum(amount) FROM "` + fullName(w.alpha, "sales") + `"`})
	if !isError || !strings.HasPrefix(text, "Error: ") || strings.Contains(text, w.beta.Account.ID.String()) {
		t.Errorf("query_data with the full name as a table: %q (isError %v)", text, isError)
	}

	// query_datasets shows both names of what the caller loaded, whichever name loaded it.
	if text, isError := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": fullName(w.alpha, "events")}); isError {
		t.Fatalf("load events: %s", text)
	}
	text, isError = call(t, ctx, cs, "query_datasets", nil)
	if isError || strings.Contains(text, w.beta.Account.ID.String()) {
		t.Fatalf("query_datasets: %q (isError %v)", text, isError)
	}
	loaded := parseListing(t, text)
	want := []listed{{"events", fullName(w.alpha, "events"), 2}, {"sales", fullName(w.alpha, "sales"), 2}}
	if len(loaded) != len(want) || loaded[0] != want[0] || loaded[1] != want[1] {
		t.Errorf("query_datasets = %+v, want %+v", loaded, want)
	}

	// Beta names its own datasets by its own full name, and sees its own data.
	csB := connect(t, ctx, w.g, w.beta.Key)
	if text, isError := call(t, ctx, csB, "load_storage_dataset", map[string]any{"name": fullName(w.beta, "sales")}); isError {
		t.Fatalf("beta loading its own sales: %s", text)
	}
	text, isError = call(t, ctx, csB, "query_data", map[string]any{"dataset": fullName(w.beta, "sales"), "sql": "SELECT region FROM sales"})
	if isError || !strings.Contains(text, "mars") || strings.Contains(text, "north") {
		t.Errorf("beta's sales: %q (isError %v)", text, isError)
	}
}

// TestDatasetNamesOutsideTheCallersNamespace gives every dataset tool, on the real gateway and
// engine, another tenant's full names and malformed ones: each answers exactly
// "Error: dataset '<name>' is not owned by the caller" with the name as sent, and nothing of the
// other tenant's leaks or changes.
func TestDatasetNamesOutsideTheCallersNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	w := newWorld(t)
	csA := connect(t, ctx, w.g, w.alpha.Key)
	csB := connect(t, ctx, w.g, w.beta.Key)
	// Both have sales loaded, so that a refusal cannot be a "not loaded" in disguise.
	for _, c := range []struct {
		cs   *sdk.ClientSession
		name string
	}{{csA, "sales"}, {csB, "sales"}, {csB, "payroll"}} {
		if text, isError := call(t, ctx, c.cs, "load_storage_dataset", map[string]any{"name": c.name}); isError {
			t.Fatalf("load %s: %s", c.name, text)
		}
	}

	a, b := w.alpha.Account.ID.String(), w.beta.Account.ID.String()
	names := []string{
		// Beta's datasets, by beta's full names (sales is also a name alpha owns).
		"tenant/" + b + "/sales", "tenant/" + b + "/payroll", "tenant/" + b + "/payroll.csv", "payroll",
		// Beta's name in alpha's namespace, and beta's dataset reached through alpha's.
		"tenant/" + a + "/payroll", "tenant/" + a + "/../" + b + "/payroll", "../" + b + "/payroll",
		// Account names in place of ids.
		"tenant/alpha/sales", "tenant/beta/payroll",
		// Alpha's id in other spellings.
		"tenant/" + strings.ToUpper(a) + "/sales", "tenant/" + strings.ReplaceAll(a, "-", "") + "/sales",
		"tenant/{" + a + "}/sales", "tenant/urn:uuid:" + a + "/sales",
		// Malformed full names.
		"tenant/" + a + "/", "tenant/" + a, "tenant/" + a + "/..", "tenant/" + a + "/.", "tenant/" + a + "/sales/",
		"tenant/" + a + "//sales", "tenant/" + a + "/tenant/" + a + "/sales", "tenant/" + a + "/sales.txt",
		"tenant//sales", "tenant/sales", "tenant/", "/tenant/" + a + "/sales", "Tenant/" + a + "/sales",
		"tenant/" + a + "%2fsales", `tenant\` + a + `\sales`, "tenant/" + a + "/sales\x00", "tenant/" + a + "/sal\u0435s",
		// Paths and tricks.
		"..", ".", "/etc/passwd", "sales/../payroll", "%2e%2e%2f" + b + "%2fpayroll", "nonexistent",
	}
	for _, name := range names {
		want := "Error: dataset '" + name + "' is not owned by the caller"
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"load_storage_dataset", map[string]any{"name": name}},
			{"query_schema", map[string]any{"dataset": name}},
			{"query_data", map[string]any{"dataset": name, "sql": "SELECT * FROM payroll"}},
		} {
			if text, isError := call(t, ctx, csA, c.tool, c.args); !isError || text != want {
				t.Errorf("alpha %s %q: %q (isError %v), want %q", c.tool, name, text, isError, want)
			}
		}
	}
	// Alpha's full names are refused to beta the same way.
	for _, name := range []string{"tenant/" + a + "/sales", "tenant/" + a + "/events"} {
		want := "Error: dataset '" + name + "' is not owned by the caller"
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"load_storage_dataset", map[string]any{"name": name}},
			{"query_schema", map[string]any{"dataset": name}},
			{"query_data", map[string]any{"dataset": name, "sql": "SELECT * FROM sales"}},
		} {
			if text, isError := call(t, ctx, csB, c.tool, c.args); !isError || text != want {
				t.Errorf("beta %s %q: %q (isError %v), want %q", c.tool, name, text, isError, want)
			}
		}
	}

	// The listings stay each tenant's own.
	for _, tool := range []string{"list_storage_datasets", "query_datasets"} {
		text, isError := call(t, ctx, csA, tool, nil)
		if isError || strings.Contains(text, b) || strings.Contains(text, "payroll") || !strings.Contains(text, fullName(w.alpha, "sales")) {
			t.Errorf("alpha %s: %q (isError %v)", tool, text, isError)
		}
		text, isError = call(t, ctx, csB, tool, nil)
		if isError || strings.Contains(text, a) || !strings.Contains(text, fullName(w.beta, "payroll")) {
			t.Errorf("beta %s: %q (isError %v)", tool, text, isError)
		}
	}
	// Beta's data is unchanged: its loads were not replaced by alpha's refused calls.
	text, isError := call(t, ctx, csB, "query_data", map[string]any{"dataset": "payroll", "sql": "SELECT salary FROM payroll"})
	if isError || !strings.Contains(text, "1000000") {
		t.Errorf("beta's payroll: %q (isError %v)", text, isError)
	}
}
