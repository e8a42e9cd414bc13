package exchange

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/convert"
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

// Serving is what the response's head says of how the answer is served: the key of the
// expert serving it ("provider/model"), the advisory request fields and tools that expert
// could not use and was not sent, and the output bound beyond the limit of the model (or of
// that expert) with the limit it was lowered to ("max_tokens=8192"; "" when none was). It may
// be called from any goroutine while a stream runs (an edge's heartbeat commits the head of a
// stream whose events are held: Stream); while a stream fails over it names the expert that
// failed, until the next one has answered.
func (x *Exchange) Serving() (expert string, dropped []string, clamped string) {
	x.headMu.Lock()
	defer x.headMu.Unlock()
	return x.expert.Key, x.dropped, x.clamped
}

// FittedBound is the output bound the request was fitted to, its client having given none and
// its caller's credit not covering the model's whole bound (docs/billing.md, "A request without
// an output bound is fitted to the credit"), as the upstream serving it was sent it: the bound
// reserved, or the expert's own limit when that is lower, and the most output billed. It is 0
// when the request was not fitted. Like Serving it may be called from any goroutine while a
// stream runs.
func (x *Exchange) FittedBound() int {
	x.headMu.Lock()
	defer x.headMu.Unlock()
	return x.fittedFor(x.expert)
}

// fittedFor is the fitted bound expert e is sent: the bound reserved, lowered to e's own output
// limit when that is below it (callNext sends it no more); 0 when the request was not fitted.
func (x *Exchange) fittedFor(e routing.Expert) int {
	if x.fitted > 0 && e.MaxOutputTokens > 0 {
		return min(x.fitted, e.MaxOutputTokens)
	}
	return x.fitted
}

// UpstreamWait is the time spent waiting for upstreams so far (calls, answer reads): the part
// of the request's duration that is not the gateway's own.
func (x *Exchange) UpstreamWait() time.Duration { return x.upstreamWait }

// Logger is the engine's logger with the request id.
func (x *Exchange) Logger() *slog.Logger { return x.eng.logger(x.requestID) }

// Close releases the upstream response (and a non-streamed answer's buffer). Call it once the
// exchange is settled.
func (x *Exchange) Close() error {
	for _, b := range []**[]byte{&x.answer, &x.out} {
		if *b != nil {
			putAnswerBuffer(*b)
			*b = nil
		}
	}
	return x.res.Body.Close()
}

// maxPooledAnswer bounds the answer buffers kept for reuse; larger answers get buffers of
// their own.
const maxPooledAnswer = 256 << 10

// answerBuffers recycles the buffers non-streamed answers are read into (readAnswerOf) and
// written out from (Answer), which live until the exchange is closed.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

func putAnswerBuffer(b *[]byte) {
	if cap(*b) <= maxPooledAnswer {
		answerBuffers.Put(b)
	}
}

// readAnswerOf reads expert e's complete non-streamed answer res into
// the exchange, and reads what settling it needs: for the client's own format its top level
// and usage, for another its decoded form. An answer cut short, too large or malformed is an
// error, an *apierror.Error for the client, with the status its usage record would carry
// (upstream_read_failed or upstream_malformed); one that carries an error in place of the
// answer (a 200 with an error object) is the failed call's error the error stands for
// (provider.AnswerError; provider.ErrorInAnswer reports it), with its error.type (errorType). The response
// is closed then, and the caller may try the next expert, nothing having reached the client.
func (x *Exchange) readAnswerOf(e routing.Expert, res *http.Response) (status string, err error) {
	buf := answerBuffers.Get().(*[]byte)
	t1 := time.Now()
	*buf, err = readAnswer(res, (*buf)[:0])
	x.upstreamWait += time.Since(t1)
	x.answerUsage, x.answerResp = llm.Usage{}, nil
	if err == nil {
		if e.Kind == x.client {
			// One pass over the answer's top level serves the usage, the trace's facts and the
			// model's rewrite (Answer).
			if x.answerView.Parse(*buf) != nil {
				_, err = convert.ResponseUsage(e.Kind, *buf) // its error for an answer that is no object
				if err == nil {
					err = errors.New("the answer is not a JSON object")
				}
			} else {
				x.answerUsage, err = convert.ResponseUsageOf(e.Kind, &x.answerView)
			}
		} else if x.answerResp, err = convert.DecodeResponse(e.Kind, *buf); err == nil {
			x.answerUsage = x.answerResp.Usage
		}
		if err != nil {
			// An error in place of the answer is judged by its kind, as a status is (the
			// caller's failed call's path), its words cleared of the key the call was sent
			// with.
			if up := x.eng.upstreams[e.Provider]; up != nil {
				if ae := up.AnswerError(res.StatusCode, *buf, x.cred); ae != nil {
					_ = res.Body.Close()
					putAnswerBuffer(buf)
					return errorType(ae), ae
				}
			}
			// An error in a 200 body may quote the key the call was sent with.
			err = x.withoutKey(e, err)
			x.Logger().Error("unusable upstream answer", "expert", e.Key, "err", err)
			var ae *apierror.Error
			if !errors.As(err, &ae) {
				err = &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
			}
			status = "upstream_malformed"
		}
	} else {
		err = &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer was cut off"}
		status = "upstream_read_failed"
	}
	if err != nil {
		_ = res.Body.Close()
		putAnswerBuffer(buf)
		return status, err
	}
	x.answer = buf
	return "", nil
}

// AnswerDropped names the parts of a translated answer (one from an expert of another format
// than the client's) that the client's format has no place for, as "answer." and their path in
// the upstream's answer (answer.content[].thinking); nil for an answer relayed in its own
// format. Valid after Answer.
func (x *Exchange) AnswerDropped() []string {
	if x.expert.Kind == x.client || x.answerResp == nil || len(x.answerResp.Dropped) == 0 {
		return nil
	}
	names := make([]string, len(x.answerResp.Dropped))
	for i, d := range x.answerResp.Dropped {
		names[i] = "answer." + d
	}
	return names
}

// Answer puts the upstream's complete answer, which start read (an unusable one failed over or
// failed there), in the client's format, and returns the answer's bytes, valid until Close, and
// its usage. The caller settles a delivered answer with Settle(usage, 0, "ok") once the client
// has it. On failure (an answer that cannot be written in the client's format) the exchange is
// settled already (nothing billed) and the error is an upstream failure (*apierror.Error).
func (x *Exchange) Answer() ([]byte, llm.Usage, error) {
	r := *x.answer
	// Same format: the upstream's bytes go to the client with only the model replaced, and
	// only the usage is read. Another format: encode what start decoded.
	var (
		usage = x.answerUsage
		ans   []byte
		resp  = x.answerResp // the decoded answer, when it was decoded
		err   error
	)
	if x.expert.Kind == x.client {
		if x.tr != nil {
			x.noteRelayedAnswer(&x.answerView)
		}
		x.out = answerBuffers.Get().(*[]byte)
		ans = convert.SetModelOf((*x.out)[:0], &x.answerView, x.model.ID)
		*x.out = ans
	} else {
		if x.tr != nil {
			x.noteAnswer(resp)
		}
		if resp.Usage.OutputTokens <= 0 {
			x.answerChars = answerChars(resp, x.expert.Kind, r, x.calls.choices)
		}
		// The answer the gateway writes shows what is billed: the counts the upstream did not
		// report as Settle bills them (trial h14 D2: it showed 0 tokens, billed an estimate).
		// The usage returned, settled, traced and recorded, stays the upstream's: Settle bills
		// it the same.
		shown := *resp
		shown.Usage = x.billedUsage(usage, 0)
		ans, err = convert.EncodeResponse(x.client, &shown, convert.Meta{ID: ResponseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID, Request: x.echoedRequest()})
	}
	if err == nil && usage.OutputTokens <= 0 && resp == nil {
		// An upstream that reports no output (one that is not quite the provider's API), or a
		// count below zero, is billed for the answer's text, tool arguments and thinking, four
		// characters a token, as a stream without usage is. Rare: the same-format answer is
		// decoded only then. Its bytes are relayed as the upstream wrote them, usage included.
		if resp, _ = convert.DecodeResponse(x.expert.Kind, r); resp != nil {
			x.answerChars = answerChars(resp, x.expert.Kind, r, x.calls.choices)
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

// echoedRequest is the request a translated whole answer echoes (a Responses answer's
// max_output_tokens and the rest): the client's, with the bound the serving expert was sent
// when the request was fitted to its credit, as a Responses stream's response objects
// (responsesEcho) and a Responses upstream's own answer, relayed, give it.
func (x *Exchange) echoedRequest() *llm.Request {
	f := x.fittedFor(x.expert)
	if f == 0 || x.ir == nil || x.client != llm.FormatResponses {
		return x.ir
	}
	r := *x.ir
	r.MaxTokens = f
	return &r
}

// answerChars are the characters of resp's text and tool arguments, and of the thinking and
// reasoning its upstream's answer body, of format f, carries that resp does not
// (convert.UnmodelledOutput): what its output is billed by when the upstream did not report it
// (four characters a token). An answer to a request for several choices (only a chat upstream
// serves one) is billed every choice's, which resp, holding the first, does not have
// (convert.ChatChoicesOutput).
func answerChars(resp *llm.Response, f llm.Format, body []byte, choices int) int {
	if choices > 1 && f == llm.FormatChat {
		return convert.ChatChoicesOutput(body)
	}
	n := len(resp.Text) + len(resp.Refusal) + convert.UnmodelledOutput(f, body)
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
	// start read the answer whole (readAnswerOf); one of the caller's own format was parsed
	// only to its top level.
	resp := x.answerResp
	if resp == nil {
		var err error
		if resp, err = convert.DecodeResponse(x.expert.Kind, *x.answer); err != nil {
			x.SettleUndelivered(x.answerUsage, "upstream_malformed")
			x.Logger().Error("unusable upstream answer to an agent's call", "expert", x.expert.Key, "err", err)
			return nil, &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream answer could not be read"}
		}
	}
	if x.tr != nil {
		x.noteAnswer(resp)
	}
	if resp.Usage.OutputTokens <= 0 {
		// Billed for its text, tool arguments and thinking, as an HTTP answer without usage is
		// (the review of e142fb0: an agent's step was billed no output).
		x.answerChars = answerChars(resp, x.expert.Kind, *x.answer, x.calls.choices)
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

// withoutKey is err, the failure read from expert e's answer (an error in a 200 body), with the
// key its call was sent with (x.cred, or the operator's) cleared from its text and from what
// the client may be shown of it (an *apierror.Error's message, param and code): an upstream may
// quote back the key it was sent (provider.Upstream.WithoutKey). err itself when it holds no
// key.
func (x *Exchange) withoutKey(e routing.Expert, err error) error {
	up := x.eng.upstreams[e.Provider]
	if up == nil {
		return err
	}
	text := err.Error()
	cleared := up.WithoutKey(x.cred, text)
	var ae *apierror.Error
	if !errors.As(err, &ae) {
		if cleared == text {
			return err
		}
		return errors.New(cleared)
	}
	client := *ae
	client.Message, client.Param, client.Code = up.WithoutKey(x.cred, ae.Message), up.WithoutKey(x.cred, ae.Param), up.WithoutKey(x.cred, ae.Code)
	if cleared == text && client == *ae {
		return err
	}
	return &keyCleared{text: cleared, client: &client}
}

// keyCleared is a failure whose text and client's error were cleared of the upstream key
// (withoutKey): its text is what the log and the trace get, client what errors.As finds.
type keyCleared struct {
	text   string
	client *apierror.Error
}

func (e *keyCleared) Error() string { return e.text }

func (e *keyCleared) Unwrap() error { return e.client }
