package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// The Responses API's WebSocket mode (GET /v1/responses with Upgrade: websocket), as Codex CLI's
// built-in provider uses it. The handshake is authenticated and rate limited as a POST is; then
// every response.create message on the socket is one Responses request with "stream": true,
// served by the same exchange as POST /v1/responses (routing, reservation, key caps, metering,
// settlement, one usage record per response), and each event of its stream goes back as one
// text message: the event's JSON, with its type. A request refused before its stream starts
// gets the error event of the WebSocket mode, {"type":"error","status":S,"error":{...}} with
// the HTTP status and the OpenAI error object the POST would have answered.
//
// One response runs at a time on a connection: a response.create sent while one runs waits for
// it and is served next; one more while one waits closes the socket (1008). A response runs, for
// this count, until its terminal event is sent (the gateway may still be settling it): a
// client may send its next message as soon as it has that event.
//
// "generate": false (Codex's prewarm, sent before each turn's request) is answered at once with
// response.created and response.completed, no output, nothing upstream and nothing billed; its
// input is remembered like a response's.
//
// previous_response_id names a response of the same connection: the gateway keeps, for the
// last few responses that completed on it (responsesSocketMemory, bounded in count and bytes,
// and by socketMemory across the sockets of the process and of an account),
// the request's whole input and the response's output items, and a request that sends only
// the new input with the previous response's id is expanded to the whole conversation before
// the exchange, so any upstream kind (chat, Messages, Responses) serves it. An id the
// connection does not know is refused with previous_response_not_found, on which Codex resends
// the whole input. The expanded body is held to what a POST of it would be (admitExpanded): at
// most 32 MiB, and its bytes taken from the body budget.
//
// Close codes: 1000 when the client closes (echoed) and when the socket has been idle for
// responsesSocketIdle (no message arriving, none running); 1008 when the key stops being valid
// or a third response.create comes while one runs and one waits; 1003 for a binary message;
// 1009 for a message over 32 MiB;
// 1011 for an internal failure; 1001 when the gateway shuts down (when the HTTP server starts
// its shutdown an idle socket closes at once and a busy one after its response; EndStreams ends
// the response in flight with the stream's in-band error first); a message that stops arriving
// half-way for responsesSocketStall ends the connection without a close frame, as a stalled
// upload's does. A client that leaves during a
// response ends the exchange as a client that leaves an SSE stream does: what was produced is
// billed, with status client_disconnected.

// responsesSocketIdle is how long a socket may stay without a message (and without a response
// running) before the gateway closes it: a time.Duration, atomic because a test changes it
// while other tests' sockets still run.
var responsesSocketIdle atomic.Int64

// responsesSocketStall is how long a message whose first frame has arrived may wait for its
// next bytes before the socket is closed (a time.Duration, atomic as responsesSocketIdle is):
// the body read timeout of a POST (h1server.DefaultBodyReadTimeout), so that a message stalled
// half-way holds its share of the body budget as long as a stalled upload does, not until the
// socket's idle time ends it.
var responsesSocketStall atomic.Int64

func init() {
	responsesSocketIdle.Store(int64(5 * time.Minute))
	responsesSocketStall.Store(int64(h1server.DefaultBodyReadTimeout))
}

// responsesSocketWriteWait bounds the wait for the client to take one flush of events.
const responsesSocketWriteWait = time.Minute

// Bounds of what a socket remembers for previous_response_id.
const (
	responsesSocketMemory      = 4
	responsesSocketMemoryBytes = 64 << 20
)

// codeResponseNotFound is the error code of an unknown previous_response_id (the OpenAI API's,
// which Codex answers by resending the whole input).
const codeResponseNotFound = "previous_response_not_found"

// serveResponsesSocket serves the WebSocket upgrade of /v1/responses. It runs behind the
// authentication and the rate limit of the handshake.
func (s *Server) serveResponsesSocket(w http.ResponseWriter, r *http.Request) {
	hw := &handshakeWriter{ResponseWriter: w}
	conn, err := websocket.Accept(hw, r, nil)
	if err != nil {
		hw.answerRefusal(r)
		return
	}
	conn.SetReadLimit(maxBodyBytes)
	sock := &responsesSocket{s: s, conn: conn, authorization: r.Header.Get("Authorization"), draining: serverDraining(r)}
	if p, ok := auth.FromContext(r.Context()); ok {
		sock.account = p.AccountID
	}
	defer sock.forgetAll()
	defer func() {
		if v := recover(); v != nil {
			s.logger(r.Context()).Error("panic serving a Responses WebSocket", "panic", fmt.Sprint(v))
			_ = conn.Close(websocket.StatusInternalError, "internal error")
		}
	}()
	sock.run(r.Context())
}

// handshakeWriter is the http.ResponseWriter the WebSocket library answers a handshake on. It
// passes the upgrade (101) and the hijack through, and holds back the library's plain-text
// refusal of a malformed handshake (400: a missing or malformed Sec-WebSocket-Key, a version
// other than 13; 403: an Origin of another host), which answerRefusal then gives in the OpenAI
// envelope, as every refusal of /v1/responses is. Another refusal (the 426 of an HTTP/1.0
// request, which clients read as "use HTTP") goes out as the library wrote it.
type handshakeWriter struct {
	http.ResponseWriter
	refused int    // the status held back, 0 if none
	reason  []byte // the library's text for it
}

// WriteHeader implements http.ResponseWriter.
func (w *handshakeWriter) WriteHeader(status int) {
	if status == http.StatusBadRequest || status == http.StatusForbidden {
		w.refused = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (w *handshakeWriter) Write(b []byte) (int, error) {
	if w.refused != 0 {
		if len(w.reason) < 1<<10 {
			w.reason = append(w.reason, b...)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController, and the library's hijack, the underlying writer.
func (w *handshakeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answerRefusal answers the refusal held back, if any, in the envelope.
func (w *handshakeWriter) answerRefusal(r *http.Request) {
	if w.refused == 0 {
		return
	}
	reason := strings.TrimSpace(string(w.reason))
	h := w.Header()
	// The library's answer set these for its text; the envelope sets its own.
	h.Del("Content-Type")
	h.Del("X-Content-Type-Options")
	var e *apierror.Error
	if w.refused == http.StatusForbidden {
		e = apierror.Forbidden("the WebSocket handshake is refused: %s (a socket is opened from a client, not from a web page of another site)", reason)
	} else {
		e = apierror.Invalid("", "invalid WebSocket handshake: %s", reason)
	}
	writeError(w.ResponseWriter, r, e)
}

// responsesSocket is one Responses WebSocket connection.
type responsesSocket struct {
	s             *Server
	conn          *websocket.Conn
	authorization string
	draining      <-chan struct{}
	// account is the key's account, whose share of socketMemory the socket's memory takes.
	account     uuid.UUID
	memory      []rememberedResponse
	memoryBytes int
	// stall reads the messages, each wait for more of a message bounded (read).
	stall stallBoundedReader
	// pending counts the messages read and not yet answered: the one served (until its
	// terminal event is about to be sent) and the one waiting. The reader adds, the serving
	// loop takes away (endTurn); a message read while two are pending closes the socket.
	pending atomic.Int32
	// turnOpen is whether the message being served still counts in pending (serving loop only).
	turnOpen bool
	// arriving is set while a message is being read, from its first frame on: the socket is
	// not idle then (its wait for more bytes is bounded by stall instead).
	arriving atomic.Bool
}

// rememberedResponse is what a later request on the socket needs of a completed response: the
// whole input it answered and its output items, as input items of the next request.
type rememberedResponse struct {
	id    string
	items []json.RawMessage
	size  int
}

// run reads messages until the socket closes. A goroutine reads (so that control frames and the
// client's close are seen while a response streams); the messages are served here, in order.
func (sock *responsesSocket) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	stopStall := sock.stall.start(ctx)
	defer stopStall()
	messages := make(chan socketMessage, 2)
	readDone := make(chan error, 1)
	readerExited := make(chan struct{})
	var closing atomic.Bool // the reader ends the socket
	defer func() {
		// However the socket ends, a message left waiting gives back what it holds of the body
		// budget: end the reader, then take what it queued.
		cancel()
		sock.conn.CloseNow()
		<-readerExited
		for {
			select {
			case msg := <-messages:
				msg.lease.release()
			default:
				return
			}
		}
	}()
	go func() {
		defer close(readerExited)
		for {
			msg, err := sock.read(ctx)
			if err == nil {
				// Counted by what the client has seen, not by where the serving loop is: a
				// response whose terminal event was sent is over for the client, though the
				// loop may still be settling it (trial h2: the next message, sent on that
				// event while another waited, closed the socket). pending is below two, so
				// the channel has room.
				if sock.pending.Load() < 2 {
					sock.pending.Add(1)
					messages <- msg
					continue
				}
				msg.lease.release()
				err = &socketClose{code: websocket.StatusPolicyViolation, reason: "one response at a time: wait for response.completed before sending another response.create"}
			}
			// The client left (or broke the protocol): a response in flight ends as a stream
			// whose client left, and a message waiting is not served. A close waits up to five
			// seconds for the client's answer, and a response in flight may finish meanwhile:
			// closing is set first, so that the loop does not serve the waiting message then
			// (trial h4: it was sent upstream, and billed, after the close).
			closing.Store(true)
			var c *socketClose
			if errors.As(err, &c) {
				_ = sock.conn.Close(c.code, c.reason)
			}
			readDone <- err
			cancel()
			return
		}
	}()
	idle := time.NewTimer(time.Duration(responsesSocketIdle.Load()))
	defer idle.Stop()
	for {
		select {
		case msg := <-messages:
			idle.Stop()
			if closing.Load() {
				// The socket is closing: the message waiting is not served.
				msg.lease.release()
				return
			}
			var served bool
			sock.turnOpen = true
			if msg.refused != nil {
				served = sock.sendError(ctx, newRequestID(), msg.refused)
			} else {
				served = sock.serve(ctx, msg.data)
			}
			sock.endTurn()
			msg.lease.release()
			if !served {
				return
			}
			if ctx.Err() != nil {
				return
			}
			if sock.s.streamsEnd.Err() != nil || closed(sock.draining) {
				_ = sock.conn.Close(websocket.StatusGoingAway, "the gateway is shutting down; reconnect")
				return
			}
			idle.Reset(time.Duration(responsesSocketIdle.Load()))
		case <-readDone:
			// A close frame has been answered by the library; anything else ends the socket.
			sock.conn.CloseNow()
			return
		case <-idle.C:
			if sock.arriving.Load() {
				// A message is arriving, however slowly: not idle.
				idle.Reset(time.Duration(responsesSocketIdle.Load()))
				continue
			}
			_ = sock.conn.Close(websocket.StatusNormalClosure, "idle for too long; reconnect to continue")
			return
		case <-sock.s.streamsEnd.Done():
			_ = sock.conn.Close(websocket.StatusGoingAway, "the gateway is shutting down; reconnect")
			return
		case <-sock.draining:
			_ = sock.conn.Close(websocket.StatusGoingAway, "the gateway is shutting down; reconnect")
			return
		}
	}
}

// endTurn counts the message being served as answered, once: called just before its terminal
// event is sent (so that the client, once it has the event, may send its next two messages),
// and after it was served in any case.
func (sock *responsesSocket) endTurn() {
	if sock.turnOpen {
		sock.turnOpen = false
		sock.pending.Add(-1)
	}
}

// socketMessage is one message read from a socket: its bytes and what they hold of the body
// budget (released once the message is served), or the refusal of a large message that the
// spent budget did not admit (its bytes were read and dropped).
type socketMessage struct {
	data    []byte
	lease   *bodyLease
	refused error
}

// read reads the next text message as a request body is read (validator.read): at most
// maxBodyBytes, and the bytes beyond the first largeBodyBytes admitted against the body budget
// as they arrive, so that large messages on many sockets are bounded as large POST bodies are.
// A message the budget does not admit is drained without being kept and answered with the
// budget's refusal (503, retry later); the socket stays open.
func (sock *responsesSocket) read(ctx context.Context) (socketMessage, error) {
	// Once the message has begun, each wait for more of it is bounded (responsesSocketStall):
	// the library reads the whole message under the context given to Reader, and closes the
	// connection when that context ends mid-read (the reader's context, ended by its timer).
	typ, mr, err := sock.conn.Reader(sock.stall.ctx)
	if err != nil {
		return socketMessage{}, err
	}
	sock.arriving.Store(true)
	defer sock.arriving.Store(false)
	r := &sock.stall
	r.r = mr
	r.timer.Reset(r.every)
	defer r.timer.Stop()
	if typ != websocket.MessageText {
		return socketMessage{}, &socketClose{code: websocket.StatusUnsupportedData, reason: "send each response.create as a JSON text message"}
	}
	data, lease, err := sock.s.validate.read(ctx, r, -1)
	if errors.As(err, new(budgetSpent)) {
		lease.release()
		if _, err := io.Copy(io.Discard, r); err != nil {
			return socketMessage{}, err
		}
		return socketMessage{refused: sock.s.validate.budget.refusal()}, nil
	}
	if err != nil {
		lease.release()
		if errors.As(err, new(*http.MaxBytesError)) {
			// The gateway's own limit trips before the library's (the same bound): close as
			// the library would (trial h4: the connection was dropped without a close frame).
			return socketMessage{}, &socketClose{code: websocket.StatusMessageTooBig, reason: fmt.Sprintf("a message may be at most %d bytes", maxBodyBytes)}
		}
		return socketMessage{}, err
	}
	return socketMessage{data: data, lease: lease}, nil
}

// stallBoundedReader reads the socket's messages under ctx, restarting timer (which ends ctx)
// after each read that returns bytes: a message whose client stops sending for every is cut
// off. One serves every message of a socket, in its reading goroutine: nothing is allocated per
// message.
type stallBoundedReader struct {
	ctx   context.Context
	r     io.Reader
	every time.Duration
	timer *time.Timer
}

// start sets the reader up under parent; the returned function ends its context.
func (s *stallBoundedReader) start(parent context.Context) (stop func()) {
	var cancel context.CancelFunc
	s.ctx, cancel = context.WithCancel(parent)
	s.every = time.Duration(responsesSocketStall.Load())
	s.timer = time.AfterFunc(s.every, cancel)
	s.timer.Stop()
	return func() {
		s.timer.Stop()
		cancel()
	}
}

func (s *stallBoundedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.every)
	}
	return n, err
}

// socketClose is a read's refusal of what the client sent: the socket closes with its code and
// reason.
type socketClose struct {
	code   websocket.StatusCode
	reason string
}

func (c *socketClose) Error() string { return c.reason }

// closed reports whether ch (nil: never) is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// serve runs one message; it reports false when the socket was closed.
func (sock *responsesSocket) serve(ctx context.Context, data []byte) bool {
	s := sock.s
	requestID := newRequestID()
	ctx = context.WithValue(ctx, requestIDKey{}, requestID)
	if telemetry.Enabled() {
		// Each turn is a request of its own: its own trace, linked to the socket's.
		var turn trace.Span
		ctx, turn = telemetry.StartSocketTurn(ctx, "response.create "+responsesPath, responsesPath)
		turn.SetAttributes(telemetry.AttrRequestID.String(requestID))
		defer turn.End()
	}
	// The key is checked again for every response, as every POST checks it: a key revoked
	// while the socket is open serves nothing more.
	p, err := s.auth.Authenticate(ctx, sock.authorization)
	if err != nil {
		if apierror.IsUnavailable(err) || ctx.Err() != nil {
			return sock.sendError(ctx, requestID, err)
		}
		sock.sendError(ctx, requestID, apierror.Unauthenticated("invalid API key: the key is unknown, revoked, disabled or expired"))
		_ = sock.conn.Close(websocket.StatusPolicyViolation, "the API key is no longer valid")
		return false
	}
	ctx = auth.WithPrincipal(ctx, p)
	if p.RPMLimit > 0 && s.limiter != nil {
		d, err := s.limiter.Allow(ctx, p.KeyText(), p.RPMLimit)
		switch {
		case err != nil:
			s.logger(ctx).Error("rate limiter failed; letting the request through", "err", err)
			if s.metrics != nil {
				s.metrics.RateLimiterErrors.Inc()
			}
		case !d.Allowed:
			if s.metrics != nil {
				s.metrics.RateLimited.Inc()
			}
			return sock.sendError(ctx, requestID, apierror.RateLimited(d.Limit, d.RetryAfter))
		}
	}
	sr, err := sock.request(data)
	if err == nil && sr.expanded {
		var lease *bodyLease
		lease, err = sock.admitExpanded(ctx, sr.body)
		defer lease.release()
	}
	var view jsonview.View
	if err == nil {
		err = s.validate.checkResponsesBody(sr.body, &view, !sr.warmup)
	}
	if err != nil {
		return sock.sendError(ctx, requestID, err)
	}
	body, input := sr.body, sr.input
	if sr.warmup {
		return sock.warmUp(ctx, p, requestID, body, input)
	}
	req := exchange.Request{Client: llm.FormatResponses, Body: body, Principal: p, RequestID: requestID}
	if view.Body() != nil {
		req.View = &view
	}
	x, err := s.exchange.Start(ctx, req)
	if err != nil {
		var e *apierror.Error
		if !errors.As(err, &e) && ctx.Err() == nil {
			s.logger(ctx).Error("handler failed", "err", err)
		}
		return sock.sendError(ctx, requestID, err)
	}
	w := &socketEvents{ctx: ctx, conn: sock.conn, header: http.Header{}, endTurn: sock.endTurn}
	_ = respond(x, w)
	if w.completedID != "" {
		sock.remember(w.completedID, append(input, w.completedOutput...))
	}
	return true
}

// socketRequest is a response.create message read as the body of a POST /v1/responses.
type socketRequest struct {
	body json.RawMessage
	// input is the items of body's input.
	input []json.RawMessage
	// warmup is "generate": false.
	warmup bool
	// expanded says that the input was expanded from a previous response (previous_response_id).
	expanded bool
}

// admitExpanded holds the body budget for a body expanded from a previous response, as a POST's
// body of its size holds it (the message's own lease holds only the bytes that arrived): nothing
// up to largeBodyBytes, else its whole length, until the response is served. Such a body is
// refused as that POST would be: over maxBodyBytes with 413, and with the budget's 503 when the
// budget stays spent. The expansion was bounded only by what a socket remembers (64 MiB) and
// one message (32 MiB), and held none of the budget.
func (sock *responsesSocket) admitExpanded(ctx context.Context, body []byte) (*bodyLease, error) {
	if len(body) > maxBodyBytes {
		return nil, &apierror.Error{Kind: apierror.KindRequestTooLarge, Param: "previous_response_id",
			Message: fmt.Sprintf("the conversation that previous_response_id continues is %d bytes with this input, over the %d bytes (32 MiB) a request body may be: start a new conversation, or send a shorter input", len(body), maxBodyBytes)}
	}
	b := sock.s.validate.budget
	if b == nil || len(body) <= largeBodyBytes {
		return nil, nil
	}
	lease := newBodyLease(b, ctx)
	if !lease.admit(int64(len(body))) {
		return nil, b.refusal()
	}
	return &lease, nil
}

// request turns a response.create message into the body of a POST /v1/responses with stream
// true, its input expanded from the previous response when it names one.
func (sock *responsesSocket) request(data []byte) (socketRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return socketRequest{}, apierror.Invalid("", "a message must be a JSON object: {\"type\":\"response.create\", ...the body of POST /v1/responses}")
	}
	var typ string
	_ = json.Unmarshal(fields["type"], &typ)
	if typ != "response.create" {
		return socketRequest{}, apierror.Invalid("type", "unsupported message type %q: this socket serves \"response.create\"", typ)
	}
	delete(fields, "type")
	// "generate": false (Codex's prewarm) asks for no answer: the input is kept for the next
	// request, which continues from it with previous_response_id. Only a boolean says which
	// (null as absent): "no", 0 or "false" would otherwise have been read as true, an answer
	// generated and billed for a client that asked for none.
	var sr socketRequest
	if raw, ok := fields["generate"]; ok {
		switch string(raw) {
		case "false":
			sr.warmup = true
		case "true", "null":
		default:
			return socketRequest{}, apierror.Invalid("generate", "invalid 'generate': expected a boolean (false warms the connection without an answer), got %s", jsonKind(raw))
		}
	}
	delete(fields, "generate")
	var err error
	sr.body, sr.input, sr.expanded, err = sock.expand(fields)
	if err == nil && !utf8.Valid(data) && utf8.Valid(sr.body) {
		// Decoding the message replaced the bytes of a string that is not UTF-8 (a member
		// name) with U+FFFD: refused as the POST's validator refuses them (issue 23), where
		// the validator would not see them any more. Bad bytes still in body are its to name.
		return socketRequest{}, apierror.Invalid("", "the request body holds a string that is not valid UTF-8: send text encoded as UTF-8")
	}
	return sr, err
}

// expand is request's body once the message's own fields are gone, its input's items, and
// whether they were expanded from a previous response.
func (sock *responsesSocket) expand(fields map[string]json.RawMessage) (json.RawMessage, []json.RawMessage, bool, error) {
	// Transport fields of the HTTP API: a response on the socket is always streamed.
	delete(fields, "background")
	fields["stream"] = json.RawMessage("true")
	input, err := inputItems(fields["input"])
	if err != nil {
		return nil, nil, false, err
	}
	expanded := false
	if raw, ok := fields["previous_response_id"]; ok && string(raw) != "null" {
		var id string
		if json.Unmarshal(raw, &id) != nil {
			return nil, nil, false, apierror.Invalid("previous_response_id", "previous_response_id must be a string")
		}
		prev, ok := sock.recall(id)
		if !ok {
			return nil, nil, false, &apierror.Error{Kind: apierror.KindInvalidRequest, Param: "previous_response_id", Code: codeResponseNotFound,
				Message: fmt.Sprintf("Previous response with id '%s' not found: this connection continues only its own recent responses; send the whole input", id)}
		}
		input = append(append(make([]json.RawMessage, 0, len(prev.items)+len(input)), prev.items...), input...)
		expanded = true
	}
	delete(fields, "previous_response_id")
	items, err := json.Marshal(input)
	if err != nil {
		return nil, nil, false, err
	}
	fields["input"] = items
	body, err := json.Marshal(fields)
	return body, input, expanded, err
}

// inputItems are the items of a request's input: a string is one user message.
func inputItems(raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if !utf8.Valid(raw) {
			// Decoded, its bad bytes would go upstream as U+FFFD: refused as the POST's
			// validator refuses them (issue 23).
			return nil, apierror.Invalid("input", "invalid 'input': the string is not valid UTF-8: send text encoded as UTF-8")
		}
		item, err := json.Marshal(map[string]string{"type": "message", "role": "user", "content": text})
		return []json.RawMessage{item}, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		if err := checkResponsesInput(raw); err != nil {
			return nil, err
		}
		return nil, apierror.Invalid("input", "invalid 'input': expected a string or an array of input items")
	}
	return items, nil
}

// recall returns the remembered response with the id.
func (sock *responsesSocket) recall(id string) (rememberedResponse, bool) {
	for i := len(sock.memory) - 1; i >= 0; i-- {
		if sock.memory[i].id == id {
			return sock.memory[i], true
		}
	}
	return rememberedResponse{}, false
}

// remember keeps a completed response for previous_response_id, dropping the oldest beyond the
// socket's bounds, and, when the process's or the account's share of socketMemory has no room
// for it, the oldest until it has. A conversation that does not fit is not kept: its next turn
// gets previous_response_not_found and resends the whole input.
func (sock *responsesSocket) remember(id string, items []json.RawMessage) {
	size := 0
	for _, it := range items {
		size += len(it)
	}
	pool := sock.s.sockets
	if size > responsesSocketMemoryBytes {
		pool.noteForgotten()
		return
	}
	for len(sock.memory) >= responsesSocketMemory || sock.memoryBytes+size > responsesSocketMemoryBytes {
		sock.forgetOldest()
	}
	for !pool.take(sock.account, int64(size)) {
		if len(sock.memory) == 0 {
			pool.noteForgotten()
			return
		}
		sock.forgetOldest()
	}
	sock.memory = append(sock.memory, rememberedResponse{id: id, items: items, size: size})
	sock.memoryBytes += size
}

// forgetOldest drops the oldest remembered response and gives back its room.
func (sock *responsesSocket) forgetOldest() {
	old := sock.memory[0]
	sock.memory[0] = rememberedResponse{}
	sock.memory = sock.memory[1:]
	sock.memoryBytes -= old.size
	sock.s.sockets.put(sock.account, int64(old.size))
}

// forgetAll drops everything the socket remembers, when it ends.
func (sock *responsesSocket) forgetAll() {
	for len(sock.memory) > 0 {
		sock.forgetOldest()
	}
}

// socketErrorEvent is the error event of the WebSocket mode for a request refused before its
// stream: the HTTP status the POST would have answered and its OpenAI error object.
type socketErrorEvent struct {
	Type   string            `json:"type"`
	Status int               `json:"status"`
	Error  openAIErrorDetail `json:"error"`
}

// sendError sends err as an error event; it reports false when the socket is gone.
func (sock *responsesSocket) sendError(ctx context.Context, requestID string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	e := apierror.As(err)
	msg, _ := json.Marshal(socketErrorEvent{Type: "error", Status: e.Kind.Status(), Error: openAIErrorOf(e, requestID)})
	sock.endTurn()
	wctx, cancel := context.WithTimeout(ctx, responsesSocketWriteWait)
	defer cancel()
	return sock.conn.Write(wctx, websocket.MessageText, msg) == nil
}

// socketEvents is the http.ResponseWriter the exchange streams into on a socket: it takes the
// server-sent events the stream writes and, at each flush, sends each event's data as one text
// message (comment heartbeats are dropped: the socket has its own liveness). It notes the
// terminal response.completed, for previous_response_id.
type socketEvents struct {
	ctx    context.Context
	conn   *websocket.Conn
	header http.Header
	buf    []byte
	err    error

	completedID     string
	completedOutput []json.RawMessage
	// endTurn is called before a terminal event is sent (responsesSocket.endTurn).
	endTurn func()
}

// Header implements http.ResponseWriter; the headers are not sent.
func (w *socketEvents) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter; the status is not sent.
func (w *socketEvents) WriteHeader(int) {}

// Write implements http.ResponseWriter: it buffers event-stream bytes until the next flush.
func (w *socketEvents) Write(b []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}

// FlushError sends the complete events written since the last flush (http.ResponseController
// calls it).
func (w *socketEvents) FlushError() error {
	if w.err != nil {
		return w.err
	}
	// The complete events are those up to the last blank line; impl/sse reads them.
	end := bytes.LastIndex(w.buf, []byte("\n\n"))
	if end < 0 {
		return nil
	}
	events := sse.NewReader(bytes.NewReader(w.buf[:end+2]))
	for {
		ev, err := events.Next()
		if err != nil {
			break // io.EOF: every complete event was read
		}
		if len(ev.Data) == 0 {
			continue
		}
		if ev.Name == "response.completed" || ev.Name == "response.incomplete" {
			// An incomplete response (cut at max_output_tokens) is continued as OpenAI
			// continues it: by its id (trial h4: previous_response_not_found).
			w.noteCompleted(ev.Data)
		}
		if ev.Name == "response.completed" || ev.Name == "response.incomplete" || ev.Name == "response.failed" {
			w.endTurn()
		}
		ctx, cancel := context.WithTimeout(w.ctx, responsesSocketWriteWait)
		err = w.conn.Write(ctx, websocket.MessageText, ev.Data)
		cancel()
		if err != nil {
			w.err = err
			return err
		}
	}
	w.buf = append(w.buf[:0], w.buf[end+2:]...)
	return nil
}

// Flush implements http.Flusher.
func (w *socketEvents) Flush() { _ = w.FlushError() }

// noteCompleted keeps the id and output items of a response.completed (or response.incomplete)
// event.
func (w *socketEvents) noteCompleted(data []byte) {
	var ev struct {
		Response struct {
			ID     string            `json:"id"`
			Output []json.RawMessage `json:"output"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &ev) == nil && ev.Response.ID != "" {
		w.completedID, w.completedOutput = ev.Response.ID, ev.Response.Output
	}
}

// drainSignals maps each *http.Server serving sockets to a channel closed when its shutdown
// begins (http.Server.RegisterOnShutdown): sockets are hijacked connections, which a shutdown
// neither closes nor waits for.
var drainSignals sync.Map

// serverDraining returns the channel closed when the shutdown of r's server begins (nil when r
// carries no *http.Server).
func serverDraining(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	if ch, ok := drainSignals.Load(srv); ok {
		return ch.(chan struct{})
	}
	ch := make(chan struct{})
	actual, loaded := drainSignals.LoadOrStore(srv, ch)
	if !loaded {
		// Shutdown runs its hooks on every call, and tollgate serve calls it again when the
		// grace period is over (trial h4: a second close panicked): close once.
		var once sync.Once
		srv.RegisterOnShutdown(func() { once.Do(func() { close(ch) }) })
	}
	return actual.(chan struct{})
}

// checkResponsesBody validates a body of POST /v1/responses as the route's validator does,
// reading its view in the same pass. The input of a generating request is checked as the
// route's (checkResponsesInput); a warm-up's ("generate": false) may be empty: Codex's first
// warm-up of a session sends no input, only the instructions and tools the next request
// continues from.
func (v *validator) checkResponsesBody(body []byte, view *jsonview.View, generating bool) error {
	op, ok := v.operations["POST "+responsesPath]
	if !ok {
		return nil
	}
	if err := op.ValidateBodyView("application/json", body, view); err != nil {
		return describe(err)
	}
	if input, ok := view.Value("input"); ok && generating {
		return checkResponsesInput(input)
	}
	return nil
}

// warmUp answers a response.create with "generate": false: the model is checked as for any
// request, nothing goes upstream and nothing is billed (no usage record), and the response
// completes at once with no output; its input is remembered, so the next request sends only
// what follows it with this response's id.
func (sock *responsesSocket) warmUp(ctx context.Context, p auth.Principal, requestID string, body []byte, input []json.RawMessage) bool {
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	if _, err := sock.s.exchange.ResolveModel(ctx, p, req.Model, llm.FormatResponses); err != nil {
		return sock.sendError(ctx, requestID, err)
	}
	id := exchange.ResponseID(llm.FormatResponses, requestID)
	type usage struct {
		InputTokens         int64          `json:"input_tokens"`
		InputTokensDetails  map[string]int `json:"input_tokens_details"`
		OutputTokens        int64          `json:"output_tokens"`
		OutputTokensDetails map[string]int `json:"output_tokens_details"`
		TotalTokens         int64          `json:"total_tokens"`
	}
	type response struct {
		ID        string            `json:"id"`
		Object    string            `json:"object"`
		CreatedAt int64             `json:"created_at"`
		Status    string            `json:"status"`
		Model     string            `json:"model"`
		Output    []json.RawMessage `json:"output"`
		Usage     *usage            `json:"usage"`
	}
	type event struct {
		Type           string   `json:"type"`
		SequenceNumber int      `json:"sequence_number"`
		Response       response `json:"response"`
	}
	r := response{ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress", Model: req.Model, Output: []json.RawMessage{}}
	created, _ := json.Marshal(event{Type: "response.created", Response: r})
	r.Status = "completed"
	r.Usage = &usage{InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	completed, _ := json.Marshal(event{Type: "response.completed", SequenceNumber: 1, Response: r})
	// Remembered before it is answered: once the client reads response.completed, what the
	// socket remembers (and the memory metrics) already say so.
	sock.remember(id, input)
	wctx, cancel := context.WithTimeout(ctx, responsesSocketWriteWait)
	defer cancel()
	if sock.conn.Write(wctx, websocket.MessageText, created) != nil {
		return false
	}
	sock.endTurn()
	return sock.conn.Write(wctx, websocket.MessageText, completed) == nil
}
