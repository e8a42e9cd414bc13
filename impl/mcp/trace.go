package mcp

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/telemetry"
	"github.com/tollgate/tollgate/impl/tool"
)

// Tracing of tool calls (issue 20). Every tools/call is an INTERNAL span named
// "execute_tool {tool}" following the OpenTelemetry GenAI conventions, a child of the span in
// the request's context (the gateway's server span for POST /api/mcp). A call whose result is
// an error (isError) records why in error.type and ends the span with an error status. The
// arguments and the result are never recorded.

// tracerName is the instrumentation scope of the MCP endpoint's spans.
const tracerName = "github.com/tollgate/tollgate/impl/mcp"

// The attributes of an execute_tool span.
const (
	attrRPCMethod     = attribute.Key("mcp.method.name")
	attrRPCRequestID  = attribute.Key("jsonrpc.request.id")
	attrRPCStatusCode = attribute.Key("rpc.response.status_code")
	methodToolsCall   = "tools/call"
	errorToolError    = "tool_error"
	errorInvalidArgs  = "invalid_arguments"
	errorInternal     = "internal"
	errorCancelled    = "cancelled"
	errorUnauthorized = "unauthenticated"
)

// rpcIDKey carries the JSON-RPC id of the request being answered (as its JSON text).
type rpcIDKey struct{}

// rpcIDText is a JSON-RPC id as span attributes carry it: a string id's text, a number's digits.
func rpcIDText(id json.RawMessage) string {
	var text string
	if json.Unmarshal(id, &text) == nil {
		return text
	}
	return string(id)
}

// startToolSpan starts the execute_tool span of a call of the tool named name, described by
// description (gen_ai.tool.description, which the conventions recommend). When the call's
// params._meta carries a W3C traceparent (an MCP client continuing its own trace), the span is
// a child of that context and links to the request's span, as the conventions for MCP servers
// ask (trial h8 D14: the client's trace was ignored); otherwise it is a child of the request's.
func startToolSpan(ctx context.Context, name, description string, meta map[string]any) (context.Context, trace.Span) {
	var links []trace.Link
	if tp, ok := meta["traceparent"].(string); ok && tp != "" {
		carrier := propagation.MapCarrier{"traceparent": tp}
		if ts, ok := meta["tracestate"].(string); ok {
			carrier["tracestate"] = ts
		}
		if remote := telemetry.Extract(ctx, carrier); trace.SpanContextFromContext(remote).IsValid() {
			links = append(links, trace.LinkFromContext(ctx))
			ctx = remote
		}
	}
	attrs := []attribute.KeyValue{
		telemetry.GenAIOperationName.String(telemetry.OperationExecuteTool), telemetry.GenAIToolName.String(name), telemetry.GenAIToolType.String(telemetry.ToolTypeFunction),
		attrRPCMethod.String(methodToolsCall),
	}
	if description != "" {
		attrs = append(attrs, telemetry.GenAIToolDescription.String(description))
	}
	if id, ok := ctx.Value(rpcIDKey{}).(string); ok && id != "" {
		attrs = append(attrs, attrRPCRequestID.String(id))
	}
	if p, ok := auth.FromContext(ctx); ok {
		attrs = append(attrs, telemetry.AttrAccount.String(p.AccountID.String()))
		if p.KeyID != uuid.Nil {
			attrs = append(attrs, telemetry.AttrKey.String(p.KeyID.String()))
		}
	}
	return otel.Tracer(tracerName).Start(ctx, telemetry.OperationExecuteTool+" "+name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// endToolSpan ends a tool call's span with its outcome: errType is empty for a result that is
// not an error, else what kind of failure it was (error.type).
func endToolSpan(span trace.Span, res tool.Result, errType string) {
	if res.IsError {
		if errType == "" {
			errType = errorToolError
		}
		span.SetAttributes(telemetry.ErrorType.String(errType))
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}

// noteRPCError says on the request's span (the gateway's server span for POST /api/mcp) that
// the JSON-RPC request failed before or instead of a tool's run: the method, the request id and
// the JSON-RPC error code, as error.type and as rpc.response.status_code (which the MCP
// conventions require when the response carries an error code), with an error status, as the
// conventions for MCP servers ask. Trial h8 D14: an unknown tool or bad params left a trace that
// said nothing.
func noteRPCError(ctx context.Context, method string, id json.RawMessage, code int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	c := strconv.FormatInt(code, 10)
	attrs := []attribute.KeyValue{telemetry.ErrorType.String(c), attrRPCStatusCode.String(c)}
	if method != "" {
		attrs = append(attrs, attrRPCMethod.String(method))
	}
	if len(id) > 0 && string(id) != "null" {
		attrs = append(attrs, attrRPCRequestID.String(rpcIDText(id)))
	}
	span.SetAttributes(attrs...)
	span.SetStatus(codes.Error, "JSON-RPC error "+c)
}
