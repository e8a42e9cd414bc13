package exchange

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/routing"
)

// AgentRoute is the route of the usage records of agents' model calls.
const AgentRoute = "agent"

// minAgentOutput is the smallest output bound an in-process call is made with: below it, the
// call does not fit its ceiling (ErrSpendCeiling).
const minAgentOutput = 16

// ErrSpendCeiling reports an in-process call whose worst case does not fit its ceiling even
// with the smallest output bound.
var ErrSpendCeiling = errors.New("the call does not fit its spend ceiling")

// Call is one in-process model call (an agent's step): a request in the neutral form, not
// streamed, for a principal, through the same routing, reservation, attempts and metering as
// every other exchange, with no HTTP request around it and no wire format in between: each
// expert is sent an encoding of the neutral request, and its answer comes back decoded.
type Call struct {
	Principal auth.Principal
	// RequestID is the call's request id: its reservation's and its usage record's, which the
	// ledger bills once, so a call repeated with the same id is billed once.
	RequestID string
	// SessionID tags the usage record (usage_records.agent_session_id).
	SessionID uuid.UUID
	// Request is the request; Model names a model of the chat family (the agents' route
	// family), and Stream must be false. The exchange reads it and never changes it.
	Request *llm.Request
	// CeilingMicros bounds the call's worst-case cost (0: none): the output bound is lowered
	// until the reservation fits it.
	CeilingMicros int64
}

// CallAnswer is an in-process call's answer in the neutral form, and its bill.
type CallAnswer struct {
	// Response is the answer; its ID and Model are the gateway's (the request id's and the
	// model's), never the upstream's.
	Response *llm.Response
	// Expert names the upstream that served the call ("provider/model").
	Expert                    string
	InputTokens, OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens read from and written
	// to the provider's prompt cache (each billed at its own price).
	CacheReadTokens, CacheWriteTokens int64
	// CostMicros is what was charged: the reservation at most, and beyond it (a bill its input
	// estimate did not cover) never more than the ceiling.
	CostMicros int64
}

// callOptions are an in-process call's: the ceiling its reservation must fit, and the route
// and agent session its usage record carries.
type callOptions struct {
	ceiling   int64
	route     string
	sessionID uuid.UUID
}

// fit is the largest output bound, at most outBound, whose worst case fits the ceiling; or
// ErrSpendCeiling when not even minAgentOutput tokens fit.
func (o *callOptions) fit(m *routing.Model, inputEst int64, outBound, choices int) (int, error) {
	p := m.MaxPrice()
	worst := func(out int) int64 { return price.Worst(inputEst, int64(out)*int64(choices), p) }
	if worst(outBound) <= o.ceiling {
		return outBound, nil
	}
	lo, hi := 0, outBound // worst(lo) fits (0: nothing is known to), worst(hi) does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if worst(mid) <= o.ceiling {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo < min(minAgentOutput, outBound) || lo == 0 {
		return 0, ErrSpendCeiling
	}
	return lo, nil
}

// Call runs one model call in process and settles it. Errors are those an HTTP route would
// answer (*apierror.Error: a refused model, insufficient credit, an upstream failure),
// ErrSpendCeiling, or the context's.
func (eng *Engine) Call(ctx context.Context, c Call) (CallAnswer, error) {
	if c.Request == nil {
		return CallAnswer{}, apierror.Invalid("", "an in-process call needs a request")
	}
	if c.Request.Stream {
		return CallAnswer{}, apierror.Invalid("stream", "an in-process call is not streamed")
	}
	x, err := eng.start(ctx, Request{Client: llm.FormatChat, Principal: c.Principal, RequestID: c.RequestID, neutral: c.Request},
		&callOptions{ceiling: c.CeilingMicros, route: AgentRoute, sessionID: c.SessionID}, nil)
	if err != nil {
		return CallAnswer{}, err
	}
	defer x.Close()
	resp, err := x.neutralAnswer()
	if err != nil {
		return CallAnswer{}, err
	}
	// The counts the call reports are those billed: what the upstream did not report, as
	// Settle bills it (an HTTP answer shows the same).
	usage := x.billedUsage(resp.Usage, 0)
	cost := x.Settle(resp.Usage, 0, "ok")
	return CallAnswer{Response: resp, Expert: x.expert.Key, InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens,
		CacheReadTokens: usage.CachedInputTokens, CacheWriteTokens: usage.CacheWriteTokens(), CostMicros: cost}, nil
}
