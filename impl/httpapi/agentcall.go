package httpapi

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/convert"
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

// AgentCall is one in-process model call: a chat-completions request (not streamed) for a
// principal, through the same routing, reservation and metering as POST /v1/chat/completions.
type AgentCall struct {
	Principal auth.Principal
	// RequestID is the call's request id: its reservation's and its usage record's, which the
	// ledger bills once, so a call repeated with the same id is billed once.
	RequestID string
	// SessionID tags the usage record (usage_records.agent_session_id).
	SessionID uuid.UUID
	// Body is the chat-completions request; "stream" must be absent or false.
	Body []byte
	// CeilingMicros bounds the call's worst-case cost (0: none): the output bound is lowered
	// until the reservation fits it.
	CeilingMicros int64
}

// AgentAnswer is an in-process call's answer in the chat-completions format, and its bill.
type AgentAnswer struct {
	Body []byte
	// Expert names the upstream that served the call ("provider/model").
	Expert                    string
	InputTokens, OutputTokens int64
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens read from and written
	// to the provider's prompt cache (each billed at its own price).
	CacheReadTokens, CacheWriteTokens int64
	// CostMicros is what was charged (never more than the reservation, so never more than the
	// ceiling).
	CostMicros int64
}

// exchangeOptions are an in-process call's: the ceiling its reservation must fit, and the
// route and agent session its usage record carries.
type exchangeOptions struct {
	ceiling   int64
	route     string
	sessionID uuid.UUID
}

// fit is the largest output bound, at most outBound, whose worst case fits the ceiling; or
// ErrSpendCeiling when not even minAgentOutput tokens fit.
func (o *exchangeOptions) fit(m *routing.Model, inputEst int64, outBound, choices int) (int, error) {
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

// AgentCall runs one model call in process. Errors are those the route would answer
// (*apierror.Error: a refused model, insufficient credit, an upstream failure), ErrSpendCeiling,
// or the context's.
func (s *Server) AgentCall(ctx context.Context, c AgentCall) (AgentAnswer, error) {
	ctx = auth.WithPrincipal(context.WithValue(ctx, requestIDKey{}, c.RequestID), c.Principal)
	x, err := s.startExchange(ctx, llm.FormatChat, c.Body, nil,
		&exchangeOptions{ceiling: c.CeilingMicros, route: AgentRoute, sessionID: c.SessionID})
	if err != nil {
		return AgentAnswer{}, err
	}
	defer x.res.Body.Close()
	if x.stream {
		x.settleUndelivered(llm.Usage{}, "refused_stream")
		return AgentAnswer{}, apierror.Invalid("stream", "an in-process call is not streamed")
	}
	raw, err := readAnswer(x.res, nil)
	if err != nil {
		x.settleUndelivered(llm.Usage{}, "upstream_read_failed")
		return AgentAnswer{}, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer was cut off"}
	}
	var (
		usage llm.Usage
		out   []byte
	)
	if x.expert.Kind == x.client {
		if usage, err = convert.ResponseUsage(x.expert.Kind, raw); err == nil {
			out, err = convert.SetModel(nil, raw, x.model.ID)
		}
	} else {
		var resp *llm.Response
		if resp, err = convert.DecodeResponse(x.expert.Kind, raw); err == nil {
			usage = resp.Usage
			out, err = convert.EncodeResponse(x.client, resp, convert.Meta{ID: responseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID, Request: x.ir})
		}
	}
	if err != nil {
		x.settleUndelivered(usage, "upstream_malformed")
		s.logger(ctx).Error("unusable upstream answer to an agent's call", "expert", x.expert.Key, "err", err)
		return AgentAnswer{}, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
	}
	cost := x.settle(usage, 0, "ok")
	return AgentAnswer{Body: out, Expert: x.expert.Key, InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens,
		CacheReadTokens: usage.CachedInputTokens, CacheWriteTokens: usage.CacheWriteTokens(), CostMicros: cost}, nil
}
