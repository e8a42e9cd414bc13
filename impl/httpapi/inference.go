package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// Response headers of the inference routes.
const (
	// headerExpert names the upstream that served the request ("provider/model").
	headerExpert = "X-Tollgate-Expert"
	// headerDropped lists advisory request fields the chosen upstream could not use.
	headerDropped = "x-tollgate-dropped-fields"
	// headerClamped names an output bound beyond the limit of the model (or of the chosen
	// expert) and the limit it was lowered to, e.g. "max_tokens=8192".
	headerClamped = "x-tollgate-clamped-fields"
	// headerFitted is the output bound a request without one was fitted to, its caller's
	// credit not covering the model's whole bound (exchange.Exchange.FittedBound).
	headerFitted = "x-tollgate-fitted-output-bound"
)

// CreateChatCompletion serves POST /v1/chat/completions.
func (s *Server) CreateChatCompletion(ctx context.Context, req api.CreateChatCompletionRequestObject) (api.CreateChatCompletionResponseObject, error) {
	x, err := s.startExchange(ctx, llm.FormatChat, *req.Body, nil, nil)
	if err != nil {
		return nil, err
	}
	return chatAnswer{x}, nil
}

// CreateResponse serves POST /v1/responses.
func (s *Server) CreateResponse(ctx context.Context, req api.CreateResponseRequestObject) (api.CreateResponseResponseObject, error) {
	x, err := s.startExchange(ctx, llm.FormatResponses, *req.Body, nil, nil)
	if err != nil {
		return nil, err
	}
	return responsesAnswer{x}, nil
}

// CreateMessage serves POST /v1/messages.
func (s *Server) CreateMessage(ctx context.Context, req api.CreateMessageRequestObject) (api.CreateMessageResponseObject, error) {
	x, err := s.startExchange(ctx, llm.FormatMessages, *req.Body, nil, messagesForward(req.Params))
	if err != nil {
		return nil, err
	}
	return messagesAnswer{x}, nil
}

// messagesForward holds the headers of a Messages request passed to a Messages upstream.
func messagesForward(params api.CreateMessageParams) http.Header {
	forward := http.Header{}
	if v := params.AnthropicVersion; v != nil {
		forward.Set("anthropic-version", *v)
	}
	if v := params.AnthropicBeta; v != nil {
		forward.Set("anthropic-beta", *v)
	}
	return forward
}

// startExchange hands an inference route's request to the exchange (impl/exchange) with the
// caller the edge authenticated, the request id it assigned and the view of the body its
// validator read (nil: the exchange reads it).
func (s *Server) startExchange(ctx context.Context, client llm.Format, body []byte, view *jsonview.View, forward http.Header) (*exchange.Exchange, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	return s.exchange.Start(ctx, exchange.Request{Client: client, Body: body, View: view, Forward: forward, Principal: p, RequestID: requestIDFrom(ctx)})
}

// The answers implement the generated response interfaces; they write the upstream's answer.
type (
	chatAnswer      struct{ *exchange.Exchange }
	responsesAnswer struct{ *exchange.Exchange }
	messagesAnswer  struct{ *exchange.Exchange }
)

func (a chatAnswer) VisitCreateChatCompletionResponse(w http.ResponseWriter) error {
	return respond(a.Exchange, w)
}
func (a responsesAnswer) VisitCreateResponseResponse(w http.ResponseWriter) error {
	return respond(a.Exchange, w)
}
func (a messagesAnswer) VisitCreateMessageResponse(w http.ResponseWriter) error {
	return respond(a.Exchange, w)
}

// requestIDFrom returns the request id the edge assigned.
func requestIDFrom(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return id
	}
	return newRequestID()
}

// respond writes the upstream's answer in the client's format; the exchange settles the cost.
func respond(x *exchange.Exchange, w http.ResponseWriter) error {
	defer x.Close()
	var err error
	if x.Streamed() {
		err = respondStream(x, w)
	} else {
		setServedHeaders(w.Header(), x)
		err = respondJSON(x, w)
	}
	addUpstreamWait(w, x.UpstreamWait())
	return err
}

// setServedHeaders sets the headers that say how the answer is served (exchange.Serving): the
// expert, the advisory fields it was not sent, the clamped bound, the fitted bound.
func setServedHeaders(h http.Header, x *exchange.Exchange) {
	expert, dropped, clamped := x.Serving()
	h[headerExpert] = []string{expert}
	if len(dropped) > 0 {
		h.Set(headerDropped, strings.Join(dropped, ", "))
	}
	if clamped != "" {
		h.Set(headerClamped, clamped)
	}
	if fitted := x.FittedBound(); fitted > 0 {
		h.Set(headerFitted, strconv.Itoa(fitted))
	}
}

// respondJSON writes a complete answer.
func respondJSON(x *exchange.Exchange, w http.ResponseWriter) error {
	out, usage, err := x.Answer()
	if err != nil {
		writeErrorFamily(w, familyOf(exchange.Route(x.Client())), err)
		return nil
	}
	h := w.Header()
	if parts := x.AnswerDropped(); len(parts) > 0 {
		// What the translated answer had no place for, after the request's fields left out.
		if prior := h.Get(headerDropped); prior != "" {
			h.Set(headerDropped, prior+", "+strings.Join(parts, ", "))
		} else {
			h.Set(headerDropped, strings.Join(parts, ", "))
		}
	}
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(out))}
	w.WriteHeader(http.StatusOK)
	_, werr := w.Write(out)
	if werr == nil {
		// The answer leaves now: settling, the access log and the metrics happen after the
		// client has it, not before net/http's own flush when the handler returns.
		werr = http.NewResponseController(w).Flush()
	}
	x.Settle(usage, 0, "ok")
	return werr
}

// respondStream writes a streamed answer as server-sent events: the exchange relays the
// upstream's events (exchange.Stream), this edge frames them and, while the upstream is
// silent, sends comment heartbeats from a timer; the lock keeps the timer's writes apart from
// the events'.
//
// The response's head (200, the event stream's headers, and X-Tollgate-Expert with the other
// headers of setServedHeaders) waits for the first event written: the exchange holds the
// events before its upstream's first output back (exchange.Stream), so that the head names
// the expert that serves the stream, and so that a stream that ends before that output can
// still be answered with a status. A heartbeat that must go out first commits the head with
// the expert serving at that moment, and the end of a stream that wrote nothing commits it
// too, unless the exchange refused the stream (lockedSSE.Refuse): its error is then the
// answer, in the route's envelope (a 502 for an upstream stream that ended before its first
// output, a 400 for an upstream's in-band refusal of the request), as it would be had the
// upstream failed before its head. The Responses WebSocket, which has no head, takes no
// refusal: its streams end with their in-band error.
func respondStream(x *exchange.Exchange, w http.ResponseWriter) error {
	_, socket := w.(*socketEvents)
	sw := &lockedSSE{w: sse.NewWriter(w), every: x.Heartbeat(), onSilence: x.CloseUpstream, x: x, h: w.Header(), headPending: true, refusable: !socket}
	sw.startHeartbeat()
	err := x.Stream(sw)
	sw.Close()
	if err != nil {
		writeErrorFamily(w, familyOf(exchange.Route(x.Client())), err)
	}
	return nil
}

// lockedSSE writes a stream's events and, while nothing else is written for the heartbeat
// interval, comment heartbeats from a timer's goroutine; the lock keeps the two apart. After
// exchange.MaxSilentHeartbeats heartbeats in a row it calls onSilence (which ends the upstream read)
// instead. After close it writes nothing.
//
// Every write may wait for the client at most stalledClientBeats heartbeat intervals (a minute
// at the default 15 s, the Responses WebSocket's bound): a client that takes no byte for that
// long (its receive window closed) fails the write, which ends the stream as a client that
// left, its upstream closed and what it produced billed (trial h16 D2: a client that stopped
// reading held its upstream stream and its worst-case reservation for as long as it liked).
//
// The response's head is written by commitHead: before the first event, the first heartbeat,
// or the close, whichever comes first; never when the stream is refused in its place (Refuse).
type lockedSSE struct {
	w         *sse.Writer
	every     time.Duration
	onSilence func()
	// x is the exchange whose headers the head carries (setServedHeaders), h the response's
	// headers.
	x *exchange.Exchange
	h http.Header

	mu sync.Mutex
	// headPending says that the response's head is not written yet.
	headPending bool
	// refusable says that the stream may be refused in place of its head (Refuse).
	refusable bool
	timer     *time.Timer
	beats     int
	silent    bool
	closed    bool
}

// Silenced reports whether the stream was cut off for silence.
func (l *lockedSSE) Silenced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.silent
}

// startHeartbeat arms the heartbeat timer.
func (l *lockedSSE) startHeartbeat() {
	l.mu.Lock()
	l.timer = time.AfterFunc(l.every, l.beat)
	l.mu.Unlock()
}

// beat sends a heartbeat and re-arms the timer, unless the stream has ended or the client is
// gone (the request's context then ends the stream).
func (l *lockedSSE) beat() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.beats++; l.beats > exchange.MaxSilentHeartbeats {
		l.silent = true
		l.onSilence()
		return
	}
	l.armWrite()
	l.commitHead()
	if l.w.Comment("keep-alive") == nil {
		l.timer.Reset(l.every)
	}
}

// Write frames events onto the response, unflushed, and restarts the heartbeat interval.
func (l *lockedSSE) Write(evs []sse.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errStreamClosed
	}
	l.armWrite()
	if len(evs) > 0 {
		l.commitHead()
	}
	for _, ev := range evs {
		if err := l.w.Write(ev); err != nil {
			return err
		}
	}
	l.beats = 0
	if l.timer != nil {
		l.timer.Reset(l.every)
	}
	return nil
}

// Flush sends what was written and not yet flushed.
func (l *lockedSSE) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errStreamClosed
	}
	return l.w.Flush()
}

// Close ends the stream: no heartbeat or event is written after it, and the connection's
// writes wait for the client without a bound again.
func (l *lockedSSE) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
	}
	// A stream that wrote nothing (its client gone before the first event) still answers with
	// the event stream's head, as one whose head was committed at once does.
	l.commitHead()
	l.w.WaitAtMost(0)
}

// Refuse ends the stream before its head, when nothing of it was written: no event, no
// heartbeat. It reports true then, and the caller answers with an error in place of the
// stream; false when the head was written, or when the writer takes no refusal (a socket's).
func (l *lockedSSE) Refuse() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.refusable || !l.headPending || l.closed {
		return false
	}
	l.headPending, l.closed = false, true
	if l.timer != nil {
		l.timer.Stop()
	}
	return true
}

// commitHead writes the response's head unless it is written already: the headers of the
// expert serving the stream at this moment (setServedHeaders), then the event stream's 200.
// Called with the lock held, or before the heartbeat timer starts.
func (l *lockedSSE) commitHead() {
	if !l.headPending {
		return
	}
	l.headPending = false
	setServedHeaders(l.h, l.x)
	l.w.WriteHeader()
}

// stalledClientBeats is how many heartbeat intervals one write of a stream may wait for its
// client (see lockedSSE).
const stalledClientBeats = 4

// armWrite bounds the wait of the writes (and the flush) that follow. Called with the lock held.
func (l *lockedSSE) armWrite() { l.w.WaitAtMost(stalledClientBeats * l.every) }

// errStreamClosed is what a write after the end of the stream returns.
var errStreamClosed = errors.New("the stream has ended")
