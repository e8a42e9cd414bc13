package mcp

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden JSON-RPC transcripts under testdata/rpc")

// exchange is one raw HTTP exchange with the endpoint.
type exchange struct {
	name    string
	method  string // HTTP method; POST when empty
	headers map[string]string
	body    string
	// check asserts on the response beyond the golden transcript, so that rewriting goldens
	// cannot hide a broken promise.
	check func(t *testing.T, status int, h http.Header, body []byte)
}

// transcriptHeaders are the response headers recorded in the transcripts.
var transcriptHeaders = []string{"Allow", "Content-Type", "Mcp-Session-Id", "Www-Authenticate"}

func initialize(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"raw","version":"1"}}}`, version)
}

func TestRawJSONRPCExchange(t *testing.T) {
	url := newTestServer(t, newFakeDatasets(), Options{})
	for _, ex := range rawExchanges() {
		t.Run(ex.name, func(t *testing.T) {
			method := ex.method
			if method == "" {
				method = http.MethodPost
			}
			var body io.Reader
			if ex.body != "" {
				body = strings.NewReader(ex.body)
			}
			req, err := http.NewRequestWithContext(t.Context(), method, url, body)
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{"Authorization": "Bearer x"}
			if method == http.MethodPost {
				headers["Content-Type"] = "application/json"
				headers["Accept"] = "application/json, text/event-stream"
			}
			for k, v := range ex.headers {
				if v == "" {
					delete(headers, k)
				} else {
					headers[k] = v
				}
			}
			for k, v := range headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if ex.check != nil {
				ex.check(t, resp.StatusCode, resp.Header, got)
			}
			compareGolden(t, ex.name, transcript(method, headers, ex.body, resp, got))
		})
	}
}

// transcript renders one exchange as text: the request line, headers and body, then the status,
// the recorded response headers and the body, indented when it is JSON.
func transcript(method string, reqHeaders map[string]string, reqBody string, resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s /api/mcp\n", method)
	names := make([]string, 0, len(reqHeaders))
	for k := range reqHeaders {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, reqHeaders[k])
	}
	fmt.Fprintf(&b, "\n%s\n\n", reqBody)
	fmt.Fprintf(&b, "HTTP %s\n", resp.Status)
	for _, k := range transcriptHeaders {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	var pretty bytes.Buffer
	if len(body) > 0 && json.Indent(&pretty, body, "", "  ") == nil {
		b.Write(bytes.TrimSpace(pretty.Bytes()))
		b.WriteString("\n")
	} else {
		b.Write(body)
	}
	return b.String()
}

// compareGolden compares got with testdata/rpc/<name>.golden, or rewrites it under -update.
func compareGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "rpc", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./impl/mcp/ -run TestRawJSONRPCExchange -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (rerun with -update if the change is intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// rpcBody is a decoded JSON-RPC response body.
type rpcBody struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeRPC(t *testing.T, body []byte) rpcBody {
	t.Helper()
	var r rpcBody
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("body %q is not a JSON-RPC response: %v", body, err)
	}
	if r.JSONRPC != "2.0" {
		t.Errorf("jsonrpc = %q", r.JSONRPC)
	}
	return r
}

// expectResult asserts HTTP 200, application/json, the id, no session id, and returns the result.
func expectResult(t *testing.T, status int, h http.Header, body []byte, id string) map[string]any {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", status, body)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if sid := h.Get("Mcp-Session-Id"); sid != "" {
		t.Errorf("Mcp-Session-Id %q issued by a stateless endpoint", sid)
	}
	r := decodeRPC(t, body)
	if string(r.ID) != id {
		t.Errorf("id = %s, want %s", r.ID, id)
	}
	if r.Error != nil {
		t.Fatalf("error %d %q, want a result", r.Error.Code, r.Error.Message)
	}
	var res map[string]any
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return res
}

// expectError asserts the HTTP status, the id and the JSON-RPC error code, and returns the
// message.
func expectError(t *testing.T, status int, h http.Header, body []byte, wantStatus int, id string, code int) string {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status %d, want %d: %s", status, wantStatus, body)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	r := decodeRPC(t, body)
	if string(r.ID) != id {
		t.Errorf("id = %s, want %s", r.ID, id)
	}
	if r.Result != nil {
		t.Errorf("result %s alongside an error", r.Result)
	}
	if r.Error == nil {
		t.Fatalf("no error in %s", body)
	}
	if r.Error.Code != code {
		t.Errorf("code %d, want %d (%s)", r.Error.Code, code, r.Error.Message)
	}
	return r.Error.Message
}

// expectToolResult asserts a tools/call result and returns its text and isError.
func expectToolResult(t *testing.T, status int, h http.Header, body []byte, id string) (string, bool) {
	t.Helper()
	res := expectResult(t, status, h, body, id)
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		t.Fatalf("content %v, want one item", res["content"])
	}
	item, _ := content[0].(map[string]any)
	if item["type"] != "text" {
		t.Errorf("content type %v", item["type"])
	}
	text, _ := item["text"].(string)
	isError, _ := res["isError"].(bool)
	return text, isError
}

func expectEmpty202(t *testing.T, status int, _ http.Header, body []byte) {
	t.Helper()
	if status != http.StatusAccepted || len(body) != 0 {
		t.Errorf("got %d %q, want 202 with an empty body", status, body)
	}
}

func expectVersion(version string) func(t *testing.T, status int, h http.Header, body []byte) {
	return func(t *testing.T, status int, h http.Header, body []byte) {
		t.Helper()
		res := expectResult(t, status, h, body, "1")
		if res["protocolVersion"] != version {
			t.Errorf("protocolVersion %v, want %s", res["protocolVersion"], version)
		}
		info, _ := res["serverInfo"].(map[string]any)
		if info["name"] != "tollgate" || info["version"] != "test" {
			t.Errorf("serverInfo %v", res["serverInfo"])
		}
		caps, _ := res["capabilities"].(map[string]any)
		if _, ok := caps["tools"].(map[string]any); !ok {
			t.Errorf("capabilities %v lack tools", res["capabilities"])
		}
	}
}

// rawExchanges are the exchanges of TestRawJSONRPCExchange, each with a golden transcript.
func rawExchanges() []exchange {
	return []exchange{
		{name: "initialize_2024-11-05", body: initialize("2024-11-05"), check: expectVersion("2024-11-05")},
		{name: "initialize_2025-03-26", body: initialize("2025-03-26"), check: expectVersion("2025-03-26")},
		{name: "initialize_2025-06-18", body: initialize("2025-06-18"), check: expectVersion("2025-06-18")},
		{name: "initialize_2025-11-25", body: initialize("2025-11-25"), check: expectVersion("2025-11-25")},
		{name: "initialize_unknown_version", body: initialize("2099-01-01"), check: expectVersion(LatestProtocolVersion)},
		{name: "initialize_modern_version", body: initialize("2026-07-28"), check: expectVersion(LatestProtocolVersion)},
		{
			name: "initialize_without_params", body: `{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "1", codeInvalidParams)
			},
		},
		{
			name: "initialize_with_mistyped_params", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "1", codeInvalidParams)
			},
		},
		{
			name: "initialize_with_mistyped_client_info", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":7}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "1", codeInvalidParams)
			},
		},
		{
			name: "initialize_with_mistyped_capabilities", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":"x","clientInfo":{"name":"a","version":"1"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "1", codeInvalidParams)
			},
		},
		{name: "notification_initialized", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, check: expectEmpty202},
		{name: "notification_cancelled", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, check: expectEmpty202},
		{name: "client_response", body: `{"jsonrpc":"2.0","id":"s1","result":{}}`, check: expectEmpty202},
		{
			name: "ping", body: `{"jsonrpc":"2.0","id":"p1","method":"ping"}`,
			headers: map[string]string{"Mcp-Protocol-Version": "2025-06-18"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				if res := expectResult(t, status, h, body, `"p1"`); len(res) != 0 {
					t.Errorf("ping result %v, want {}", res)
				}
			},
		},
		{
			name: "ping_without_handshake_or_header", body: `{"jsonrpc":"2.0","id":12.5e1,"method":"ping","params":{}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				// The id is echoed exactly as written.
				expectResult(t, status, h, body, "12.5e1")
			},
		},
		{
			name: "tools_list", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			headers: map[string]string{"Mcp-Protocol-Version": "2024-11-05"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				res := expectResult(t, status, h, body, "2")
				tools, _ := res["tools"].([]any)
				if len(tools) != 5 {
					t.Errorf("%d tools, want 5", len(tools))
				}
				// The SDK's 2026-07-28 caching hints are not in a 2024-11-05 answer.
				for _, k := range []string{"ttlMs", "cacheScope"} {
					if _, ok := res[k]; ok {
						t.Errorf("the result has %s, a 2026-07-28 member: %s", k, body)
					}
				}
			},
		},
		{
			name: "tools_list_with_modern_meta", body: `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": "resources/list"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				// Modern metadata and headers are ignored, never answered with -32020..-32022.
				expectResult(t, status, h, body, "2")
			},
		},
		{
			name: "unknown_method", body: `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "3", codeMethodNotFound)
			},
		},
		{
			name: "server_discover", body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			headers: map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "1", codeMethodNotFound)
			},
		},
		{
			name: "malformed_json", body: `{"jsonrpc":"2.0","id":4,"method":`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusBadRequest, "null", codeParseError)
			},
		},
		{
			name: "empty_body", body: "",
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusBadRequest, "null", codeParseError)
			},
		},
		{
			name: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				msg := expectError(t, status, h, body, http.StatusBadRequest, "null", codeInvalidRequest)
				if !strings.Contains(msg, "batching is not supported") {
					t.Errorf("message %q", msg)
				}
			},
		},
		{
			name: "not_jsonrpc_2", body: `{"jsonrpc":"1.0","id":5,"method":"ping"}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusBadRequest, "5", codeInvalidRequest)
			},
		},
		{
			name: "null_id", body: `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusBadRequest, "null", codeInvalidRequest)
			},
		},
		{
			name: "unsupported_protocol_version_header", body: `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`,
			headers: map[string]string{"Mcp-Protocol-Version": "2099-01-01"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusBadRequest, "6", codeInvalidRequest)
			},
		},
		{
			name: "get", method: http.MethodGet, headers: map[string]string{"Accept": "text/event-stream"},
			check: func(t *testing.T, status int, h http.Header, _ []byte) {
				if status != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
					t.Errorf("got %d Allow %q, want 405 Allow POST", status, h.Get("Allow"))
				}
			},
		},
		{
			name: "delete", method: http.MethodDelete, headers: map[string]string{"Mcp-Session-Id": "abc"},
			check: func(t *testing.T, status int, h http.Header, _ []byte) {
				if status != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
					t.Errorf("got %d Allow %q, want 405 Allow POST", status, h.Get("Allow"))
				}
			},
		},
		{
			name: "session_id_sent_is_ignored", body: `{"jsonrpc":"2.0","id":7,"method":"ping"}`,
			headers: map[string]string{"Mcp-Session-Id": "from-another-process", "Accept": "application/json"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectResult(t, status, h, body, "7")
			},
		},
		{
			name: "tools_call", body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "8")
				if isError || !strings.Contains(text, `"sales"`) || strings.Contains(text, "payroll") {
					t.Errorf("text %q isError %v", text, isError)
				}
			},
		},
		{
			name: "tools_call_bad_arguments", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"load_storage_dataset","arguments":{"name":"sales","limit":0,"extra":true}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "9")
				if !isError || !strings.HasPrefix(text, "Error: invalid arguments for tool 'load_storage_dataset': ") {
					t.Errorf("text %q isError %v", text, isError)
				}
			},
		},
		{
			name: "tools_call_missing_required", body: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"query_data","arguments":{"sql":"SELECT 1"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "10")
				if !isError || !strings.Contains(text, "dataset") {
					t.Errorf("text %q isError %v", text, isError)
				}
			},
		},
		{
			name: "tools_call_arguments_not_object", body: `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"query_schema","arguments":"sales"}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "11", codeInvalidParams)
			},
		},
		{
			name: "tools_call_without_name", body: `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "12", codeInvalidParams)
			},
		},
		{
			name: "tools_call_unknown_tool", body: `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"agent_spawn","arguments":{"purpose":"x"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusOK, "13", codeInvalidParams)
			},
		},
		{
			name: "tools_call_not_owned", body: `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"query_data","arguments":{"sql":"SELECT * FROM payroll","dataset":"payroll"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "14")
				if !isError || text != "Error: dataset 'payroll' is not owned by the caller" {
					t.Errorf("text %q isError %v", text, isError)
				}
			},
		},
		{
			name: "tools_call_full_name", body: `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"load_storage_dataset","arguments":{"name":"tenant/` + accountA.String() + `/sales"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "17")
				if isError || !strings.HasPrefix(text, "Loaded dataset 'sales' (tenant/"+accountA.String()+"/sales): ") {
					t.Errorf("text %q isError %v", text, isError)
				}
			},
		},
		{
			name: "tools_call_not_owned_full_name", body: `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"query_data","arguments":{"sql":"SELECT * FROM payroll","dataset":"tenant/` + accountB.String() + `/payroll"}}}`,
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				text, isError := expectToolResult(t, status, h, body, "18")
				if want := "Error: dataset 'tenant/" + accountB.String() + "/payroll' is not owned by the caller"; !isError || text != want {
					t.Errorf("text %q isError %v, want %q", text, isError, want)
				}
			},
		},
		{
			name: "unauthenticated", body: `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`,
			headers: map[string]string{"Authorization": ""},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				// The refused request's id, as a JSON-RPC response carries it (h4: it was null).
				msg := expectError(t, status, h, body, http.StatusUnauthorized, "15", codeUnauthenticated)
				if msg != "unauthenticated: no verified caller: send an API key as 'Authorization: Bearer <key>'" {
					t.Errorf("message %q", msg)
				}
			},
		},
		{
			name: "revoked_key", body: `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"list_storage_datasets"}}`,
			headers: map[string]string{"Authorization": "Bearer revoked"},
			check: func(t *testing.T, status int, h http.Header, body []byte) {
				expectError(t, status, h, body, http.StatusUnauthorized, "16", codeUnauthenticated)
			},
		},
	}
}
