package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// Tracing of the MCP endpoint (issue 20), after the OpenTelemetry semantic conventions for MCP
// servers. Every JSON-RPC request or notification whose method could be read is one SERVER span
// named "{mcp.method.name}", or "tools/call {tool}" for a tool call, under the gateway's server
// span for POST /api/mcp (or under the MCP client's span named by params._meta's traceparent,
// linked to the request's). Its attributes are given when it starts, as the conventions ask of
// the attributes a sampler may read: the method, the JSON-RPC id, the protocol version, the
// transport (tcp, HTTP and its version), the caller's account and key, and for a tool call the
// GenAI execute_tool attributes (gen_ai.operation.name, gen_ai.tool.name, .type and
// .description), the conventions' tool call span and MCP server span being one span. A JSON-RPC
// error puts its code in error.type and rpc.response.status_code with an error status; a tool
// result that is an error (isError) its kind in error.type. Arguments and results are never
// recorded. The endpoint is stateless and issues no session, so no span has mcp.session.id.
//
// While tracing is off (no span in the request's context) none of it runs.

// tracerName is the instrumentation scope of the MCP endpoint's spans.
const tracerName = "github.com/tollgate/tollgate/impl/mcp"

// The attributes of the MCP spans and their values.
const (
	attrRPCMethod        = attribute.Key("mcp.method.name")
	attrRPCRequestID     = attribute.Key("jsonrpc.request.id")
	attrRPCStatusCode    = attribute.Key("rpc.response.status_code")
	attrProtocolVersion  = attribute.Key("mcp.protocol.version")
	attrNetworkTransport = attribute.Key("network.transport")
	attrNetworkProtocol  = attribute.Key("network.protocol.name")
	attrNetworkVersion   = attribute.Key("network.protocol.version")
	methodToolsCall      = "tools/call"
	errorToolError       = "tool_error"
	errorInvalidArgs     = "invalid_arguments"
	errorInternal        = "internal"
	errorCancelled       = "cancelled"
	errorUnauthorized    = "unauthenticated"
)

// rpcParams are the members of a request's params its span reads: a tool call's tool, an
// initialize's protocol version, and the trace context an MCP client puts in _meta.
type rpcParams struct {
	Name            string         `json:"name"`
	ProtocolVersion string         `json:"protocolVersion"`
	Meta            map[string]any `json:"_meta"`
}

// rpcIDText is a JSON-RPC id as span attributes carry it: a string id's text, a number's digits.
func rpcIDText(id json.RawMessage) string {
	var text string
	if json.Unmarshal(id, &text) == nil {
		return text
	}
	return string(id)
}

// rpcCall is one JSON-RPC request (or notification) as its span names it: its method, its id
// (nil for a notification), its raw params and the protocol version it is made under (the
// Mcp-Protocol-Version header's, or the spec's default).
type rpcCall struct {
	method  string
	id      json.RawMessage
	params  json.RawMessage
	version string
}

// startRPCSpan starts the MCP server span of call, received in r. Without a span in r's context
// (tracing off) it returns r's context and a span that records nothing, having done nothing.
func (h *handler) startRPCSpan(r *http.Request, call rpcCall) (context.Context, trace.Span) {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	var p rpcParams
	if isObject(call.params) {
		_ = json.Unmarshal(call.params, &p)
	}
	var links []trace.Link
	if tp, ok := p.Meta["traceparent"].(string); ok && tp != "" {
		// An MCP client tracing its own work: its span is the parent, and the request's (the
		// transport's) a link, as the conventions for MCP servers ask (trial h8 D14: the
		// client's trace was ignored).
		carrier := propagation.MapCarrier{"traceparent": tp}
		if ts, ok := p.Meta["tracestate"].(string); ok {
			carrier["tracestate"] = ts
		}
		if remote := telemetry.Extract(ctx, carrier); trace.SpanContextFromContext(remote).IsValid() {
			links = append(links, trace.LinkFromContext(ctx))
			ctx = remote
		}
	}
	name, attrs := call.method, h.rpcAttributes(r, call, p)
	if call.method == methodToolsCall && p.Name != "" {
		name += " " + p.Name
	}
	return otel.Tracer(tracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// rpcAttributes are the attributes of call's span, all known when it starts.
func (h *handler) rpcAttributes(r *http.Request, call rpcCall, p rpcParams) []attribute.KeyValue {
	version := call.version
	if call.method == "initialize" {
		// The version initialize agrees on: the client's when the endpoint speaks it, else the
		// newest.
		version = LatestProtocolVersion
		if slices.Contains(protocolVersions, p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
	}
	attrs := []attribute.KeyValue{
		attrRPCMethod.String(call.method), attrProtocolVersion.String(version),
		attrNetworkTransport.String("tcp"), attrNetworkProtocol.String("http"),
		attrNetworkVersion.String(httpVersion(r)),
	}
	if call.id != nil {
		attrs = append(attrs, attrRPCRequestID.String(rpcIDText(call.id)))
	}
	if call.method == methodToolsCall && p.Name != "" {
		attrs = append(attrs, telemetry.GenAIOperationName.String(telemetry.OperationExecuteTool), telemetry.GenAIToolName.String(p.Name))
		if t, ok := h.tools[p.Name]; ok {
			attrs = append(attrs, telemetry.GenAIToolType.String(telemetry.ToolTypeFunction), telemetry.GenAIToolDescription.String(t.Description))
		}
	}
	if pr, ok := auth.FromContext(r.Context()); ok {
		attrs = append(attrs, telemetry.AttrAccount.String(pr.AccountID.String()))
		if pr.KeyID != uuid.Nil {
			attrs = append(attrs, telemetry.AttrKey.String(pr.KeyID.String()))
		}
	}
	return attrs
}

// httpVersion is network.protocol.version of r: "1.1", "2", as the conventions write them.
func httpVersion(r *http.Request) string {
	if r.ProtoMinor == 0 && r.ProtoMajor >= 2 {
		return strconv.Itoa(r.ProtoMajor)
	}
	return strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)
}

// noteToolError says on the tool call's span in ctx that its result is an error, of kind
// errType (error.type: tool_error for the tool's own, invalid_arguments, internal, ...).
func noteToolError(ctx context.Context, errType string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.ErrorType.String(errType))
	span.SetStatus(codes.Error, errType)
}

// noteRPCError says on the request's MCP span in ctx that it was answered with a JSON-RPC error
// of code, whose message is msg: the code as error.type and as rpc.response.status_code (which
// the MCP conventions require when the response carries an error code), and an error status
// described by the message, as the conventions ask. Trial h8 D14: an unknown tool or bad params
// left a trace that said nothing.
func noteRPCError(ctx context.Context, code int64, msg string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	c := strconv.FormatInt(code, 10)
	span.SetAttributes(telemetry.ErrorType.String(c), attrRPCStatusCode.String(c))
	span.SetStatus(codes.Error, msg)
}
