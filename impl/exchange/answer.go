package exchange

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/readbody"
	"github.com/tollgate/tollgate/impl/routing"
)

// maxResponseBytes bounds a non-streamed upstream answer.
const maxResponseBytes = 64 << 20

// Context is the context the exchange was started with.
func (x *Exchange) Context() context.Context { return x.ctx }

// Client is the wire format of the request and of its answer.
func (x *Exchange) Client() llm.Format { return x.client }

// Streamed reports whether the client asked for a streamed answer.
func (x *Exchange) Streamed() bool { return x.stream }

// Expert is the upstream that answered.
func (x *Exchange) Expert() *routing.Expert { return &x.expert }

// Dropped names the advisory request fields and tools the chosen upstream could not use.
func (x *Exchange) Dropped() []string { return x.dropped }

// Clamped names an output bound beyond the limit of the model (or of the chosen expert) and
// the limit it was lowered to, e.g. "max_tokens=8192"; "" when none was.
func (x *Exchange) Clamped() string { return x.clamped }

// UpstreamWait is the time spent waiting for upstreams so far (calls, answer reads): the part
// of the request's duration that is not the gateway's own.
func (x *Exchange) UpstreamWait() time.Duration { return x.upstreamWait }

// Logger is the engine's logger with the request id.
func (x *Exchange) Logger() *slog.Logger { return x.eng.logger(x.requestID) }

// Close releases the upstream response. Call it once the exchange is settled.
func (x *Exchange) Close() error { return x.res.Body.Close() }

// Answer reads the upstream's complete answer into *raw and puts it in the client's format
// into *out (either buffer may be reused; both are grown as needed and left with what they
// hold), and returns the answer's bytes (in *out's array when the formats agree) and its usage. The
// caller settles a delivered answer with Settle(usage, 0, "ok") once the client has it. On
// failure the exchange is settled already (nothing billed) and the error is the context's
// when the caller went away while the answer was read, else an upstream failure
// (*apierror.Error).
func (x *Exchange) Answer(raw, out *[]byte) ([]byte, llm.Usage, error) {
	t0 := time.Now()
	r, err := readAnswer(x.res, (*raw)[:0])
	x.upstreamWait += time.Since(t0)
	*raw = r
	if err != nil {
		if x.eng.streamsEnd.Err() != nil {
			// A shutdown ended the request while its answer was read (the connections are
			// closed a while after the grace period): nothing reached the client, nothing is
			// billed, as for an upstream still silent then.
			x.SettleUndelivered(llm.Usage{}, "shutdown")
			return nil, llm.Usage{}, errShuttingDown
		}
		x.SettleUndelivered(llm.Usage{}, "upstream_read_failed")
		if err := x.ctx.Err(); err != nil {
			// The client went away, which cut the upstream call short.
			return nil, llm.Usage{}, err
		}
		return nil, llm.Usage{}, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer was cut off"}
	}
	// Same format: the upstream's bytes go to the client with only the model replaced, and
	// only the usage is read. Another format: decode and encode.
	var (
		usage llm.Usage
		ans   []byte
		resp  *llm.Response // the decoded answer, when it was decoded
	)
	if x.expert.Kind == x.client {
		// One pass over the answer's top level serves the usage, the trace's facts and the
		// model's rewrite.
		var view jsonview.View
		if view.Parse(r) != nil {
			usage, err = convert.ResponseUsage(x.expert.Kind, r) // its error for an answer that is no object
		} else if usage, err = convert.ResponseUsageOf(x.expert.Kind, &view); err == nil {
			if x.tr != nil {
				x.noteRelayedAnswer(&view)
			}
			ans = convert.SetModelOf((*out)[:0], &view, x.model.ID)
			*out = ans
		}
	} else {
		if resp, err = convert.DecodeResponse(x.expert.Kind, r); err == nil {
			if x.tr != nil {
				x.noteAnswer(resp)
			}
			if resp.Usage.OutputTokens <= 0 {
				x.answerChars = answerChars(resp)
			}
			// The answer the gateway writes shows what is billed: the counts the upstream did
			// not report as Settle bills them (trial h14 D2: it showed 0 tokens, billed an
			// estimate). The usage returned, settled, traced and recorded, stays the
			// upstream's: Settle bills it the same.
			usage = resp.Usage
			resp.Usage = x.billedUsage(usage, 0)
			ans, err = convert.EncodeResponse(x.client, resp, convert.Meta{ID: ResponseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID, Request: x.ir})
		}
	}
	if err == nil && usage.OutputTokens <= 0 && resp == nil {
		// An upstream that reports no output (one that is not quite the provider's API), or a
		// count below zero, is billed for the answer's text and tool arguments, four
		// characters a token, as a stream without usage is. Rare: the same-format answer is
		// decoded only then. Its bytes are relayed as the upstream wrote them, usage included.
		if resp, _ = convert.DecodeResponse(x.expert.Kind, r); resp != nil {
			x.answerChars = answerChars(resp)
		}
	}
	if err != nil {
		x.SettleUndelivered(usage, "upstream_malformed")
		x.Logger().Error("unusable upstream answer", "expert", x.expert.Key, "err", err)
		var e *apierror.Error
		if !errors.As(err, &e) {
			err = &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
		}
		return nil, usage, err
	}
	return ans, usage, nil
}

// answerChars are the characters of resp's text and tool arguments: what its output is billed
// by when the upstream did not report it (four characters a token).
func answerChars(resp *llm.Response) int {
	n := len(resp.Text)
	for _, c := range resp.ToolCalls {
		n += len(c.Arguments)
	}
	return n
}

// neutralAnswer reads the upstream's complete answer into the neutral form, for an in-process
// caller: the upstream's id and model are replaced by the gateway's (the client never sees the
// upstream's model id). On failure the exchange is settled already (nothing billed), as
// Answer's.
func (x *Exchange) neutralAnswer() (*llm.Response, error) {
	t0 := time.Now()
	raw, err := readAnswer(x.res, nil)
	x.upstreamWait += time.Since(t0)
	if err != nil {
		x.SettleUndelivered(llm.Usage{}, "upstream_read_failed")
		return nil, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer was cut off"}
	}
	resp, err := convert.DecodeResponse(x.expert.Kind, raw)
	if err != nil {
		x.SettleUndelivered(llm.Usage{}, "upstream_malformed")
		x.Logger().Error("unusable upstream answer to an agent's call", "expert", x.expert.Key, "err", err)
		return nil, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
	}
	if x.tr != nil {
		x.noteAnswer(resp)
	}
	if resp.Usage.OutputTokens <= 0 {
		// Billed for its text and tool arguments, as an HTTP answer without usage is (the
		// review of e142fb0: an agent's step was billed no output).
		x.answerChars = answerChars(resp)
	}
	resp.ID, resp.Model = ResponseID(x.client, x.requestID), x.model.ID
	return resp, nil
}

// readAnswer appends a complete upstream answer, at most maxResponseBytes, to dst.
func readAnswer(res *http.Response, dst []byte) ([]byte, error) {
	return readbody.Append(dst, res.Body, res.ContentLength, maxResponseBytes)
}

// Heartbeat is the keep-alive interval of a streamed answer (Options.Heartbeat): a caller
// writing the stream sends a keep-alive after this long without an event, and cuts the
// upstream off (CloseUpstream) after MaxSilentHeartbeats of them in a row.
func (x *Exchange) Heartbeat() time.Duration { return x.eng.heartbeat }
