package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// recordSpans makes the global tracer provider one that records every span in memory, for the
// rest of the test.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return rec
}

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

// TestToolCallsAreExecuteToolSpans: every tools/call is one INTERNAL span "execute_tool {tool}"
// under the request's server span, with the GenAI attributes (the tool's description among
// them), the caller's account and key and
// the JSON-RPC id; a failed call carries error.type and an error status, and the arguments and
// the result are not recorded.
func TestToolCallsAreExecuteToolSpans(t *testing.T) {
	rec := recordSpans(t)
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
		ended := rec.Ended()[before:]
		var server, exec sdktrace.ReadOnlySpan
		for _, s := range ended {
			switch s.Name() {
			case "POST /api/mcp":
				server = s
			case "execute_tool echo":
				exec = s
			}
		}
		if server == nil || exec == nil || len(ended) != 2 {
			t.Fatalf("%s: spans %v, want the server span and execute_tool echo", c.word, names(ended))
		}
		if exec.Parent().SpanID() != server.SpanContext().SpanID() || exec.SpanContext().TraceID() != server.SpanContext().TraceID() {
			t.Errorf("%s: execute_tool is not a child of the server span", c.word)
		}
		if exec.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s: kind %v, want internal", c.word, exec.SpanKind())
		}
		a := attrs(exec)
		want := map[attribute.Key]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.type": "function",
			"mcp.method.name": "tools/call", "jsonrpc.request.id": "1", "gen_ai.tool.description": echo.Description,
			"tollgate.account.id": accountA.String(), "tollgate.key.id": keys["x"].KeyID.String(),
		}
		if c.errType != "" {
			want["error.type"] = c.errType
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s: %s = %q, want %q", c.word, k, a[k], v)
			}
		}
		if _, ok := a["error.type"]; ok && c.errType == "" {
			t.Errorf("%s: error.type %q on a call that succeeded", c.word, a["error.type"])
		}
		if wantCode := map[bool]codes.Code{true: codes.Error, false: codes.Unset}[c.errType != ""]; exec.Status().Code != wantCode {
			t.Errorf("%s: status %v, want %v", c.word, exec.Status().Code, wantCode)
		}
		for k, v := range a {
			if v == "secret answer hello" || k == "gen_ai.tool.call.arguments" || k == "gen_ai.tool.call.result" {
				t.Errorf("%s: the span records the call's content (%s)", c.word, k)
			}
		}
	}

	// Methods other than tools/call make no execute_tool span.
	before := len(rec.Ended())
	post(t, url, "x", `{"jsonrpc":"2.0","id":"l1","method":"tools/list"}`)
	if got := names(rec.Ended()[before:]); len(got) != 1 || got[0] != "POST /api/mcp" {
		t.Errorf("tools/list made spans %v, want the server span alone", got)
	}

	// A call whose params._meta carries the client's traceparent continues the client's trace:
	// its execute_tool span is a child of the client's span and links to the request's
	// (trial h8 D14: the client's context was ignored).
	{
		before := len(rec.Ended())
		post(t, url, "x", `{"jsonrpc":"2.0","id":"m1","method":"tools/call","params":{"name":"echo","arguments":{"word":"hi"},`+
			`"_meta":{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}}}`)
		var server, exec sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended()[before:] {
			switch sp.Name() {
			case "POST /api/mcp":
				server = sp
			case "execute_tool echo":
				exec = sp
			}
		}
		if server == nil || exec == nil {
			t.Fatalf("spans %v", names(rec.Ended()[before:]))
		}
		if exec.SpanContext().TraceID().String() != "11111111111111111111111111111111" || exec.Parent().SpanID().String() != "2222222222222222" ||
			len(exec.Links()) != 1 || exec.Links()[0].SpanContext.SpanID() != server.SpanContext().SpanID() {
			t.Errorf("a call with the client's traceparent: trace %s, parent %s, links %v", exec.SpanContext().TraceID(), exec.Parent().SpanID(), exec.Links())
		}
	}

	// A JSON-RPC error (an unknown tool, answered by the SDK; an unknown method) says so on the
	// server span: the method, the request id and the code as error.type and as
	// rpc.response.status_code (required by the MCP conventions when the response carries an
	// error code), an error status (trial h8 D14: the trace said nothing).
	for _, c := range []struct{ body, method, code string }{
		{`{"jsonrpc":"2.0","id":"u1","method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, "tools/call", "-32602"},
		{`{"jsonrpc":"2.0","id":"u2","method":"resources/list"}`, "resources/list", "-32601"},
	} {
		before := len(rec.Ended())
		post(t, url, "x", c.body)
		ended := rec.Ended()[before:]
		if len(ended) != 1 || ended[0].Name() != "POST /api/mcp" {
			t.Fatalf("%s: spans %v, want the server span", c.method, names(ended))
		}
		a := attrs(ended[0])
		if a["error.type"] != c.code || a["rpc.response.status_code"] != c.code || a["mcp.method.name"] != c.method ||
			a["jsonrpc.request.id"] == "" || ended[0].Status().Code != codes.Error {
			t.Errorf("%s: the server span says %v (status %v), want error.type %s", c.method, a, ended[0].Status(), c.code)
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
