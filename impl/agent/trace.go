package agent

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// Tracing of agent sessions (issue 20). A session is one trace, whichever processes run it:
//
//   - Spawning it starts a new trace with the span "invoke_agent {agent}" (GenAI conventions:
//     gen_ai.operation.name invoke_agent, gen_ai.provider.name tollgate, gen_ai.agent.id and
//     gen_ai.agent.name), linked to the span that spawned it (the POST /v1/agents request, or
//     the approved agent_spawn's job).
//     The span covers the spawn; its W3C traceparent is kept in the session's row
//     (agent_sessions.trace_parent).
//   - Every River job of the session carries that traceparent, and the one of the span that
//     inserted it, in its metadata (jobTrace). Each step is a span "agent_step" whose parent is
//     the session's invoke_agent span, on any process and after any restart, and which links
//     to the span that inserted its job (the previous step, or the request that sent a
//     message); it carries the River job's id, kind and attempt.
//   - A step's model call runs in the step span's context, so the exchange's spans (admission,
//     upstream attempts, settlement) nest under it; each tool call is an "execute_tool {tool}"
//     span under it.
//
// Nothing of the conversation (prompts, answers, tool arguments and results) is recorded.

// tracerName is the instrumentation scope of the agents' spans.
const tracerName = "github.com/tollgate/tollgate/impl/agent"

// The attributes of the agents' spans.
const (
	attrSessionID  = telemetry.AttrAgentSessionID
	attrSlot       = attribute.Key("tollgate.agent.slot")
	attrStep       = attribute.Key("tollgate.agent.step")
	attrTurn       = attribute.Key("tollgate.agent.turn")
	attrJobID      = attribute.Key("tollgate.river.job_id")
	attrJobKind    = attribute.Key("tollgate.river.job_kind")
	attrJobAttempt = attribute.Key("tollgate.river.attempt")
	attrLinkKind   = attribute.Key("tollgate.link")
)

// Span names and the kinds of their links.
const (
	spanInvokeAgent = "invoke_agent"
	spanStep        = "agent_step"
	spanExecuteTool = "execute_tool"
	linkSpawnedBy   = "spawned_by"
	linkEnqueuedBy  = "enqueued_by"
)

// The error.type values of a tool call that failed.
const (
	toolErrorResult   = "tool_error"
	toolErrorInternal = "internal"
)

// jobTrace is what a job of the agents carries of tracing in its River metadata: the session's
// invoke_agent span and the span that inserted the job, as W3C traceparents (empty: none).
type jobTrace struct {
	Session  string `json:"tollgate_session_trace,omitempty"`
	Enqueued string `json:"tollgate_enqueued_by,omitempty"`
}

// traceparent is the W3C traceparent of the span in ctx ("" when it has none).
func traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// spanContextOf reads a W3C traceparent back (an invalid span context for "" or garbage).
func spanContextOf(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// agentName is the name a session's spans give its agent: its configured name, else its slot's.
func agentName(agent, slot string) string {
	if agent != "" {
		return agent
	}
	return slot
}

// agentID is a session's gen_ai.agent.id: the agent, the account's slot that runs one session
// after another (the session's own id when it has no slot); the session is the conversation
// (gen_ai.conversation.id). Trial h8 D6: both were the session's id.
func agentID(session uuid.UUID, slot pgtype.UUID) string {
	if slot.Valid {
		return uuid.UUID(slot.Bytes).String()
	}
	return session.String()
}

// startInvokeAgent starts the invoke_agent span of a new session: the root of a new trace,
// linked to the span in ctx (whatever spawned it). The caller ends it once the spawn is done.
func startInvokeAgent(ctx context.Context, p store.NewAgentSession) (context.Context, trace.Span) {
	name := agentName(p.AgentName, p.SlotName)
	attrs := []attribute.KeyValue{
		telemetry.GenAIOperationName.String(spanInvokeAgent), telemetry.GenAIProviderName.String(telemetry.ProviderTollgate),
		telemetry.GenAIAgentID.String(agentID(p.ID, p.SlotID)), telemetry.GenAIAgentName.String(name),
		telemetry.GenAIConversationID.String(p.ID.String()), attrSessionID.String(p.ID.String()), attrSlot.String(p.SlotName),
		telemetry.GenAIRequestModel.String(p.Model), telemetry.AttrAccount.String(p.AccountID.String()),
	}
	if p.KeyID.Valid {
		attrs = append(attrs, telemetry.AttrKey.String(uuid.UUID(p.KeyID.Bytes).String()))
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrLinkKind.String(linkSpawnedBy)}}))
	}
	return otel.Tracer(tracerName).Start(ctx, spanInvokeAgent+" "+name, opts...)
}

// jobMetadata is the River metadata of a job of the session whose invoke_agent span is
// sessionTrace, inserted in ctx (nil when there is nothing to carry).
func jobMetadata(ctx context.Context, sessionTrace string) []byte {
	jt := jobTrace{Session: sessionTrace, Enqueued: traceparent(ctx)}
	if jt == (jobTrace{}) {
		return nil
	}
	b, _ := json.Marshal(jt)
	return b
}

// startStep starts the span of one attempt of a step job: a child of the session's
// invoke_agent span, linked to the span that inserted the job. A job without the session's
// trace (tracing was off at the spawn) gets a span of its own trace.
func startStep(ctx context.Context, job *rivertype.JobRow, args stepArgs) (context.Context, trace.Span) {
	var jt jobTrace
	_ = json.Unmarshal(job.Metadata, &jt)
	parent := spanContextOf(jt.Session)
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	} else {
		ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attrSessionID.String(args.SessionID.String()), attrStep.Int64(args.Step),
		attrJobID.Int64(job.ID), attrJobKind.String(job.Kind), attrJobAttempt.Int(job.Attempt),
	)}
	if by := spanContextOf(jt.Enqueued); by.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: by, Attributes: []attribute.KeyValue{
			attrLinkKind.String(linkEnqueuedBy), attrJobID.Int64(job.ID)}}))
	}
	return otel.Tracer(tracerName).Start(ctx, spanStep, opts...)
}

// describeStep adds what a step learned of its session to its span.
func describeStep(span trace.Span, row store.AgentSession, p auth.Principal, turn int) {
	attrs := []attribute.KeyValue{
		telemetry.GenAIAgentID.String(agentID(row.ID, row.SlotID)), telemetry.GenAIAgentName.String(agentName(row.AgentName, row.SlotName)), telemetry.GenAIConversationID.String(row.ID.String()),
		telemetry.GenAIRequestModel.String(row.Model), telemetry.AttrAccount.String(row.AccountID.String()), attrTurn.Int(turn),
	}
	if p.KeyID != uuid.Nil {
		attrs = append(attrs, telemetry.AttrKey.String(p.KeyID.String()))
	}
	span.SetAttributes(attrs...)
}

// endSpan ends a span with err's outcome: error.type is the HTTP status of an error a client
// would see (a refused or failed model call), else _OTHER.
func endSpan(span trace.Span, err error) {
	if err != nil {
		errType := "_OTHER"
		if ae := apierror.As(err); ae != nil {
			errType = strconv.Itoa(ae.Kind.Status())
		}
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(telemetry.ErrorType.String(errType))
	}
	span.End()
}

// startToolSpan starts the execute_tool span of one tool call of a step; tools are the tools
// the model was given, whose description of the called one is the span's
// gen_ai.tool.description (which the conventions recommend; none for a name the model made up).
func startToolSpan(ctx context.Context, row store.AgentSession, c *toolCall, tools []llm.Tool) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		telemetry.GenAIOperationName.String(spanExecuteTool), telemetry.GenAIToolName.String(c.Name), telemetry.GenAIToolType.String(telemetry.ToolTypeFunction),
		attrSessionID.String(row.ID.String()), telemetry.AttrAccount.String(row.AccountID.String()),
	}
	for _, t := range tools {
		if t.Name == c.Name && t.Description != "" {
			attrs = append(attrs, telemetry.GenAIToolDescription.String(t.Description))
			break
		}
	}
	if c.ID != "" {
		attrs = append(attrs, telemetry.GenAIToolCallID.String(c.ID))
	}
	return otel.Tracer(tracerName).Start(ctx, spanExecuteTool+" "+c.Name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endToolSpan ends a tool call's span with its outcome (errType: why an error result failed).
func endToolSpan(span trace.Span, c *toolCall, errType string) {
	if c.IsError {
		if errType == "" {
			errType = toolErrorResult
		}
		span.SetAttributes(telemetry.ErrorType.String(errType))
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}
