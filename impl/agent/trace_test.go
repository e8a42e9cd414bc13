package agent_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/agent"
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

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value.Emit()
	}
	return out
}

// linkOf is the span context of the span's link of the given kind (tollgate.link).
func linkOf(s sdktrace.ReadOnlySpan, kind string) trace.SpanContext {
	for _, l := range s.Links() {
		for _, kv := range l.Attributes {
			if kv.Key == "tollgate.link" && kv.Value.AsString() == kind {
				return l.SpanContext
			}
		}
	}
	return trace.SpanContext{}
}

// TestAgentSessionIsOneTrace: a session is one trace rooted at its invoke_agent span, which
// links to the request that spawned it; every step — including one run by another process
// after the first stopped — is a child of that root with its River job's id and attempt, and
// links to the span that inserted its job (the previous step, or the request that sent the
// message); each tool call is an execute_tool span under its step.
func TestAgentSessionIsOneTrace(t *testing.T) {
	rec := recordSpans(t)
	w := newWorld(t, nil)
	n1 := w.start()
	acme := w.tenant(n1, "acme", 5_000_000)
	tracer := otel.Tracer("test")

	spawnCtx, spawnSpan := tracer.Start(context.Background(), "POST /v1/agents", trace.WithSpanKind(trace.SpanKindServer))
	res, err := n1.gw.Agents.Spawn(spawnCtx, acme.p, "main", "What is the total of the sales? "+script(querySales), "")
	spawnSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, n1.gw.Agents, acme.p, res.SessionID, agent.StateReady)
	n1.stop()

	// The second turn runs on another process.
	n2 := w.start()
	msgCtx, msgSpan := tracer.Start(context.Background(), "POST /v1/agents/main/messages", trace.WithSpanKind(trace.SpanKindServer))
	if _, err := n2.gw.Agents.SendMessage(msgCtx, acme.p, "main", "Thanks. Anything else?", ""); err != nil {
		t.Fatal(err)
	}
	msgSpan.End()
	waitSession(t, n2.gw.Agents, acme.p, res.SessionID, agent.StateReady)
	n2.stop()

	var root sdktrace.ReadOnlySpan
	steps := map[string]sdktrace.ReadOnlySpan{} // by step number
	var tools []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		a := spanAttrs(s)
		switch {
		case s.Name() == "invoke_agent main" && a["tollgate.agent.session_id"] == res.SessionID:
			if root != nil {
				t.Fatal("two invoke_agent spans for one session")
			}
			root = s
		case s.Name() == "agent_step" && a["tollgate.agent.session_id"] == res.SessionID:
			steps[a["tollgate.agent.step"]] = s
		case s.Name() == "execute_tool query_data":
			tools = append(tools, s)
		}
	}
	if root == nil {
		t.Fatal("no invoke_agent span")
	}
	if root.Parent().IsValid() || root.SpanContext().TraceID() == spawnSpan.SpanContext().TraceID() {
		t.Error("invoke_agent is not the root of a trace of its own")
	}
	if linkOf(root, "spawned_by").SpanID() != spawnSpan.SpanContext().SpanID() {
		t.Errorf("invoke_agent links %v, want the spawning request's span", root.Links())
	}
	a := spanAttrs(root)
	if id := a["gen_ai.agent.id"]; id == "" || id == res.SessionID {
		t.Errorf("invoke_agent gen_ai.agent.id = %q, want the slot's id, not the session's (the conversation's)", id)
	}
	// gen_ai.provider.name is required on invoke_agent: the agent is the gateway's own.
	for k, v := range map[attribute.Key]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "tollgate", "gen_ai.conversation.id": res.SessionID,
		"gen_ai.agent.name": "main", "tollgate.account.id": acme.p.AccountID.String(), "tollgate.key.id": acme.p.KeyID.String()} {
		if a[k] != v {
			t.Errorf("invoke_agent %s = %q, want %q", k, a[k], v)
		}
	}

	// Turn 1 is steps 1 (the tool call) and 2 (the answer); turn 2 (the message) is step 3.
	if len(steps) != 3 {
		t.Fatalf("%d step spans, want 3", len(steps))
	}
	for num, s := range steps {
		if s.Parent().SpanID() != root.SpanContext().SpanID() || s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("step %s is not a child of invoke_agent", num)
		}
		a := spanAttrs(s)
		if a["tollgate.river.job_id"] == "" || a["tollgate.river.job_kind"] != "agent_step" || a["tollgate.river.attempt"] != "1" {
			t.Errorf("step %s: job attributes %v", num, a)
		}
		if a["gen_ai.agent.id"] != spanAttrs(root)["gen_ai.agent.id"] || a["gen_ai.conversation.id"] != res.SessionID {
			t.Errorf("step %s: gen_ai.agent.id %q and gen_ai.conversation.id %q, want the invoke_agent span's agent and the session", num, a["gen_ai.agent.id"], a["gen_ai.conversation.id"])
		}
	}
	if linkOf(steps["2"], "enqueued_by").SpanID() != steps["1"].SpanContext().SpanID() {
		t.Error("step 2 does not link to step 1, which inserted its job")
	}
	if linkOf(steps["3"], "enqueued_by").SpanID() != msgSpan.SpanContext().SpanID() {
		t.Error("step 3 does not link to the request that sent the message")
	}
	if got := spanAttrs(steps["3"])["tollgate.agent.turn"]; got != "3" {
		t.Errorf("step 3 is turn %q, want 3", got)
	}
	if len(tools) != 1 || tools[0].Parent().SpanID() != steps["1"].SpanContext().SpanID() {
		t.Fatalf("execute_tool spans %d, want one under step 1", len(tools))
	}
	ta := spanAttrs(tools[0])
	if ta["gen_ai.operation.name"] != "execute_tool" || ta["gen_ai.tool.call.id"] == "" || ta["error.type"] != "" {
		t.Errorf("execute_tool attributes %v", ta)
	}
	// The tool's description, as the model was given it (the conventions recommend it).
	if d := ta["gen_ai.tool.description"]; d == "" || !strings.Contains(d, "dataset") {
		t.Errorf("execute_tool gen_ai.tool.description %q, want query_data's description", d)
	}
}

// TestApprovedSpawnLinksTheRequestThatAskedForIt: a session started by an approved
// agent_spawn is its own trace too, and its invoke_agent span links (spawned_by) to the request
// that asked for the approval, whose traceparent the approval keeps: the approved action's job
// has no span of its own. A request that was not traced leaves no link.
func TestApprovedSpawnLinksTheRequestThatAskedForIt(t *testing.T) {
	rec := recordSpans(t)
	w := newWorld(t, nil)
	n := w.start()
	acme := w.tenant(n, "acme", 5_000_000)
	svc := n.gw.Agents
	ctx := context.Background()

	askCtx, askSpan := otel.Tracer("test").Start(ctx, "execute_tool agent_spawn", trace.WithSpanKind(trace.SpanKindInternal))
	ap, err := svc.RequestSpawn(askCtx, acme.p, agent.SpawnAction{Purpose: "Say hello."})
	askSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resolve(ctx, nil, ap.ID, true, "operator"); err != nil {
		t.Fatal(err)
	}
	got := waitAction(t, svc, acme.p, ap.ID)
	if got.ActionStatus != agent.ActionDone || got.SessionID == "" {
		t.Fatalf("the approved action: %+v", got)
	}
	var root sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "invoke_agent main" && spanAttrs(s)["tollgate.agent.session_id"] == got.SessionID {
			root = s
		}
	}
	if root == nil {
		t.Fatal("no invoke_agent span for the approved session")
	}
	if root.Parent().IsValid() || root.SpanContext().TraceID() == askSpan.SpanContext().TraceID() {
		t.Error("invoke_agent is not the root of a trace of its own")
	}
	if linkOf(root, "spawned_by").SpanID() != askSpan.SpanContext().SpanID() {
		t.Errorf("invoke_agent links %v, want the span of the request that asked for the approval", root.Links())
	}
}
