package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// mcpServer holds mcp.server.operation.duration of the OpenTelemetry conventions for MCP, and
// caches its children per label set.
type mcpServer struct {
	duration *prometheus.HistogramVec
	children sync.Map // MCPOperation without its duration → prometheus.Observer
}

// mcpBuckets are the conventions' advice for the MCP operation durations.
var mcpBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// MCPOperation is one JSON-RPC request or notification the MCP endpoint served. Its labels must
// be bounded: the caller maps a method, tool or version it does not know to "_OTHER" or "".
type MCPOperation struct {
	// Method is mcp.method.name; Tool gen_ai.tool.name ("" for a method that runs no tool, whose
	// gen_ai.operation.name is then left empty too, as the conventions ask); ProtocolVersion
	// mcp.protocol.version.
	Method, Tool, ProtocolVersion string
	// ErrorType is error.type when the request failed (a JSON-RPC error's code, or a tool
	// result's error kind), "" otherwise; StatusCode rpc.response.status_code, the JSON-RPC
	// error code of an answer that carried one ("" otherwise).
	ErrorType, StatusCode string
	// Duration is the time from reading the request's method to its answer.
	Duration time.Duration
}

func newMCPServer(reg *prometheus.Registry) *mcpServer {
	s := &mcpServer{duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mcp_server_operation_duration_seconds", Help: "Duration of the MCP requests and notifications the MCP endpoint served (mcp.server.operation.duration).",
		Buckets: mcpBuckets,
	}, []string{"mcp_method_name", "gen_ai_tool_name", "gen_ai_operation_name", "mcp_protocol_version", "error_type", "rpc_response_status_code"})}
	reg.MustRegister(s.duration)
	return s
}

// ObserveMCP records one MCP operation. Once its label set has been seen it allocates nothing.
func (m *Metrics) ObserveMCP(op MCPOperation) {
	d := op.Duration
	op.Duration = 0
	o, ok := m.mcp.children.Load(op)
	if !ok {
		operation := ""
		if op.Tool != "" {
			operation = "execute_tool"
		}
		o, _ = m.mcp.children.LoadOrStore(op, m.mcp.duration.WithLabelValues(op.Method, op.Tool, operation, op.ProtocolVersion, op.ErrorType, op.StatusCode))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}
