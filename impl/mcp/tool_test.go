package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// post sends one JSON-RPC message with the bearer key and returns the status and body.
func post(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// callTool calls a tool over raw JSON-RPC and returns the result's text and isError.
func callTool(t *testing.T, url, key, tool string, args any) (string, bool) {
	t.Helper()
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		t.Fatal(err)
	}
	status, body := post(t, url, key, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":%s}`, params))
	return expectToolResult(t, status, http.Header{"Content-Type": {"application/json"}}, body, "1")
}

var emptyObject = json.RawMessage(`{"type":"object","properties":{}}`)

func TestNewHandlerRefusesMalformedTools(t *testing.T) {
	ok := func(context.Context, auth.Principal, json.RawMessage) (tool.Result, error) {
		return tool.TextResult("ok"), nil
	}
	valid := tool.Tool{Name: "good_tool", Description: "d", InputSchema: emptyObject, Handler: ok}
	cases := map[string][]tool.Tool{
		"dotted name":         {{Name: "bad.name", Description: "d", InputSchema: emptyObject, Handler: ok}},
		"space in name":       {{Name: "bad name", Description: "d", InputSchema: emptyObject, Handler: ok}},
		"long name":           {{Name: strings.Repeat("a", 65), Description: "d", InputSchema: emptyObject, Handler: ok}},
		"no description":      {{Name: "t", InputSchema: emptyObject, Handler: ok}},
		"no handler":          {{Name: "t", Description: "d", InputSchema: emptyObject}},
		"empty schema":        {{Name: "t", Description: "d", InputSchema: json.RawMessage(`{}`), Handler: ok}},
		"array schema":        {{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"array"}`), Handler: ok}},
		"null required":       {{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object","required":null}`), Handler: ok}},
		"no schema":           {{Name: "t", Description: "d", Handler: ok}},
		"invalid JSON Schema": {{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object","minProperties":"x"}`), Handler: ok}},
		"duplicate":           {valid, valid},
	}
	for name, tools := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("NewHandler accepted the tool")
				}
			}()
			NewHandler(Options{Tools: tools})
		})
	}
	NewHandler(Options{Tools: []tool.Tool{valid}})
}

// TestToolHandlerOutcomes checks what the caller sees for each way a handler ends, and that the
// verified caller reaches the handler.
func TestToolHandlerOutcomes(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
	schema := json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"],"additionalProperties":false}`)
	outcome := tool.Tool{
		Name: "outcome", Description: "Ends in the way its mode says.", InputSchema: schema, Annotations: tool.ReadOnlyAnnotations("Outcome"),
		Handler: func(ctx context.Context, p auth.Principal, args json.RawMessage) (tool.Result, error) {
			var a struct{ Mode string }
			if err := json.Unmarshal(args, &a); err != nil {
				return tool.Result{}, err
			}
			switch a.Mode {
			case "whoami":
				return tool.TextResult(p.AccountID.String()), nil
			case "public":
				return tool.Result{}, fmt.Errorf("wrapped: %w", tool.Errorf("the engine is busy"))
			case "internal":
				return tool.Result{}, errors.New("pq: connection refused to 10.0.0.7")
			case "panic":
				panic("boom")
			case "refuse":
				return tool.ErrorResult("no %s", "way"), nil
			}
			return tool.TextResult("mode " + a.Mode), nil
		},
	}
	url := newTestServer(t, nil, Options{Tools: []tool.Tool{outcome}, Logger: logger})

	for _, c := range []struct {
		key, mode, want string
		isError         bool
	}{
		{"x", "whoami", accountA.String(), false},
		{"y", "whoami", accountB.String(), false},
		{"x", "public", "Error: the engine is busy", true},
		{"x", "internal", "Error: internal error; quote request id req-test when reporting it", true},
		{"x", "panic", "Error: internal error; quote request id req-test when reporting it", true},
		{"x", "refuse", "Error: no way", true},
		{"x", "other", "mode other", false},
	} {
		text, isError := callTool(t, url, c.key, "outcome", map[string]any{"mode": c.mode})
		if text != c.want || isError != c.isError {
			t.Errorf("%s: got %q (isError %v), want %q (isError %v)", c.mode, text, isError, c.want, c.isError)
		}
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if n := strings.Count(logged, "level="); n != 2 {
		t.Errorf("%d log records, want 2 (one failure, one panic; nothing from the SDK):\n%s", n, logged)
	}
	for _, want := range []string{"connection refused to 10.0.0.7", "boom", "tool=outcome"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}

	// Absent and null arguments are validated as {}.
	for _, params := range []string{`{"name":"outcome"}`, `{"name":"outcome","arguments":null}`} {
		status, body := post(t, url, "x", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+params+`}`)
		text, isError := expectToolResult(t, status, http.Header{"Content-Type": {"application/json"}}, body, "1")
		if !isError || text != "Error: invalid arguments for tool 'outcome': arguments: missing property 'mode'" {
			t.Errorf("%s: %q (isError %v)", params, text, isError)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestDatasetNamesOutsideTheNamespaceAreRefused gives every dataset tool other tenants' names
// and path tricks; each answers the exact refusal text.
func TestDatasetNamesOutsideTheNamespaceAreRefused(t *testing.T) {
	ds := newFakeDatasets()
	url := newTestServer(t, ds, Options{})
	if text, isError := callTool(t, url, "x", ToolLoadStorageDataset, map[string]any{"name": "sales"}); isError {
		t.Fatalf("loading sales: %s", text)
	}
	a, b := accountA.String(), accountB.String()
	names := []string{
		"payroll", // account B's
		"..", ".", "../payroll", "../../etc/passwd", "/etc/passwd", "sales/../payroll",
		"tenant/" + b + "/payroll", `..\payroll`, "%2e%2e%2fpayroll", "sales%2F..%2Fpayroll",
		"sales\x00", "sales\n", "nope",
		// Malformed full names, and full names that are not the caller's own.
		"tenant/" + b + "/sales", // B's namespace, a name A owns
		"tenant/" + a + "/payroll",
		"tenant/" + a + "/../" + b + "/payroll",
		"tenant/" + a + "/..", "tenant/" + a + "/.", "tenant/" + a + "/", "tenant/" + a, "tenant/" + a + "/sales/",
		"tenant/" + a + "/sales/x", "tenant/" + a + "//sales", "tenant/" + a + `/..\payroll`,
		"tenant//sales", "tenant/sales", "tenant/", "tenant",
		"/tenant/" + a + "/sales", "./tenant/" + a + "/sales", "tenant/./" + a + "/sales",
		"Tenant/" + a + "/sales", "tenants/" + a + "/sales",
		"tenant/" + strings.ToUpper(a) + "/sales",             // the id in another spelling
		"tenant/" + strings.ReplaceAll(a, "-", "") + "/sales", //
		"tenant/{" + a + "}/sales",                            //
		"tenant/urn:uuid:" + a + "/sales",                     //
		"tenant/alpha/sales",                                  // an account name in place of the id
		"tenant/" + a + "%2fsales", "tenant%2F" + a + "%2Fsales",
		"tenant/" + a + "/sales\x00", "tenant/" + a + "/\nsales",
		"tenant/" + a + "/tenant/" + a + "/sales",
	}
	for _, name := range names {
		want := fmt.Sprintf("Error: dataset '%s' is not owned by the caller", name)
		calls := []struct {
			tool string
			args map[string]any
		}{
			{ToolLoadStorageDataset, map[string]any{"name": name}},
			{ToolQuerySchema, map[string]any{"dataset": name}},
			{ToolQueryData, map[string]any{"sql": "SELECT * FROM sales", "dataset": name}},
		}
		for _, c := range calls {
			text, isError := callTool(t, url, "x", c.tool, c.args)
			if !isError || text != want {
				t.Errorf("%s %q: got %q (isError %v), want %q", c.tool, name, text, isError, want)
			}
		}
	}
	if n := ds.callsFor(accountB); n != 0 {
		t.Errorf("account B's namespace was reached %d times", n)
	}
}

// TestInNamespace checks the tools' own check of dataset names before the service sees them.
func TestInNamespace(t *testing.T) {
	a := accountA.String()
	for _, name := range []string{"sales", "sales.csv", "Sales_2024-q1", "tenant", "tenant/" + a + "/sales", "tenant/" + a + "/sales.parquet", "tenant/" + a + "/tenant"} {
		if !inNamespace(accountA, name) {
			t.Errorf("inNamespace(A, %q) = false, want true", name)
		}
	}
	for _, name := range []string{
		"", ".", "..", "a/b", `a\b`, "sales\x00", "sales\x7f",
		"tenant/" + accountB.String() + "/sales", "tenant/" + a + "/", "tenant/" + a + "/..", "tenant/" + a + "/a/b",
		"tenant/" + strings.ToUpper(a) + "/sales", "tenant/alpha/sales", "tenant//sales", "/tenant/" + a + "/sales",
	} {
		if inNamespace(accountA, name) {
			t.Errorf("inNamespace(A, %q) = true, want false", name)
		}
	}
}

// TestTenantsDoNotSeeEachOther runs both tenants' calls concurrently (under -race in CI).
func TestTenantsDoNotSeeEachOther(t *testing.T) {
	ds := newFakeDatasets()
	url := newTestServer(t, ds, Options{})
	callTool(t, url, "x", ToolLoadStorageDataset, map[string]any{"name": "sales"})
	callTool(t, url, "y", ToolLoadStorageDataset, map[string]any{"name": "payroll"})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 16 {
		wg.Go(func() {
			key, own, other := "x", "sales", "payroll"
			if i%2 == 1 {
				key, own, other = "y", "payroll", "sales"
			}
			text, isError := callTool(t, url, key, ToolQueryDatasets, nil)
			if isError || !strings.Contains(text, `"`+own+`"`) || strings.Contains(text, other) {
				errs <- fmt.Sprintf("%s lists %q", key, text)
			}
			text, isError = callTool(t, url, key, ToolQueryData, map[string]any{"sql": "SELECT 1", "dataset": other})
			if !isError || !strings.Contains(text, "is not owned by the caller") {
				errs <- fmt.Sprintf("%s queried %s: %q", key, other, text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestQueryResultFormatting(t *testing.T) {
	got := formatRows(QueryResult{
		Columns: []Column{{"a", "DOUBLE"}, {"b", "VARCHAR"}, {"c", "MAP"}},
		Rows: [][]any{
			{math.NaN(), "<tag> & \"quote\"", map[any]any{1: "x"}},
			{1.5, nil, map[string]int{"k": 1}},
		},
		CutOff: "row cap of 2 rows reached",
	})
	want := `["a","b","c"]` + "\n" +
		`["NaN","<tag> & \"quote\"","map[1:x]"]` + "\n" +
		`[1.5,null,{"k":1}]` + "\n" +
		"(2 rows; result cut off: row cap of 2 rows reached)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := formatRows(QueryResult{Columns: []Column{{"n", "BIGINT"}}}); got != "[\"n\"]\n(0 rows)" {
		t.Errorf("empty result: %q", got)
	}
}

func TestBodyLimit(t *testing.T) {
	url := newTestServer(t, newFakeDatasets(), Options{MaxBodyBytes: 64})
	status, body := post(t, url, "x", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("x", 100)+`"}}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "-32600") {
		t.Errorf("got %d %s, want 413 with -32600", status, body)
	}
}

func TestModernCodesNeverLeave(t *testing.T) {
	for code := int64(-32022); code <= -32020; code++ {
		got := toRPCError(&jsonrpc.Error{Code: code, Message: "modern", Data: json.RawMessage(`{"supported":[]}`)})
		if got.Code != codeInvalidRequest || got.Data != nil {
			t.Errorf("code %d went out as %+v", code, got)
		}
	}
	if got := toRPCError(&jsonrpc.Error{Code: codeInvalidParams, Message: "m"}); got.Code != codeInvalidParams {
		t.Errorf("-32602 became %d", got.Code)
	}
	if got := toRPCError(errors.New("plain")); got.Code != codeInternal {
		t.Errorf("a plain error became %d", got.Code)
	}
}

func TestStripModernMeta(t *testing.T) {
	in := json.RawMessage(`{"name":"t","_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`)
	var got map[string]any
	if err := json.Unmarshal(stripModernMeta(in), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "t", "_meta": map[string]any{"progressToken": 7.0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	plain := json.RawMessage(`{"name":"t","_meta":{"progressToken":7}}`)
	if string(stripModernMeta(plain)) != string(plain) {
		t.Error("params without modern metadata were rewritten")
	}
}
