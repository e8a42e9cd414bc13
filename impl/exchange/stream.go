package exchange

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
	"github.com/tollgate/tollgate/impl/streamconv"
)

// MaxSilentHeartbeats is how many heartbeat intervals in a row an upstream stream may stay
// silent (10 minutes at the default 15 s) before the gateway cuts it off with an in-band error,
// so that a hung upstream does not hold the request, its connection and its reservation for
// ever.
const MaxSilentHeartbeats = 40

// StreamWriter is where Stream writes a streamed answer's events, framed by the caller (SSE
// on the HTTP routes, WebSocket messages on the Responses socket). The caller may write
// keep-alives of its own between Stream's writes, and cut a silent upstream off with
// CloseUpstream; its writer then reports Silenced.
type StreamWriter interface {
	// Write frames events onto the stream, unflushed.
	Write(evs []sse.Event) error
	// Flush sends what was written and not yet flushed.
	Flush() error
	// Silenced reports whether the writer cut the upstream off for silence.
	Silenced() bool
	// Close ends the stream: nothing is written after it.
	Close()
	// Refuse ends the stream before any of it was sent, and reports true, when nothing was:
	// no event, no keep-alive, no head (an HTTP response's status and headers). The caller
	// then answers the error Stream returns in place of the stream (an HTTP status in its
	// route's envelope). It reports false when something was sent, or when the writer has no
	// other way to answer (the Responses WebSocket): the stream then ends in its format, with
	// the in-band error.
	Refuse() bool
}

// CloseUpstream interrupts the upstream stream's read (a silent upstream, a shutdown): Stream
// then ends the stream with its format's in-band error. It may be called from any goroutine.
func (x *Exchange) CloseUpstream() {
	if res := x.live.Load(); res != nil {
		_ = res.Body.Close()
	}
}

// maxHeld and maxHeldBytes bound the events Stream holds back while an upstream has produced
// no output yet (see Stream), in number and in the bytes of their data: an event that would take
// the held events past either goes out with them, and so does the rest of the stream, whatever
// comes next (the stream is committed to its expert: no other takes over should it fail). An
// opening before the first output is a few small events (a message_start, a role-only chunk,
// pings), and a Responses stream's response.created and response.in_progress, which echo the
// request's instructions and tools: 1 MiB holds those of any usual request, twice over. Only an
// event of up to the reader's bound (32 MiB, impl/sse) is held beyond it, in the reader's own
// buffer; before the bound in bytes, 64 events of up to 32 MiB could be copied and held, 2 GiB a
// request.
const (
	maxHeld      = 64
	maxHeldBytes = 1 << 20
)

// heldOpening are the events a stream holds back while its upstream has produced no output yet
// (see Stream): copies of them, bounded by maxHeld and maxHeldBytes. Every stream holds its
// opening, so that holding one costs little: the first few events are kept in inline, within the
// exchange itself, and the events of one hold share one copy of their data (one allocation).
type heldOpening struct {
	events []sse.Event
	bytes  int
	inline [4]sse.Event
}

// hold keeps copies of evs and reports true, or keeps nothing and reports false when they
// would take the held events past maxHeld or maxHeldBytes.
func (h *heldOpening) hold(evs []sse.Event) bool {
	n := 0
	for _, ev := range evs {
		n += len(ev.Data)
	}
	if h.bytes+n > maxHeldBytes || len(h.events)+len(evs) > maxHeld {
		return false
	}
	h.bytes += n
	if h.events == nil {
		h.events = h.inline[:0]
	}
	data := make([]byte, n)
	for _, ev := range evs {
		held := sse.Event{Name: ev.Name, ID: ev.ID}
		if k := len(ev.Data); k > 0 {
			held.Data = data[:k:k]
			copy(held.Data, ev.Data)
			data = data[k:]
		}
		h.events = append(h.events, held)
	}
	return true
}

// release forgets the held events once they were written or are to go to no one. Their array
// is kept for the events the next expert's stream holds; the copies are dropped from it, so
// that an opening of up to maxHeldBytes is not kept for as long as the stream that follows it
// (the rest of the same stream, or the next expert's after a failover) lasts.
func (h *heldOpening) release() {
	clear(h.events)
	h.events, h.bytes = h.events[:0], 0
}

// Stream relays the upstream's streamed answer to w in the client's format and settles the
// exchange: what the upstream produced is billed, also when the client goes away; nothing when
// the upstream failed before producing anything. It returns once the stream has ended; w is
// closed by then.
//
// The events that come before the upstream's first output (a text or tool call delta, a stop,
// thinking: the start of a message, its usage so far, pings) are held back rather than
// written. While another expert could still be called, an upstream that fails
// before its first output (its stream cut, unreadable, or an in-band error of its own making,
// such as an overload right after its head) then fails over to the next expert unseen, as a
// call that fails before its head does, and the client gets one stream, from the expert that
// answered (trial D8). The caller leaves its response's head unwritten until the first event
// (the HTTP edge does), so that the head names the expert that serves the stream (Serving); a
// keep-alive the caller must send while the events are held commits the head with the expert
// serving at that moment.
//
// When no expert answers in its place and nothing was sent yet (w.Refuse), a stream whose
// upstream ended or could not be read before its first output, or refused the request in its
// stream before it (an in-band invalid_request_error), is not a 200 stream ending with an
// error: Stream returns the error the client is to get instead, a 502 in the gateway's words
// or the 400 with the upstream's words that a request not streamed gets (refusedBeforeOutput).
// Otherwise it returns nil.
func (x *Exchange) Stream(w StreamWriter) error {
	sw := streamWriter{w}
	// When a shutdown's grace period is over (EndStreams), the upstream read is interrupted and
	// the stream ends with the in-band error below: set up once a stream, nothing per event.
	defer context.AfterFunc(x.eng.streamsEnd, x.CloseUpstream)()
	// The meter checkpoints the stream's progress, so that a crash of this process (SIGKILL)
	// does not take what the stream delivered out of the books (impl/billing, "Leases and
	// crashes"): after each event, one lock of the stream's own, no allocation.
	x.reserve.TrackStream(x.checkpointRecord)
	for {
		again, refused := x.relayStream(sw)
		if !again {
			return refused
		}
		// The upstream failed before its first output, and another expert answered.
	}
}

// streamResult is how one upstream's stream went (relayStream).
type streamResult struct {
	status string
	// text is the output characters seen, for billing when no usage arrives.
	text int
	// usage is what the upstream reported (the encoder's, or the billed counts the stream
	// ended with).
	usage llm.Usage
	// upstreamFault: the stream failed by the upstream's doing, which counts against the
	// expert's health, unless ownKeys says that it was the rate limit of the account's own
	// key (ownKeysDoing): another expert may still serve the request.
	upstreamFault, ownKeys bool
	// cause is why the upstream failed, for the try's span should another expert take over;
	// held are the events held back (see Stream): the exchange's, or none.
	cause error
	held  *heldOpening
	// failure is the in-band error the client is to get (errType, msg), written by finish
	// after the held events; none when the stream ended otherwise. An upstream's in-band error
	// is among the events written (errType and msg are its type and public words).
	failure      bool
	errType, msg string
	enc          streamconv.Encoder
}

// finish writes what the stream still owes the client once it is not failed over: the events
// held back, and the in-band error of a failure.
func (r *streamResult) finish(sw streamWriter) {
	if r.held != nil && len(r.held.events) > 0 {
		_ = sw.write(r.held.events)
		r.held.release()
	}
	if r.failure {
		_ = sw.send(r.enc.Fail(r.errType, r.msg, nil))
		return
	}
	_ = sw.flush()
}

// relayStream relays the current upstream's stream (x.res) to sw, holding its events back
// (x.held) while it has produced no output yet. It reports again when that upstream failed
// before its first output and another expert answered instead (failOverStream), whose stream
// is then to be relayed; otherwise it ends the stream (what is owed the client, then sw
// closed) and settles the exchange, and refused is the error the client gets in place of the
// stream when the stream was refused (see Stream). (Stream's own frame stays small: a stream's
// goroutine stack is most of what an open stream costs in memory.)
func (x *Exchange) relayStream(sw streamWriter) (again bool, refused error) {
	dec := streamconv.NewDecoder(x.expert.Kind)
	meta := streamconv.Meta{
		ID: ResponseID(x.client, x.requestID), Created: x.started.Unix(), Model: x.model.ID,
		IncludeUsage: x.include, InputTokensEstimate: x.inputEst, ResponsesEcho: x.responsesEcho(),
	}
	// An upstream of the client's format is relayed event by event (streamconv.Relay): the
	// encoder follows it only to end the stream in the format should it fail, with the
	// upstream's own id.
	meta.Relayed = x.expert.Kind == x.client
	enc := streamconv.NewEncoder(x.client, meta)
	var relay *streamconv.Relay
	if meta.Relayed {
		relay = streamconv.NewRelay(x.client, x.model.ID, x.include, enc)
	}
	// The upstream is read in this goroutine: an event goes out as soon as it is read, with no
	// hand-off between goroutines. The first events are flushed as soon as they are written;
	// after them, events are flushed before every read from the upstream, the only place the
	// gateway can wait: events that arrived together leave together, and none waits for the
	// upstream's next one. While the upstream is silent, the caller's writer sends keep-alives
	// of its own. A client that goes away ends the request's context, which interrupts the
	// upstream read, or fails the next flush.
	var (
		upstream  = &flushBeforeRead{r: x.res.Body, sw: sw}
		rd        = sse.NewReader(upstream)
		neutral   []llm.Event
		out       []sse.Event
		res       = streamResult{status: "ok", held: &x.held, enc: enc}
		wrote     bool      // an event was written
		sentFirst bool      // the first events were flushed
		reported  llm.Usage // the upstream's usage, when filled (the stream's end shows the billed counts)
		filled    bool      // reported holds the upstream's usage
		// holding: the events go to res.held, not to the client (see Stream), until the
		// upstream's first output.
		holding = true
		// output: the upstream has produced some of the answer.
		output bool
		// unmodelled: the characters of output the neutral events do not carry (thinking,
		// reasoning summaries, server tools' input), which the provider bills, counted by
		// counter when the stream is translated (the relay counts its own).
		unmodelled int
		counter    = streamconv.NewUnmodelledCounter(x.expert.Kind)
	)
	// write writes evs to the client, or holds a copy of them back until the upstream's first
	// output; evs of that output, or that would take the held events past maxHeld or
	// maxHeldBytes, are written after the held events instead (not copied), and the stream is
	// no longer held (see maxHeld).
	write := func(evs []sse.Event) error {
		if !holding {
			return sw.write(evs)
		}
		if !output && res.held.hold(evs) {
			return nil
		}
		holding = false
		err := sw.write(res.held.events)
		res.held.release()
		if err != nil {
			return err
		}
		return sw.write(evs)
	}
	fail := func(errType, message string) {
		res.failure, res.errType, res.msg = true, errType, message
	}
loop:
	for {
		ev, err := rd.Next()
		if err != nil {
			switch {
			case x.ctx.Err() != nil || upstream.flushErr != nil:
				res.status = "client_disconnected"
			case x.eng.streamsEnd.Err() != nil:
				res.status = "shutdown"
				fail("overloaded_error", "the gateway is shutting down; retry the request")
			case sw.silenced():
				res.status = "upstream_stalled"
				x.Logger().Warn("upstream stream silent for too long; cut off", "expert", x.expert.Key, "silence", x.eng.heartbeat*MaxSilentHeartbeats)
				fail("api_error", "the upstream sent nothing for too long")
			default:
				res.status, res.cause = "upstream_cut_off", err
				x.Logger().Warn("upstream stream ended early", "expert", x.expert.Key, "err", err)
				fail("api_error", "the upstream stream ended unexpectedly")
			}
			break
		}
		var done bool
		neutral, done, err = dec.Decode(ev, neutral[:0])
		if err != nil {
			res.status, res.cause = "upstream_malformed", err
			x.Logger().Warn("malformed upstream event", "expert", x.expert.Key, "err", err)
			fail("api_error", "the upstream stream could not be read")
			break
		}
		if relay == nil {
			// Thinking that a translated stream's client does not see is output all the
			// same, which the provider bills, as it is when relayed (task h7).
			unmodelled += counter.Count(ev)
		}
		// The encoder reuses its buffer on every call: write each call's events at once.
		failed := false
		for _, n := range neutral {
			if x.tr != nil {
				x.noteEvent(&n)
			}
			switch n.Kind {
			case llm.EventTextDelta:
				res.text += len(n.Text)
				output = true
			case llm.EventToolCallDelta:
				res.text += len(n.Arguments)
				output = true
			case llm.EventToolCallStart, llm.EventStop:
				output = true
			case llm.EventError:
				failed = true
				res.status = "upstream_error"
				res.upstreamFault = n.Err == nil || upstreamsFault(apierror.KindOfType(n.Err.Type))
				res.ownKeys = x.cred != nil && n.Err != nil && apierror.KindOfType(n.Err.Type) == apierror.KindRateLimited
				res.cause = errUpstreamInBand
				n = x.inBandError(n)
				// The error as the client gets it, should the stream be refused in its place
				// (refusedBeforeOutput); the event itself goes out with the stream otherwise.
				res.errType, res.msg = n.Err.Type, n.Err.Message
			}
			out = enc.Encode(n, out[:0])
			if relay != nil && n.Kind != llm.EventError {
				continue // the upstream's own event goes out instead, below
			}
			if err := write(out); err != nil {
				res.status = "client_disconnected"
				break loop
			}
			wrote = wrote || len(out) > 0
		}
		if relay != nil && !failed {
			out = relay.Event(ev, out[:0])
			if err := write(out); err != nil {
				res.status = "client_disconnected"
				break
			}
			wrote = wrote || len(out) > 0
		}
		if relay != nil {
			unmodelled = relay.Unmodelled()
		}
		output = output || unmodelled > 0
		x.reserve.Progress(enc.Usage(), res.text+unmodelled)
		if holding && (output || done) {
			// The upstream has begun its answer: what was held goes out, and the rest
			// follows as it comes.
			holding = false
			err := sw.write(res.held.events)
			res.held.release()
			if err != nil {
				res.status = "client_disconnected"
				break
			}
		}
		if wrote && !sentFirst && !holding {
			// The first events leave at once, with the response head: the time to the first
			// byte does not wait for events already buffered behind them.
			sentFirst = true
			x.ttft = time.Since(x.started)
			if err := sw.flush(); err != nil {
				res.status = "client_disconnected"
				break
			}
		}
		if failed {
			if !holding {
				_ = sw.flush()
			}
			if !done {
				upstream.noFlush = true
				x.usageAfterError(rd, dec, enc)
			}
			break
		}
		if done {
			if relay == nil {
				out = out[:0]
				if u := enc.Usage(); u.InputTokens <= 0 || u.OutputTokens <= 0 {
					// The usage the stream ends with is what is billed: the counts the upstream
					// did not report as Settle bills them (trial h14 D2). The usage settled,
					// traced and recorded stays the upstream's.
					reported, filled = u, true
					out = enc.Encode(llm.Event{Kind: llm.EventUsage, Usage: x.billedUsage(u, res.text+unmodelled)}, out)
				}
				out = enc.Finish(out)
			} else {
				out = out[:0] // the upstream's terminal event has been relayed
			}
			if err := sw.send(out); err != nil {
				res.status = "client_disconnected"
				break
			}
			x.drainUpstream()
			break
		}
	}
	x.upstreamWait += upstream.wait
	// Thinking and the like: output the provider bills, billed from its length if no usage
	// says so, whether the client has it (relayed) or not (translated).
	if relay != nil {
		unmodelled = relay.Unmodelled() // also the event whose write failed
	}
	res.text += unmodelled
	res.usage = enc.Usage()
	if filled {
		res.usage = reported
	}
	if holding {
		// The upstream failed before its first output: another expert may answer instead,
		// unless the failure was the request's or the client's doing, or a shutdown's.
		produced := res.text > 0 || res.usage.OutputTokens > 0 || res.usage.HostedCalls.Any()
		brokenByUpstream := res.status == "upstream_cut_off" || res.status == "upstream_malformed" || res.status == "upstream_error" && res.upstreamFault
		if brokenByUpstream && !produced && x.ctx.Err() == nil && x.eng.streamsEnd.Err() == nil {
			switch x.failOverStream(res.status, res.cause, !res.ownKeys) {
			case failOverAnswered:
				// The failed expert's opening goes to no one.
				x.held.release()
				return true, nil
			case failOverClientGone:
				// The client left while the next expert had the request: billed its input, as
				// a client that leaves before any expert answered is (start). The failed
				// expert's events and error go to no one.
				x.held.release()
				res = streamResult{status: "client_disconnected", enc: enc}
			case failOverShutdown:
				// The shutdown's grace ended while the next expert had the request and had not
				// answered: the client is told to retry, and nothing is billed, as start does
				// for a request whose upstream is silent then. The failed expert's events and
				// error go to no one, and a fresh encoder writes the error (the failed
				// expert's has ended its stream with that expert's error).
				x.held.release()
				res = streamResult{status: "shutdown", enc: streamconv.NewEncoder(x.client, meta)}
				fail("overloaded_error", "the gateway is shutting down; retry the request")
			}
		}
		if e := x.refusedBeforeOutput(&res, produced); e != nil && sw.refuse() {
			// Nothing was sent: the client gets the error in place of the stream, and the
			// opening goes to no one.
			x.held.release()
			sw.close()
			x.settleRefused(&res)
			return false, e
		}
	}
	res.finish(sw)
	sw.close()
	x.settleStream(&res)
	return false, nil
}

// refusedBeforeOutput is the error a client is to get in place of a stream that ended, by r,
// before its upstream's first output and with no other expert answering instead, when that
// error can be told as an answer's status rather than in the stream (Stream): the upstream's
// stream ended (its end, a cut) or could not be read, a 502 in the gateway's words; or the
// upstream refused the request in its stream (an in-band invalid_request_error), the 400 that
// the same refusal before the stream's head gets, with the upstream's words as the client may
// read them. Nil for any other end: an in-band rate limit, overload or server error, a client
// gone, a shutdown, a silent upstream cut off, or an upstream that produced something.
func (x *Exchange) refusedBeforeOutput(r *streamResult, produced bool) *apierror.Error {
	if produced {
		return nil
	}
	switch {
	case r.status == "upstream_cut_off":
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream stream ended before its first output"}
	case r.status == "upstream_malformed":
		return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream stream could not be read"}
	case r.status == "upstream_error" && apierror.KindOfType(r.errType) == apierror.KindInvalidRequest:
		// r.msg is the upstream's words in public ones already (inBandError).
		e := &apierror.Error{Kind: apierror.KindInvalidRequest, Message: "the upstream refused the request: " + r.msg}
		if t := strings.ToLower(r.errType); t != "invalid_request_error" && plainCode(t) {
			e.Code = t // context_length_exceeded, say
		}
		return e
	}
	return nil
}

// plainCode reports whether t, an upstream's error type, may be shown to the client as an
// error code: 1 to 64 lower-case letters, digits and '_', none of the upstream's own words.
func plainCode(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// settleRefused settles an exchange whose stream was refused before its first output
// (refusedBeforeOutput): as a request refused before the stream's head is. An upstream that
// refused the request in its stream leaves no usage record, its reservation released, and
// counts against no expert's health; an upstream whose stream ended or could not be read is a
// failed try, counted against the expert (settleStream), with a usage record of its status at
// cost 0, as an answer that is not an event stream has.
func (x *Exchange) settleRefused(r *streamResult) {
	if r.status != "upstream_error" {
		x.settleStream(r)
		return
	}
	// The try ends as failed (its span, its operation), as a refusal answered in place of
	// a whole answer does (callNext).
	x.usage = r.usage
	x.tries.failAnswer(r.status, r.cause)
	x.attemptStart = time.Time{}
	if x.tr != nil {
		x.tr.attempt = nil
	}
	x.reserve.Release()
}

// errUpstreamInBand is the cause, for the try's span, of an upstream's in-band error.
var errUpstreamInBand = errors.New("the upstream sent an error event before its first output")

// failOver is how a stream's failover ended (failOverStream).
type failOver uint8

const (
	// failOverNone: no next expert answered, and the client gets the failed expert's failure.
	failOverNone failOver = iota
	// failOverAnswered: a next expert answered, whose stream is relayed.
	failOverAnswered
	// failOverClientGone: the client went away while a next expert had the request.
	failOverClientGone
	// failOverShutdown: the shutdown's grace ended while a next expert had the request.
	failOverShutdown
)

// failOverStream ends the current expert's try as failed (status, cause: its span, its
// operation, its health), closes its stream, and calls the next experts: failOverAnswered when
// one answered, whose stream Stream then relays. When none does, the exchange keeps the failed
// expert, whose failure the client then gets; except when the client went away, or a
// shutdown's grace ended, while one of the next experts had the request (its prompt sent, no
// refusal): failOverClientGone or failOverShutdown, and the exchange names that expert, so that
// the request is settled as start settles a client gone before any answer (billed its input,
// whose provider has the prompt and bills it) or a request whose upstream was silent at the end
// of grace (told to retry, not billed), not as the failed expert's try with its status.
func (x *Exchange) failOverStream(status string, cause error, health bool) failOver {
	failed := x.expert
	x.tries.failAnswer(status, cause)
	x.attemptStart = time.Time{} // its operation is counted: finishAttempt counts none for it
	if x.tr != nil {
		x.tr.attempt, x.tr.responseID, x.tr.responseModel, x.tr.finishReason = nil, "", "", ""
		x.tr.output.Reset()
	}
	if health {
		x.eng.router.ObserveBroken(failed.Key)
	}
	x.Logger().Warn("upstream stream failed before its first output; "+x.onward(), "expert", failed.Key, "status", status)
	x.CloseUpstream()
	from := x.calls.next // the first of the experts called now
	callCtx, unlink := x.eng.upstreamContext(x.ctx)
	ok := x.callNext(callCtx)
	unlink()
	if ok {
		return failOverAnswered
	}
	if a := &x.calls; a.calledAny && a.called >= from && !a.refused && (x.ctx.Err() != nil || x.eng.streamsEnd.Err() != nil) {
		// The client went away (start's condition for billing the input), or the shutdown's
		// grace ended, while a next expert had the request. That expert never answered: no
		// hosted tool of its was run.
		x.headMu.Lock()
		x.expert = a.order[a.called]
		x.headMu.Unlock()
		x.hostedBounds, x.askedOutput = llm.HostedCalls{}, 0
		if x.eng.streamsEnd.Err() != nil {
			return failOverShutdown
		}
		return failOverClientGone
	}
	// No other expert answered: the client gets the failed expert's failure, and its usage
	// record names it (the calls after it were refused before their heads). Its health was
	// observed here already.
	x.headMu.Lock()
	x.expert = failed
	x.headMu.Unlock()
	x.brokenObserved = true
	return failOverNone
}

// settleStream settles the exchange once its stream has ended.
func (x *Exchange) settleStream(r *streamResult) {
	status := r.status
	if !x.brokenObserved && (status == "upstream_cut_off" || status == "upstream_stalled" || status == "upstream_malformed" || status == "upstream_error" && r.upstreamFault && !r.ownKeys) {
		// The answer broke off by the upstream's failure: it counts against the expert's health
		// as a failure before its head would (trial D3), and so does an event it could not
		// read, as an unreadable non-streamed answer does. A client that left, a shutdown and
		// an in-band refusal of the request do not.
		x.eng.router.ObserveBroken(x.expert.Key)
	}
	if status != "ok" && status != "client_disconnected" && r.text == 0 && r.usage.OutputTokens == 0 && !r.usage.HostedCalls.Any() {
		// The upstream failed before producing anything: the client got only the error event,
		// which costs it nothing, as a non-streamed answer's 502 does not. (Searches the
		// upstream ran before failing were produced: the client has their results, and the
		// provider bills them.)
		x.SettleUndelivered(r.usage, status)
		return
	}
	x.Settle(r.usage, r.text, status)
}

// upstreamsFault reports whether an in-band error of kind k is of the upstream's making, as a
// 429 or a 5xx before the head is: not a refusal of the request, nor of the gateway's own
// credentials or credit at the provider (a 400, 401, 402 or 403 before the head counts against
// no expert either).
func upstreamsFault(k apierror.Kind) bool {
	switch k {
	case apierror.KindRateLimited, apierror.KindOverloaded, apierror.KindInternal, apierror.KindUpstream, apierror.KindGatewayTimeout:
		return true
	}
	return false
}

// inBandError is the error event the client gets for an upstream's in-band error: the
// upstream's type, and the gateway's own words unless the caller's request is at fault. What
// an upstream says of a rate limit or an outage can name the operator's organisation, the
// hidden upstream model and every tenant's combined usage; it goes to the log only.
func (x *Exchange) inBandError(ev llm.Event) llm.Event {
	if ev.Err == nil {
		ev.Err = &llm.StreamError{}
	}
	kind := apierror.KindOfType(ev.Err.Type)
	e := *ev.Err
	ev.Err = &e
	// The upstream may quote the key the stream was asked for with.
	if up := x.eng.upstreams[x.expert.Provider]; up != nil {
		e.Message = up.WithoutKey(x.cred, e.Message)
	}
	if kind == apierror.KindInvalidRequest {
		e.Message = apierror.Excerpt(inPublicWords(e.Message, x.expert.Model, x.model.ID), apierror.MaxQuotedLen)
		return ev
	}
	x.Logger().Warn("upstream error in the stream", "expert", x.expert.Key, "type", e.Type, "message", e.Message)
	switch kind {
	case apierror.KindRateLimited:
		e.Message = "the upstream is rate limited"
	case apierror.KindOverloaded:
		e.Message = "the upstream is overloaded"
	case apierror.KindUnauthenticated, apierror.KindInsufficientCredit, apierror.KindForbidden:
		// The gateway's own credentials or credit at the provider, not the client's.
		e.Type, e.Message = "upstream_error", "the upstream failed while streaming the answer"
	default:
		e.Message = "the upstream failed while streaming the answer"
	}
	return ev
}

// flushBeforeRead reads the upstream stream and, before each read, flushes the events written
// so far: a read is where the gateway may wait for the upstream. A failed flush (the client is
// gone) ends the stream and is kept in flushErr.
type flushBeforeRead struct {
	r        io.Reader
	sw       streamWriter
	flushErr error
	// noFlush is set once the client has its last event: reads no longer flush.
	noFlush bool
	// wait is the time spent in the upstream's reads (tollgate_added_seconds leaves it out).
	wait time.Duration
}

func (f *flushBeforeRead) Read(p []byte) (int, error) {
	if f.noFlush {
		return f.r.Read(p)
	}
	if err := f.sw.flush(); err != nil {
		f.flushErr = err
		return 0, err
	}
	t0 := time.Now()
	n, err := f.r.Read(p)
	f.wait += time.Since(t0)
	return n, err
}

// usageAfterErrorWait bounds the wait, after an upstream's in-band error, for the terminal
// event that may report its usage.
const usageAfterErrorWait = 500 * time.Millisecond

// usageAfterError reads what the upstream sends after its in-band error, up to its terminal
// event and for at most usageAfterErrorWait, for the usage reported there (a Responses
// upstream's response.failed, which §2.5 has follow the error event with the usage of what was
// generated): the encoder takes the usage for the bill; the client, which has its stream's end
// already, gets nothing more.
func (x *Exchange) usageAfterError(r *sse.Reader, dec streamconv.Decoder, enc streamconv.Encoder) {
	cut := time.AfterFunc(usageAfterErrorWait, func() { _ = x.res.Body.Close() })
	defer cut.Stop()
	var (
		neutral []llm.Event
		discard []sse.Event
	)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		var done bool
		if neutral, done, err = dec.Decode(ev, neutral[:0]); err != nil {
			return
		}
		for _, n := range neutral {
			if n.Kind == llm.EventUsage {
				discard = enc.Encode(n, discard[:0])
			}
		}
		if done {
			return
		}
	}
}

// streamEndWait bounds the wait, after an upstream stream's terminal event, for the end of its
// body.
const streamEndWait = 20 * time.Millisecond

// drainUpstream reads, briefly, the rest of the upstream stream after its terminal event. An
// upstream ends its body right after that event; read to the end, the connection goes back to
// the pool instead of being closed when the request's context ends, and the next stream does
// not pay for a new connection. An upstream that keeps the stream open is cut after
// streamEndWait.
func (x *Exchange) drainUpstream() {
	cut := time.AfterFunc(streamEndWait, func() { _ = x.res.Body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(x.res.Body, 64<<10))
	cut.Stop()
}

// streamWriter is Stream's view of its StreamWriter, with a send that writes and flushes.
type streamWriter struct{ w StreamWriter }

func (s streamWriter) write(evs []sse.Event) error { return s.w.Write(evs) }
func (s streamWriter) flush() error                { return s.w.Flush() }
func (s streamWriter) silenced() bool              { return s.w.Silenced() }
func (s streamWriter) close()                      { s.w.Close() }
func (s streamWriter) refuse() bool                { return s.w.Refuse() }

// send writes events and flushes them.
func (s streamWriter) send(evs []sse.Event) error {
	if err := s.w.Write(evs); err != nil {
		return err
	}
	return s.w.Flush()
}

// responsesEcho is what a Responses stream's response objects echo from the request (x.echo);
// for a request fitted to its credit, with max_output_tokens the bound the serving expert was
// sent, as OpenAI's response objects give the bound in effect: on the WebSocket mode, which
// has no head per response, response.created says so (docs/billing.md).
func (x *Exchange) responsesEcho() []byte {
	f := x.fittedFor(x.expert)
	if f == 0 || x.echo == nil {
		return x.echo
	}
	var r llm.Request
	if x.echoReq != nil {
		r = *x.echoReq
	}
	r.MaxTokens = f
	return convert.ResponsesEchoMembers(&r)
}
