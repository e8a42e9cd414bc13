package exchange

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
)

// Settle bills what the upstream produced at the chosen expert's price, each token kind (uncached
// input, cache reads, cache writes, output) at its own rate, and returns the amount charged.
// When the upstream reported no usage (a stream cut short), the output is estimated from the
// characters produced and the input from the request (billedInput, as uncached input: the
// dearest kind an upstream that said nothing can be assumed to have billed, short of cache
// writes).
//
// The meter has no audio kind, and requests with audio are refused before they reach an
// upstream (convert.AudioRefusal). An upstream that reports audio tokens all the same (chat's
// prompt_tokens_details.audio_tokens, completion_tokens_details.audio_tokens) is billed its
// counts as reported, the audio among them at the text rates, which is below what the provider
// charges for it; the answer is logged as a warning naming the expert and the counts, so that
// the operator sees the gap rather than a record that only looks complete.
func (x *Exchange) Settle(u llm.Usage, producedChars int, status string) int64 {
	x.usage = u
	if u.AudioInputTokens > 0 || u.AudioOutputTokens > 0 {
		x.eng.logger(x.requestID).Warn("the upstream reported audio tokens, which the gateway does not meter: billed at the text rates",
			"expert", x.expert.Key, "audio_input_tokens", u.AudioInputTokens, "audio_output_tokens", u.AudioOutputTokens)
	}
	producedChars = max(producedChars, x.answerChars)
	cost := x.reserve.SettleUsage(x.billedRecord(u, producedChars, status))
	x.traceSettlement(cost, status)
	x.finishAttempt(status)
	return cost
}

// billedRecord is the usage record Settle bills an answer with usage u of which producedChars
// characters were produced, ended with status.
func (x *Exchange) billedRecord(u llm.Usage, producedChars int, status string) billing.UsageRecord {
	input := x.inputEst
	if u.InputTokens <= 0 {
		input = x.billedInput()
	}
	return x.recordOf(u, producedChars, input, status)
}

// recordOf is the usage record of an answer with usage u of which producedChars characters
// were produced, ended with status, billing input tokens when the upstream did not say.
func (x *Exchange) recordOf(u llm.Usage, producedChars int, input int64, status string) billing.UsageRecord {
	t := x.tokens(u, producedChars, input)
	rec := x.usageRecord(t, u.ServiceTier, status)
	rec.HostedCalls = x.hostedCalls(u)
	rec.HostedMicros = x.expert.HostedCost(rec.HostedCalls, x.hostedBounds)
	if rec.HostedCalls.Any() {
		// The record's price says what each call cost (its own copy of the expert's price),
		// so that the row reproduces its hosted cost alone (trial h12 D7).
		rec.Price.HostedPerCall = make(map[string]int64)
		for t, n := range rec.HostedCalls {
			if n > 0 {
				rec.Price.HostedPerCall[llm.HostedTool(t).String()] = x.expert.Hosted[t].PricePerCallMicros
			}
		}
	}
	return rec
}

// billedUsage is u with the counts the upstream did not report (input, output, or a count
// below zero) filled in as Settle bills them for an answer of which producedChars characters
// were produced: the usage an answer the gateway encodes itself shows, so that it is the bill.
// The counts the upstream reported are kept, and Settle bills the result as it bills u.
func (x *Exchange) billedUsage(u llm.Usage, producedChars int) llm.Usage {
	if u.InputTokens > 0 && u.OutputTokens > 0 {
		// The cached counts shown are those billed: parts of the input, never more (the
		// review of money trial D4: an answer showed 900,000 cached tokens of 100).
		t := u.Tokens()
		u.CachedInputTokens, u.CacheWrite5mTokens, u.CacheWrite1hTokens = t.CacheRead, t.CacheWrite5m, t.CacheWrite1h
		return u
	}
	var input int64
	if u.InputTokens <= 0 {
		input = x.billedInput()
	}
	t := x.tokens(u, max(producedChars, x.answerChars), input)
	if u.InputTokens <= 0 {
		u.InputTokens = t.Input()
	}
	if u.OutputTokens <= 0 {
		u.OutputTokens = t.Output
	}
	return u
}

// checkpointRecord is the stream's billing.CheckpointFunc: the record a stream with usage u and
// producedChars characters produced would be settled with if it were cut now by the gateway
// (as EndStreams cuts it): what it delivered, and nothing when it delivered nothing yet. The
// meter calls it from its own goroutine; it reads only what the exchange fixed before the
// stream began, and the request (billedInput).
func (x *Exchange) checkpointRecord(u llm.Usage, producedChars int) (billing.UsageRecord, bool) {
	if producedChars == 0 && u.OutputTokens == 0 {
		return billing.UsageRecord{}, false
	}
	return x.billedRecord(u, producedChars, billing.StatusProcessLost), true
}

// billedInput is the input count billed when the upstream never said it (a chat or Responses
// stream cut short before its usage): convert.BilledInputTokens of the request, a central
// estimate, where the reservation took a cautious one (at most that), and the pages of its
// inline documents at their bound, as the reservation counted them (as an image counts its
// bound: the provider bills each page's text and image whatever the document's size), but not
// beyond the model's context window, which a served request's input is within (a document
// whose pages cannot be counted is taken to have 600, more than any window holds). It is
// worked out once, by the first caller: the stream's settlement or the meter's checkpointer,
// in its own goroutine; both only read the request, whose bytes and neutral form nothing
// changes once the exchange has started.
func (x *Exchange) billedInput() int64 {
	x.billedOnce.Do(func() { x.billedIn = x.countBilledInput() })
	return x.billedIn
}

// countBilledInput is billedInput's count.
func (x *Exchange) countBilledInput() int64 {
	req := x.parsed
	if req == nil && x.view != nil {
		req, _ = convert.DecodeView(x.client, x.view)
	}
	v, documents := x.inputEst, x.documentTokens
	if w := int64(x.model.ContextTokens); w > 0 {
		documents = min(documents, w)
	}
	switch {
	case req != nil:
		v = min(v, int64(convert.BilledInputTokens(req, x.model.ImageTokens))+documents)
	case x.view != nil:
		// A request only its own format can read: four bytes a token of the whole body.
		v = min(v, int64(len(x.view.Body())+3)/4+documents)
	}
	return max(v, 1)
}

// tokens are the counts per kind billed for an answer with usage u of which producedChars
// characters were produced; input is the input billed when the upstream did not say.
func (x *Exchange) tokens(u llm.Usage, producedChars int, input int64) price.Tokens {
	if u.InputTokens <= 0 {
		// Not reported, or a count below zero (a broken or hostile upstream), which says
		// nothing either (trial h12 D4: billed 0): the input is the estimate, and any cached
		// counts reported are parts of it (money trial D4: a prompt of 0 with 500 cached tokens
		// billed the estimate and the 500 on top).
		u.InputTokens = input
	}
	t := u.Tokens()
	if t.Output == 0 && producedChars > 0 {
		t.Output = int64((producedChars + 3) / 4)
	}
	// Server-side compaction's output is a sampling step of its own, which the client's bound
	// does not bound: billed whole, as the provider bills it (trial h4: a Messages turn that
	// compacted was billed 1,024 of its 4,500 output tokens).
	compaction := min(max(u.CompactionOutputTokens, 0), t.Output)
	if x.askedOutput > 0 && t.Output-compaction > x.askedOutput {
		// More than asked: the Responses API's minimum bound, say. The excess is not billed.
		t.Output = x.askedOutput + compaction
		t.Reasoning = min(t.Reasoning, t.Output)
	}
	return t
}

// hostedCalls are the hosted-tool calls billed for an answer with usage u: those the upstream
// reported, each capped at the bound the reservation covered. A chat completion reports no
// count: its web_search_options is one search an answer.
func (x *Exchange) hostedCalls(u llm.Usage) llm.HostedCalls {
	calls := u.HostedCalls
	if x.client == llm.FormatChat && x.hostedBounds[llm.HostedWebSearch] > 0 {
		calls[llm.HostedWebSearch] = 1
	}
	for t := range calls {
		calls[t] = min(calls[t], x.hostedBounds[t])
	}
	return calls
}

// SettleUndelivered settles an exchange whose answer never reached the client, which got a 502
// in its place: nothing is billed (a client retrying such a request would otherwise pay for
// every failed try). The usage record keeps what the upstream reported, for the operator. An
// in-process call's record is written under an id of its own (the call's id with
// "_undelivered_" and a random suffix): the call's id stays free for the retry that delivers
// (an agent's step retried reuses it, and the ledger bills an id once).
func (x *Exchange) SettleUndelivered(u llm.Usage, status string) {
	x.usage = u
	rec := x.usageRecord(u.Tokens(), u.ServiceTier, status)
	if x.opts != nil {
		rec.RequestID = undeliveredID(x.requestID)
	}
	x.reserve.Settle(0, rec)
	x.traceSettlement(0, status)
	x.finishAttempt(status)
}

// usageRecord is the exchange's usage record, finished now: the counts per kind and the price
// of the expert that served it, at the service tier the upstream said it served the request on
// (its rates for that tier when its price has them, the standard rates otherwise).
func (x *Exchange) usageRecord(t price.Tokens, tier, status string) billing.UsageRecord {
	p := x.expert.Price.AtServiceTier(tier)
	rec := billing.UsageRecord{
		KeyID: x.principal.KeyID, Model: x.model.ID, Route: Route(x.client),
		Provider: x.expert.Provider, UpstreamModel: x.expert.Model,
		Tokens: t, Price: &p, ServiceTier: tier, Status: status, StartedAt: x.started, FinishedAt: time.Now(),
		FittedOutputTokens: int64(x.fittedFor(x.expert)),
	}
	if x.opts != nil {
		// An in-process call (an agent's step) is charged beyond its reservation within its
		// ceiling, which its reservation fitted.
		rec.Route, rec.AgentSessionID, rec.CeilingMicros = x.opts.route, x.opts.sessionID, x.opts.ceiling
	}
	if x.tr != nil {
		rec.TraceID = trace.SpanContextFromContext(x.ctx).TraceID()
	}
	return rec
}

// undeliveredID is the id of the usage record of an undelivered attempt of the call requestID.
func undeliveredID(requestID string) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return requestID + "_undelivered_" + hex.EncodeToString(b[:])
}
