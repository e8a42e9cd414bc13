package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMCPOperationMetric: each MCP operation is one observation of
// mcp_server_operation_duration_seconds, labelled as the conventions' mcp.server.operation.duration
// (a tool call's with its tool and gen_ai_operation_name execute_tool, a failed one's with its
// error type and JSON-RPC code), and observing a label set seen before allocates nothing.
func TestMCPOperationMetric(t *testing.T) {
	m := New()
	m.ObserveMCP(MCPOperation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-06-18", Duration: 20 * time.Millisecond})
	m.ObserveMCP(MCPOperation{Method: "tools/list", ProtocolVersion: "2025-06-18", ErrorType: "-32602", StatusCode: "-32602", Duration: time.Millisecond})
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_operation_name="execute_tool",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-06-18",rpc_response_status_code=""} 1`,
		`mcp_server_operation_duration_seconds_count{error_type="-32602",gen_ai_operation_name="",gen_ai_tool_name="",mcp_method_name="tools/list",mcp_protocol_version="2025-06-18",rpc_response_status_code="-32602"} 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	op := MCPOperation{Method: "tools/call", Tool: "echo", ProtocolVersion: "2025-06-18", Duration: time.Millisecond}
	if n := testing.AllocsPerRun(100, func() { m.ObserveMCP(op) }); n != 0 {
		t.Errorf("ObserveMCP: %v allocations", n)
	}
}
