package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/tool"
)

// recordSpans makes the global tracer provider one that records every span in memory, for the
// rest of the test, and the attributes each span had when it started (by span id).
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *startAttributes) {
	t.Helper()
	rec, started := tracetest.NewSpanRecorder(), &startAttributes{attrs: map[trace.SpanID]map[attribute.Key]string{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSpanProcessor(started))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec, started
}

// startAttributes is a span processor that keeps the attributes of each span as it starts:
// what a sampler or a processor's OnStart can read of it.
type startAttributes struct {
	mu    sync.Mutex
	attrs map[trace.SpanID]map[attribute.Key]string
}

func (s *startAttributes) OnStart(_ context.Context, sp sdktrace.ReadWriteSpan) {
	m := map[attribute.Key]string{}
	for _, kv := range sp.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	s.mu.Lock()
	s.attrs[sp.SpanContext().SpanID()] = m
	s.mu.Unlock()
}

func (s *startAttributes) of(sp sdktrace.ReadOnlySpan) map[attribute.Key]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attrs[sp.SpanContext().SpanID()]
}

func (*startAttributes) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*startAttributes) Shutdown(context.Context) error   { return nil }
func (*startAttributes) ForceFlush(context.Context) error { return nil }

// withServerSpan stands in for the gateway's edge, which starts the server span of every API
// request before the handler runs.
func withServerSpan(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := otel.Tracer("test").Start(r.Context(), "POST /api/mcp", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.Emit()
	}
	return out
}

// mcpSpan returns, of the spans ended by one request, its gateway's server span and the one
// other span, the MCP span, failing unless there are exactly those two.
func mcpSpan(t *testing.T, ended []sdktrace.ReadOnlySpan) (server, rpc sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range ended {
		if s.Name() == "POST /api/mcp" {
			server = s
		} else {
			rpc = s
		}
	}
	if server == nil || rpc == nil || len(ended) != 2 {
		t.Fatalf("spans %v, want the server span and one MCP span", names(ended))
	}
	return server, rpc
}

// TestMCPRequestsAreMCPServerSpans: after the OpenTelemetry conventions for MCP servers, every
// JSON-RPC request or notification is one SERVER span named after its method ("tools/call
// {tool}" for a tool call) under the request's server span, started with its attributes (the
// method, the JSON-RPC id, the protocol version, the transport, the caller's account and key;
// for a tool call the GenAI execute_tool attributes, the tool's type and description among
// them). A failed tool call carries error.type and an error status; the arguments and the
// result are not recorded. Before, a tool call was an INTERNAL "execute_tool {tool}" span
// without the protocol version or the transport, and other methods had no span.
func TestMCPRequestsAreMCPServerSpans(t *testing.T) {
	rec, started := recordSpans(t)
	echo := tool.Tool{
		Name: "echo", Description: "Answers its word, or fails when told to.", Annotations: tool.ReadOnlyAnnotations("Echo"),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"],"additionalProperties":false}`),
		Handler: func(ctx context.Context, p auth.Principal, args json.RawMessage) (tool.Result, error) {
			var a struct{ Word string }
			_ = json.Unmarshal(args, &a)
			if a.Word == "fail" {
				return tool.Result{}, tool.Errorf("the engine is busy")
			}
			if a.Word == "crash" {
				return tool.Result{}, errors.New("disk on fire")
			}
			return tool.TextResult("secret answer " + a.Word), nil
		},
	}
	mux := http.NewServeMux()
	mux.Handle("/api/mcp", withServerSpan(withPrincipal(NewHandler(Options{Tools: []tool.Tool{echo}, Version: "test"}))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + "/api/mcp"
	common := map[attribute.Key]string{
		"mcp.protocol.version": "2025-03-26", "network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1",
		"tollgate.account.id": accountA.String(), "tollgate.key.id": keys["x"].KeyID.String(),
	}

	for _, c := range []struct {
		word, errType string
		args          any
	}{
		{"hello", "", map[string]any{"word": "hello"}},
		{"fail", "tool_error", map[string]any{"word": "fail"}},
		{"crash", "internal", map[string]any{"word": "crash"}},
		{"bad", "invalid_arguments", map[string]any{"word": 7}},
	} {
		before := len(rec.Ended())
		callTool(t, url, "x", "echo", c.args)
		server, call := mcpSpan(t, rec.Ended()[before:])
		if call.Name() != "tools/call echo" {
			t.Errorf("%s: span %q, want tools/call echo", c.word, call.Name())
		}
		if call.Parent().SpanID() != server.SpanContext().SpanID() || call.SpanContext().TraceID() != server.SpanContext().TraceID() {
			t.Errorf("%s: the tools/call span is not a child of the server span", c.word)
		}
		if call.SpanKind() != trace.SpanKindServer {
			t.Errorf("%s: kind %v, want server", c.word, call.SpanKind())
		}
		want := map[attribute.Key]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.type": "function",
			"mcp.method.name": "tools/call", "jsonrpc.request.id": "1", "gen_ai.tool.description": echo.Description,
		}
		maps.Copy(want, common)
		a, atStart := attrs(call), started.of(call)
		for k, v := range want {
			if atStart[k] != v {
				t.Errorf("%s: %s = %q when the span started, want %q", c.word, k, atStart[k], v)
			}
		}
		if c.errType != "" && a["error.type"] != c.errType {
			t.Errorf("%s: error.type %q, want %q", c.word, a["error.type"], c.errType)
		}
		if _, ok := a["error.type"]; ok && c.errType == "" {
			t.Errorf("%s: error.type %q on a call that succeeded", c.word, a["error.type"])
		}
		if wantCode := map[bool]codes.Code{true: codes.Error, false: codes.Unset}[c.errType != ""]; call.Status().Code != wantCode {
			t.Errorf("%s: status %v, want %v", c.word, call.Status().Code, wantCode)
		}
		for k, v := range a {
			if v == "secret answer hello" || k == "gen_ai.tool.call.arguments" || k == "gen_ai.tool.call.result" {
				t.Errorf("%s: the span records the call's content (%s)", c.word, k)
			}
		}
	}

	// Other methods are spans of their own, named after the method, without the GenAI tool
	// attributes; a notification's has no JSON-RPC id; initialize's protocol version is the
	// one it agrees on.
	for _, c := range []struct{ body, name, id, version string }{
		{`{"jsonrpc":"2.0","id":"l1","method":"tools/list"}`, "tools/list", "l1", "2025-03-26"},
		{`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, "initialize", "7", "2025-06-18"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", "", "2025-03-26"},
	} {
		before := len(rec.Ended())
		post(t, url, "x", c.body)
		_, sp := mcpSpan(t, rec.Ended()[before:])
		a := started.of(sp)
		if sp.Name() != c.name || sp.SpanKind() != trace.SpanKindServer || a["mcp.method.name"] != c.name || a["jsonrpc.request.id"] != c.id ||
			a["mcp.protocol.version"] != c.version || a["network.transport"] != "tcp" || sp.Status().Code != codes.Unset {
			t.Errorf("%s: span %q (%v, %v) started with %v", c.name, sp.Name(), sp.SpanKind(), sp.Status(), a)
		}
		if _, ok := a["gen_ai.operation.name"]; ok {
			t.Errorf("%s: gen_ai.operation.name on a span that runs no tool", c.name)
		}
	}

	// A call whose params._meta carries the client's traceparent continues the client's trace:
	// its span is a child of the client's span and links to the request's (trial h8 D14: the
	// client's context was ignored).
	{
		before := len(rec.Ended())
		post(t, url, "x", `{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":{"name":"echo","arguments":{"word":"hi"},`+
			`"_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}}}`)
		server, call := mcpSpan(t, rec.Ended()[before:])
		if call.SpanContext().TraceID().String() != "11111111111111111111111111111111" || call.Parent().SpanID().String() != "2222222222222222" ||
			len(call.Links()) != 1 || call.Links()[0].SpanContext.SpanID() != server.SpanContext().SpanID() {
			t.Errorf("a call with the client's traceparent: trace %s, parent %s, links %v", call.SpanContext().TraceID(), call.Parent().SpanID(), call.Links())
		}
	}

	// A JSON-RPC error (an unknown tool, answered by the SDK; an unknown method; bad params)
	// says so on the request's MCP span: the code as error.type and as
	// rpc.response.status_code (required by the MCP conventions when the response carries an
	// error code), an error status described by the error's message (trial h8 D14: the trace
	// said nothing).
	for _, c := range []struct{ body, name, code string }{
		{`{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, "tools/call no_such_tool", "-32602"},
		{`{"jsonrpc":"2.0","id":"u2","method":"resources/list"}`, "resources/list", "-32601"},
		{`{"jsonrpc":"2.0","id":"u3","method":"tools/call","params":{"name":"echo","arguments":[1]}}`, "tools/call echo", "-32602"},
	} {
		before := len(rec.Ended())
		post(t, url, "x", c.body)
		_, sp := mcpSpan(t, rec.Ended()[before:])
		a := attrs(sp)
		if sp.Name() != c.name || a["error.type"] != c.code || a["rpc.response.status_code"] != c.code || a["jsonrpc.request.id"] == "" ||
			sp.Status().Code != codes.Error || sp.Status().Description == "" {
			t.Errorf("%s: the MCP span says %v (status %v), want error.type %s", c.name, a, sp.Status(), c.code)
		}
	}
}

// TestMCPSpansCostNothingUntraced: a request with no span in its context (the gateway's
// tracing off) makes no MCP span, even with a tracer provider at hand.
func TestMCPSpansCostNothingUntraced(t *testing.T) {
	rec, _ := recordSpans(t)
	hello := tool.Tool{Name: "hello", Description: "Says hello.", Annotations: tool.ReadOnlyAnnotations("Hello"), InputSchema: emptyObject,
		Handler: func(context.Context, auth.Principal, json.RawMessage) (tool.Result, error) {
			return tool.TextResult("hello"), nil
		}}
	srv := httptest.NewServer(withPrincipal(NewHandler(Options{Tools: []tool.Tool{hello}, Version: "test"})))
	t.Cleanup(srv.Close)
	post(t, srv.URL, "x", `{"jsonrpc":"2.0","id":"l1","method":"tools/list"}`)
	callTool(t, srv.URL, "x", "hello", map[string]any{})
	if got := names(rec.Ended()); len(got) != 0 {
		t.Errorf("an untraced request made spans %v", got)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// TestMCPServerOperationMetric: with metrics, every request the endpoint serves after reading
// its method is one observation of mcp.server.operation.duration, traced or not: a tool call's
// with its tool, a failed one's with its error type (the tool result's kind, or the JSON-RPC
// code, then also rpc.response.status_code). A method, tool or protocol version the endpoint
// does not know is _OTHER or none, so that a client's text cannot grow the labels.
func TestMCPServerOperationMetric(t *testing.T) {
	m := metrics.New()
	echo := tool.Tool{Name: "echo", Description: "Fails when told to.", Annotations: tool.ReadOnlyAnnotations("Echo"),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}}}`),
		Handler: func(_ context.Context, _ auth.Principal, args json.RawMessage) (tool.Result, error) {
			if strings.Contains(string(args), "fail") {
				return tool.Result{}, tool.Errorf("told to")
			}
			return tool.TextResult("ok"), nil
		}}
	srv := httptest.NewServer(withPrincipal(NewHandler(Options{Tools: []tool.Tool{echo}, Version: "test", Metrics: m})))
	t.Cleanup(srv.Close)
	callTool(t, srv.URL, "x", "echo", map[string]any{"word": "hi"})
	callTool(t, srv.URL, "x", "echo", map[string]any{"word": "fail"})
	post(t, srv.URL, "x", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"made_up_tool_42","arguments":{}}}`)
	post(t, srv.URL, "x", `{"jsonrpc":"2.0","id":3,"method":"made/up/method"}`)
	post(t, srv.URL, "x", `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	text := w.Body.String()
	const series = `mcp_server_operation_duration_seconds_count{error_type="%s",gen_ai_operation_name="%s",gen_ai_tool_name="%s",mcp_method_name="%s",mcp_protocol_version="2025-03-26",rpc_response_status_code="%s"} 1`
	for _, want := range []string{
		fmt.Sprintf(series, "", "execute_tool", "echo", "tools/call", ""),
		fmt.Sprintf(series, "tool_error", "execute_tool", "echo", "tools/call", ""),
		fmt.Sprintf(series, "-32602", "", "", "tools/call", "-32602"),
		fmt.Sprintf(series, "-32601", "", "", "_OTHER", "-32601"),
		fmt.Sprintf(series, "", "", "", "tools/list", ""),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
	if strings.Contains(text, "made_up") {
		t.Error("a client's made-up name is a label")
	}
}
