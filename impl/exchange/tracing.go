package exchange

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// The exchange's tracing glue: the spans of one exchange (admission, each upstream attempt,
// settlement) and the GenAI metrics. While tracing is off
// (telemetry.Enabled false) none of it makes a span or allocates (the exchange's trace is
// nil); the metrics are observed either way, without allocating.

// exchangeTrace is what an exchange's spans need beyond the exchange itself.
type exchangeTrace struct {
	// attempt is the CLIENT span of the upstream attempt that answered, ended with the answer.
	attempt trace.Span
	// capture: the account opted in to its prompts and answers in span events.
	capture bool
	// finishReason (as the upstream's format writes it: "stop", "end_turn", "completed"...),
	// responseID and responseModel are read from the answer.
	finishReason, responseID, responseModel string
	// finishReasons are an answer's of several choices (a chat request's n), one for each
	// choice; nil for an answer of one, whose finishReason is its only one.
	finishReasons []string
	// output collects a stream's text when capture is set.
	output strings.Builder
}

// providerName is gen_ai.provider.name for expert e: its provider's (routing.Expert's
// GenAIProvider, from the configuration or the base URL's host), else its kind's.
func providerName(e *routing.Expert) string {
	switch {
	case e.GenAIProvider != "":
		return e.GenAIProvider
	case e.Kind == llm.FormatMessages:
		return "anthropic"
	}
	return "openai"
}

// endAdmission ends the admission span with the amount reserved (worst, the request's most)
// and the reservation's outcome: admitted, degraded (served on credit while the database is
// unreachable), refused or unavailable.
func endAdmission(span trace.Span, worst int64, r *billing.Reservation, err error) {
	if span == nil {
		return
	}
	amount := telemetry.AttrReservationMicros.Int64(worst)
	switch {
	case err == nil && r != nil && r.OnCredit():
		span.SetAttributes(amount, telemetry.AttrAdmission.String(telemetry.AdmissionDegraded))
	case err == nil:
		span.SetAttributes(amount, telemetry.AttrAdmission.String(telemetry.AdmissionAdmitted))
	case apierror.IsUnavailable(err):
		telemetry.Fail(span, "unavailable", "the credit could not be reserved",
			amount, telemetry.AttrAdmission.String(telemetry.AdmissionUnavailable))
	default:
		telemetry.Fail(span, errorType(err), "the credit could not be reserved",
			amount, telemetry.AttrAdmission.String(telemetry.AdmissionRefused))
	}
	span.End()
}

// errorType is error.type for a failure: an upstream call's, what the upstream answered
// (provider.ErrorType: its status, or "connection"), except the upstream's refusal of an
// account's own key (401 or 403), which is upstream_credential_refused: the account's key to
// set again, not the operator's (a "401" said the gateway's credentials were wrong); the
// gateway's own (a refused admission), the HTTP status the client gets; or "canceled",
// "timeout", "_OTHER".
func errorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case provider.AccountKeyRefused(err):
		return provider.AccountKeyRefusedCode
	}
	if t := provider.ErrorType(err); t != "" {
		return t
	}
	if e := apierror.As(err); e != nil {
		return strconv.Itoa(e.Kind.Status())
	}
	return "_OTHER"
}

// tryObserver notes when each try of an upstream call began (start): the router learns the
// answering try's own time to first byte, not the call's with the tries that failed before it
// and the waits between them (trial D2).
//
// When traced, it also makes each try a CLIENT span of its own (named after the GenAI
// conventions: "chat <model>"), children of the request's span and siblings of one another: an
// expert's retries and the failover to the next expert read alike, each failed one with its
// error.type. span is the last try's, which carries the answer's attributes when it succeeded.
//
// With metrics on, each failed try is also one operation in gen_ai.client.operation.duration,
// with its error.type, traced or not (trial h8 D4: a 429 that a retry absorbed never showed,
// and nine failed tries counted as three); the answering try's is counted when the answer ends
// (finishAttempt), from start, when the try began.
type tryObserver struct {
	x     *Exchange
	e     routing.Expert
	bound int
	n     int // the current try's number, from 1
	// status is the current try's HTTP status, once it ended (0: no answer came).
	status int
	span   trace.Span
	start  time.Time
	// startAttrs holds the current try's start attributes (startAttributes).
	startAttrs [5]attribute.KeyValue
}

// observeTries returns the observer of expert e's tries: the exchange's own, reset, so that
// observing allocates nothing. Without tracing and metrics it only notes each try's start.
func (x *Exchange) observeTries(e routing.Expert, bound int) *tryObserver {
	x.tries = tryObserver{x: x, e: e, bound: bound}
	return &x.tries
}

// StartTry begins try n's span (when traced; the try's request carries its traceparent) and
// notes when it began. The attributes the GenAI conventions ask to have at the span's creation,
// for samplers (gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model,
// server.address and server.port: startAttributes), are given to the span's start; the others
// are set when the try ends (tryAttributes).
func (o *tryObserver) StartTry(ctx context.Context, n int) context.Context {
	o.start, o.n, o.status = time.Now(), n, 0
	if o.x.tr == nil {
		return ctx
	}
	tctx, span := telemetry.Tracer().Start(ctx, telemetry.OperationChat+" "+o.e.Model, clientKind,
		trace.WithAttributes(o.startAttributes()...))
	o.span = span
	return tctx
}

// clientKind is a try span's kind option, made once.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// startAttributes are the attributes of a try's span that the GenAI conventions ask to be
// provided when the span starts, since samplers may read them: the operation, the provider,
// the model asked for and the upstream's address. They are written into the observer's own
// array (the SDK copies them), so that naming them allocates nothing of its own.
func (o *tryObserver) startAttributes() []attribute.KeyValue {
	a := append(o.startAttrs[:0],
		telemetry.GenAIOperationName.String(telemetry.OperationChat),
		telemetry.GenAIProviderName.String(providerName(&o.e)),
		telemetry.GenAIRequestModel.String(o.e.Model),
	)
	if o.e.Host != "" {
		a = append(a, telemetry.ServerAddress.String(o.e.Host), telemetry.ServerPort.Int(o.e.Port))
	}
	return a
}

// tryAttributes appends what a try's span says of the request beyond its start attributes,
// known when it began (the output bound, whether it streams, an agent's call's session as the
// conversation, the choices asked for when more than one, the expert, the gateway's model and
// the try's number) and the upstream's HTTP status when an answer came
// (http.response.status_code, as the HTTP conventions name it).
func (o *tryObserver) tryAttributes(attrs []attribute.KeyValue) []attribute.KeyValue {
	maxTokens := o.bound
	if o.e.Kind == llm.FormatResponses {
		// The bound the upstream was asked for (upstreamBody): the Responses API refuses less
		// than minResponsesOutput, so a smaller one is raised to it.
		maxTokens = max(maxTokens, minResponsesOutput)
	}
	attrs = append(attrs,
		telemetry.GenAIRequestMaxTokens.Int(maxTokens),
		telemetry.AttrExpert.String(o.e.Key),
		telemetry.AttrModel.String(o.x.model.ID),
		telemetry.AttrUpstreamAttempts.Int(o.n),
	)
	if o.x.stream {
		// The conventions require gen_ai.request.stream on a streamed request's inference
		// span, and leave it out of the others (unset means not streamed).
		attrs = append(attrs, telemetry.GenAIRequestStream.Bool(true))
	}
	if op := o.x.opts; op != nil && op.sessionID != uuid.Nil {
		// An agent's model call: its session is the conversation, which the conventions
		// require on an inference span when it is available (as on the session's own spans).
		attrs = append(attrs, telemetry.GenAIConversationID.String(op.sessionID.String()))
	}
	if c := o.x.calls.choices; c > 1 {
		// The conventions require gen_ai.request.choice.count when the request asks for other
		// than one choice (a chat request's n), and leave it out otherwise.
		attrs = append(attrs, telemetry.GenAIRequestChoiceCount.Int(c))
	}
	if t := requestedOutputType(o.x.client, o.x.view, o.x.ir); t != "" {
		// Required by the conventions when the request names an output format.
		attrs = append(attrs, telemetry.GenAIOutputType.String(t))
	}
	if seed, ok := requestedSeed(o.x.client, o.x.view); ok {
		// Required by the conventions when the request includes a seed.
		attrs = append(attrs, telemetry.GenAIRequestSeed.Int64(seed))
	}
	if o.status != 0 {
		attrs = append(attrs, telemetry.HTTPResponseStatusCode.Int(o.status))
	}
	return attrs
}

// requestedOutputType is gen_ai.output.type of a request of format f, read from its view v
// (convert.RequestedOutputType) or, for an in-process call that has none, from its neutral
// form ir.
func requestedOutputType(f llm.Format, v *jsonview.View, ir *llm.Request) string {
	if v == nil {
		if ir != nil && ir.ResponseFormat != nil {
			return convert.OutputTypeOf(ir.ResponseFormat.Type)
		}
		return ""
	}
	return convert.RequestedOutputType(f, v)
}

// requestedSeed is gen_ai.request.seed of a request of format f: a chat request's seed, when
// it has one (the other formats have none).
func requestedSeed(f llm.Format, v *jsonview.View) (int64, bool) {
	if f != llm.FormatChat || v == nil {
		return 0, false
	}
	m, ok := v.Lookup("seed")
	if !ok {
		return 0, false
	}
	seed, err := strconv.ParseInt(string(v.ValueOf(m)), 10, 64)
	return seed, err == nil
}

// failSpan ends the try's span as failed with errType and description.
func (o *tryObserver) failSpan(errType, description string) {
	telemetry.Fail(o.span, errType, description, o.tryAttributes(make([]attribute.KeyValue, 0, 11))...)
	o.span.End()
}

// EndTry ends a failed try: its span with the reason, and its operation in the metrics; a
// successful try's span stays open for the answer's attributes (finishAttempt ends it).
func (o *tryObserver) EndTry(_ context.Context, _ int, status int, err error) {
	o.status = status
	if err == nil || o.span == nil && o.x.eng.metrics == nil {
		return
	}
	et := errorType(err)
	var traceID trace.TraceID
	if o.span != nil {
		o.failSpan(et, "the upstream try failed")
		traceID = telemetry.SampledTrace(o.span)
	}
	if m := o.x.eng.metrics; m != nil {
		m.ObserveGenAI(metrics.GenAIOperation{Operation: telemetry.OperationChat, Provider: providerName(&o.e),
			RequestModel: o.e.Model, Model: o.x.model.ID, Duration: time.Since(o.start), ErrorType: et, TraceID: traceID})
	}
}

// failAnswer ends a try whose answer arrived but could not be used (cut off, malformed, or a
// 200 carrying an error; status is the usage record's word for it, upstream_read_failed or
// upstream_malformed): its span with that reason, and its operation in the metrics with status
// as its error.type, as EndTry ends a try that failed before its answer (review item 6: such a
// try was in no metric, though the router counted it against the expert's health).
func (o *tryObserver) failAnswer(status string, err error) {
	var traceID trace.TraceID
	if o.span != nil {
		o.failSpan(status, err.Error())
		traceID = telemetry.SampledTrace(o.span)
	}
	if m := o.x.eng.metrics; m != nil {
		m.ObserveGenAI(metrics.GenAIOperation{Operation: telemetry.OperationChat, Provider: providerName(&o.e),
			RequestModel: o.e.Model, Model: o.x.model.ID, Duration: time.Since(o.start), ErrorType: status, TraceID: traceID})
	}
}

// noteEvent reads what the attempt span reports from a stream's neutral event: the
// upstream's id and model, the finish reason, and (when captured) the text.
func (x *Exchange) noteEvent(ev *llm.Event) {
	switch ev.Kind {
	case llm.EventStart:
		x.tr.responseID, x.tr.responseModel = ev.ID, ev.Model
	case llm.EventStop:
		x.tr.finishReason = convert.StopReasonFor(x.expert.Kind, ev.Stop)
	case llm.EventTextDelta:
		if x.tr.capture {
			x.tr.output.WriteString(ev.Text)
		}
	}
}

// noteAnswer reads what the attempt span reports from a complete answer decoded already: the
// upstream's id and model, the finish reason, and the text when the account's content is
// captured.
func (x *Exchange) noteAnswer(resp *llm.Response) {
	x.tr.responseID, x.tr.responseModel = resp.ID, resp.Model
	x.tr.finishReason = convert.StopReasonFor(x.expert.Kind, resp.Stop)
	if x.tr.capture {
		x.tr.output.WriteString(resp.Text)
		x.tr.output.WriteString(resp.Refusal)
	}
}

// noteRelayedAnswer is noteAnswer for an answer relayed in its own format, read into v (the
// view its usage was read from): it is not decoded for the trace; its id, model and finish
// reason are read from the view's members (convert.ResponseFactsOf, about a twentieth of a full
// decode's CPU), and its text only when the account's content is captured.
//
// An answer of several choices (only a chat answer has them) has the finish reason of each
// read too (convert.ChatFinishReasons): gen_ai.response.finish_reasons holds one for each
// generation, as the conventions ask, not the first choice's alone.
func (x *Exchange) noteRelayedAnswer(v *jsonview.View) {
	if x.calls.choices > 1 && x.expert.Kind == llm.FormatChat {
		x.tr.finishReasons = convert.ChatFinishReasons(v)
	}
	if x.tr.capture {
		if resp, err := convert.DecodeResponse(x.expert.Kind, v.Body()); err == nil {
			x.noteAnswer(resp)
			return
		}
	}
	f := convert.ResponseFactsOf(x.expert.Kind, v)
	x.tr.responseID, x.tr.responseModel, x.tr.finishReason = f.ID, f.Model, f.FinishReason
}

// finishAttempt ends the answering attempt's span with the usage and the answer's details,
// and counts the operation in the GenAI metrics; status is the settlement's.
func (x *Exchange) finishAttempt(status string) {
	u := x.usage
	var traceID trace.TraceID
	if x.tr != nil && x.tr.attempt != nil {
		span := x.tr.attempt
		// The answering try's attributes (x.tries is its expert's observer) and the answer's.
		attrs := x.tries.tryAttributes(make([]attribute.KeyValue, 0, 23))
		if u.InputTokens > 0 || u.OutputTokens > 0 {
			// The counts the upstream reported; an answer cut before its usage has none, and
			// its span says nothing rather than 0 (the bill's estimate is the usage record's:
			// trial h8 D5).
			attrs = append(attrs, telemetry.GenAIUsageInputTokens.Int64(u.InputTokens), telemetry.GenAIUsageOutputTokens.Int64(u.OutputTokens))
		}
		// The cache counts only when the upstream reported some (each attribute costs every
		// export).
		if u.CachedInputTokens > 0 {
			attrs = append(attrs, telemetry.GenAIUsageCacheRead.Int64(u.CachedInputTokens))
		}
		if w := u.CacheWrite5mTokens + u.CacheWrite1hTokens; w > 0 {
			attrs = append(attrs, telemetry.GenAIUsageCacheCreation.Int64(w))
		}
		if u.ReasoningTokens > 0 {
			// The part of the output spent on reasoning, when the upstream said (included in
			// gen_ai.usage.output_tokens, as the conventions ask).
			attrs = append(attrs, telemetry.GenAIUsageReasoning.Int64(u.ReasoningTokens))
		}
		if len(x.tr.finishReasons) > 1 {
			attrs = append(attrs, telemetry.GenAIResponseFinishReason.StringSlice(x.tr.finishReasons))
		} else if x.tr.finishReason != "" {
			attrs = append(attrs, telemetry.GenAIResponseFinishReason.StringSlice([]string{x.tr.finishReason}))
		}
		if x.tr.responseID != "" {
			attrs = append(attrs, telemetry.GenAIResponseID.String(x.tr.responseID))
		}
		if x.tr.responseModel != "" {
			// The model the upstream says answered; an answer that did not say (a stream cut
			// before its first event) has none, rather than the model asked for, which the
			// span's gen_ai.request.model already is.
			attrs = append(attrs, telemetry.GenAIResponseModel.String(x.tr.responseModel))
		}
		if ttfc := x.timeToFirstChunk(); ttfc > 0 {
			// The conventions' time to the first chunk, from the answering try's start (before,
			// tollgate.time_to_first_token_s, from the request's start: the event's time).
			attrs = append(attrs, telemetry.GenAIResponseTimeToFirst.Float64(ttfc.Seconds()))
		}
		if x.ttft > 0 {
			// Stamped when the first event left, not when the span ends (trial h8 D7).
			span.AddEvent("gen_ai.first_token", trace.WithTimestamp(x.started.Add(x.ttft)))
		}
		if x.tr.capture {
			fr := x.tr.finishReason
			if status != "ok" {
				fr = status
			}
			attrs = append(attrs, x.contentAttributes(x.tr.output.String(), fr)...)
		}
		if status != "ok" {
			telemetry.Fail(span, status, "the answer did not complete", attrs...)
		} else {
			span.SetAttributes(attrs...)
		}
		span.End()
		traceID = telemetry.SampledTrace(span)
	}
	if x.eng.metrics != nil && !x.attemptStart.IsZero() {
		// Only a try whose answer began is counted here: a try that failed before it is
		// counted by EndTry, an unusable answer by failAnswer (an exchange settled with no
		// answer, its client gone or the shutdown's grace over, was counted once more, and
		// from the zero time: an operation of two thousand years).
		op := metrics.GenAIOperation{Operation: telemetry.OperationChat, Provider: providerName(&x.expert),
			RequestModel: x.expert.Model, Model: x.model.ID,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, Duration: time.Since(x.attemptStart),
			TimeToFirstToken: x.ttft, TimeToFirstChunk: x.timeToFirstChunk(), TraceID: traceID}
		if status != "ok" {
			// gen_ai.server.time_to_first_token is of successful responses (trial h8 D9); the
			// first chunk of a stream that then failed did come, and stays counted.
			op.ErrorType, op.TimeToFirstToken = status, 0
		}
		x.eng.metrics.ObserveGenAI(op)
	}
}

// timeToFirstChunk is a stream's gen_ai.client.operation.time_to_first_chunk: from the start of
// the try that answered to its first chunk, relayed to the client as it was read (0: not a
// stream, or no chunk came).
func (x *Exchange) timeToFirstChunk() time.Duration {
	if x.ttft <= 0 || x.attemptStart.IsZero() {
		return 0
	}
	return max(x.started.Add(x.ttft).Sub(x.attemptStart), 0)
}

// traceSettlement records the settlement (cost, status) as a span of the request's trace.
func (x *Exchange) traceSettlement(cost int64, status string) {
	if x.tr == nil {
		return
	}
	_, span := telemetry.StartInternal(x.ctx, "settle")
	span.SetAttributes(telemetry.AttrCostMicros.Int64(cost), telemetry.AttrSettlementStatus.String(status))
	span.End()
}
