package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/metrics"
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

	// read is params' members the span and the metric read, decoded once (readParams).
	read     rpcParams
	readDone bool
}

// readParams decodes the members of call's params its span and its metric read, once for both.
func (call *rpcCall) readParams() rpcParams {
	if !call.readDone {
		call.readDone = true
		if isObject(call.params) {
			_ = json.Unmarshal(call.params, &call.read)
		}
	}
	return call.read
}

// startRPCSpan starts the MCP server span of call, received in r. Without a span in r's context
// (tracing off) it returns r's context and a span that records nothing, having done nothing.
func (h *handler) startRPCSpan(r *http.Request, call *rpcCall) (context.Context, trace.Span) {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	p := call.readParams()
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
	name, attrs := call.method, h.rpcAttributes(r, *call, p)
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

// rpcOutcome is how one JSON-RPC request ended, for its span and the MCP server metric: a
// JSON-RPC error's code, or the kind of a tool's error result. The request's context carries it
// (outcomeKey), for the tool handler the SDK runs.
type rpcOutcome struct {
	span          trace.Span
	errType, code string
}

// outcomeKey carries a request's *rpcOutcome.
type outcomeKey struct{}

// outcomeOf returns the outcome carried by ctx (a fresh one, noted nowhere, when it carries none).
func outcomeOf(ctx context.Context) *rpcOutcome {
	if o, ok := ctx.Value(outcomeKey{}).(*rpcOutcome); ok {
		return o
	}
	return &rpcOutcome{span: trace.SpanFromContext(ctx)}
}

// toolError notes that the tool call's result is an error, of kind errType (error.type:
// tool_error for the tool's own, invalid_arguments, internal, ...), on its span too.
func (o *rpcOutcome) toolError(errType string) {
	o.errType = errType
	if o.span.IsRecording() {
		o.span.SetAttributes(telemetry.ErrorType.String(errType))
		o.span.SetStatus(codes.Error, errType)
	}
}

// rpcError notes that the request was answered with a JSON-RPC error of code, whose message is
// msg. Its span says so: the code as error.type and as rpc.response.status_code (which the MCP
// conventions require when the response carries an error code), and an error status described
// by the message, as the conventions ask. Trial h8 D14: an unknown tool or bad params left a
// trace that said nothing.
func (o *rpcOutcome) rpcError(code int64, msg string) {
	c := strconv.FormatInt(code, 10)
	o.errType, o.code = c, c
	if o.span.IsRecording() {
		o.span.SetAttributes(telemetry.ErrorType.String(c), attrRPCStatusCode.String(c))
		o.span.SetStatus(codes.Error, msg)
	}
}

// observe records the request in the MCP server metric, when the handler has metrics: its
// method, tool and protocol version bounded to those the endpoint knows (others are _OTHER, an
// unknown tool none), its outcome and its duration since start.
func (h *handler) observe(call *rpcCall, o *rpcOutcome, start time.Time) {
	if h.metrics == nil {
		return
	}
	op := metrics.MCPOperation{Method: call.method, ProtocolVersion: call.version, ErrorType: o.errType, StatusCode: o.code, Duration: time.Since(start)}
	if !slices.Contains(knownMethods, op.Method) {
		op.Method = "_OTHER"
	}
	if !slices.Contains(protocolVersions, op.ProtocolVersion) {
		op.ProtocolVersion = "_OTHER"
	}
	if call.method == methodToolsCall {
		// Only a registered tool is named, so that a client's text cannot grow the labels.
		if name := call.readParams().Name; h.tools[name] != nil {
			op.Tool = name
		}
	}
	h.metrics.ObserveMCP(op)
}

// knownMethods are the mcp.method.name values the MCP conventions list, and server/discover: the
// methods the metric names (any other is _OTHER, so that a client's text cannot grow its labels).
var knownMethods = []string{
	"completion/complete", "elicitation/create", "initialize", "logging/setLevel", "notifications/cancelled",
	"notifications/initialized", "notifications/message", "notifications/progress", "notifications/prompts/list_changed",
	"notifications/resources/list_changed", "notifications/resources/updated", "notifications/roots/list_changed",
	"notifications/tools/list_changed", "ping", "prompts/get", "prompts/list", "resources/list", "resources/read",
	"resources/subscribe", "resources/templates/list", "resources/unsubscribe", "roots/list", "sampling/createMessage",
	"tools/call", "tools/list", "server/discover",
}
