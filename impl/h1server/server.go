package h1server

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWatchDelay is how long a request runs before its connection is watched for the client
// going away, when Server.WatchDelay is zero. It is long enough that a typical quick request
// never starts a watcher and short enough that a client that gives up on a slow (upstream-bound)
// request is noticed while the upstream call can still be cancelled usefully.
const DefaultWatchDelay = 20 * time.Millisecond

// DefaultBodyReadTimeout is Server.BodyReadTimeout when that is zero: how long a read of a
// request body may wait for the client's next bytes (nginx's client_body_timeout default).
const DefaultBodyReadTimeout = 60 * time.Second

// Server serves HTTP/1.1 over plain TCP connections: common requests on its lean path and every
// other connection through an internal net/http server (see the package comment). Its fields have
// the meanings of net/http.Server's fields of the same names, and the internal server is built
// from them when the first method is called: they must not be changed after that. A Server must
// not be copied after first use.
type Server struct {
	// Handler answers requests; nil means http.DefaultServeMux.
	Handler http.Handler

	// ReadTimeout bounds reading a whole request, head and body, like net/http's.
	ReadTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request head (ReadTimeout when zero), like net/http's.
	ReadHeaderTimeout time.Duration
	// WriteTimeout bounds writing a response, from the end of its request head, like net/http's.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive connection (ReadTimeout
	// when zero), like net/http's.
	IdleTimeout time.Duration
	// BodyReadTimeout bounds each wait for request body bytes, on both paths: a read of the
	// body (the handler's, or the server's discarding what the handler left) fails with a
	// timeout when the client sends nothing for this long, and the connection is closed after
	// the response. It bounds how long a stalled upload holds its handler, not the whole body's
	// transfer: a client that keeps sending is never cut off, unlike with ReadTimeout (which,
	// as in net/http, also cancels the context of a long streamed answer). A read deadline the
	// handler sets itself (http.ResponseController) takes its place. DefaultBodyReadTimeout
	// when zero; negative means none. net/http has no such setting.
	BodyReadTimeout time.Duration
	// MaxHeaderBytes limits request heads as in net/http, where heads up to MaxHeaderBytes plus
	// 4096 bytes are accepted (http.DefaultMaxHeaderBytes when zero). The lean path serves heads
	// up to its 4 KiB read buffer, which is always within that limit, and hands larger ones to the
	// internal net/http server, which enforces MaxHeaderBytes and answers 431 beyond it.
	MaxHeaderBytes int
	// ErrorBody, when set, gives the Content-Type and body of the answers the server writes
	// itself to a request it will not read on, in place of plain text (an API server answers
	// its own error envelope): a head with both Content-Length and Transfer-Encoding (400), and
	// the answers net/http writes to a head it cannot read (400 with its reason, 431 beyond
	// MaxHeaderBytes, 501 for a transfer coding it does not know, 505). The status line and
	// Connection: close stay, and X-Should-Retry: false is added: none of these refusals
	// changes when the same head is sent again, and the SDKs of the OpenAI and Anthropic APIs
	// retry a 5xx unless told not to; so is X-Content-Type-Options: nosniff, the body being
	// free to echo the target. target is the request target of the refused head (its request
	// line's second word, as sent: "/v1/messages", or an absolute form), so that the answer can
	// take the envelope of the route it was meant for, on a later request of a connection
	// that net/http serves too; it is empty when the head was not read far enough to have
	// one, or when an earlier head on that connection was too long to place (over 8 KiB) or
	// its body had no length.
	ErrorBody func(status int, reason, target string) (contentType string, body []byte)
	// RefusedHead, when set, is told of every answer the server writes itself to a request head
	// it will not read on (those whose body ErrorBody gives, with or without an ErrorBody, on
	// both paths), once per refusal, with its kind and the status, reason and target ErrorBody
	// is told (Refusal), just before the answer is written: such a request reaches no handler,
	// so this is where a server counts and logs clients that send broken heads. It is told too
	// of each HTTP/2 connection preface (a client speaking HTTP/2 with prior knowledge), which
	// is refused with a GOAWAY rather than an HTTP/1.1 answer: as kind RefusedHTTP2, status 505,
	// reason HTTP2Refusal and target "*", before the GOAWAY is sent. It runs in the connection's
	// goroutine (or net/http's), for each refusal alone, so it must be safe for concurrent use
	// and must not block.
	RefusedHead func(Refusal)
	// ErrorLog receives the server's error messages (the log package's standard logger when nil),
	// for both paths.
	ErrorLog *log.Logger

	// WatchDelay is how long a request must run before its connection is watched for the client
	// closing it, which cancels the request's context (DefaultWatchDelay when zero; a negative
	// value never watches, so only a failed write or the handler's return cancel the context).
	WatchDelay time.Duration

	setupOnce sync.Once
	inner     *http.Server     // serves handed-off connections; also the http.ServerContextKey value
	handoff   *handoffListener // how connections reach inner
	baseCtx   context.Context  // carries http.ServerContextKey

	mu            sync.Mutex
	listeners     map[*onceCloseListener]struct{}
	conns         map[*conn]struct{}
	listenerGroup sync.WaitGroup

	inShutdown        atomic.Bool
	disableKeepAlives atomic.Bool

	// handoffs counts connections handed to net/http; the tests use it to check which path served
	// a request.
	handoffs atomic.Int64
	// testHookWatch, when set, is called with "start" when a watcher is about to read and "end"
	// when it returns.
	testHookWatch func(event string)
}

// setup builds the internal net/http server and its listener and starts serving them, once.
func (s *Server) setup() {
	s.setupOnce.Do(func() {
		s.inner = &http.Server{
			Handler:           s.Handler,
			ReadTimeout:       s.ReadTimeout,
			ReadHeaderTimeout: s.ReadHeaderTimeout,
			WriteTimeout:      s.WriteTimeout,
			IdleTimeout:       s.IdleTimeout,
			MaxHeaderBytes:    s.MaxHeaderBytes,
			ErrorLog:          s.ErrorLog,
		}
		// Handed-off requests read their bodies under BodyReadTimeout too, and one with a
		// Transfer-Encoding ends its connection (handoff.go).
		s.inner.Handler = &handoffHandler{s: s}
		s.inner.ConnContext = withReplayConn // for the head behind each request (nextHead)
		if d := s.bodyReadTimeout(); d > 0 {
			s.inner.Handler = &handoffHandler{s: s, timeout: d}
		}
		if s.disableKeepAlives.Load() {
			s.inner.SetKeepAlivesEnabled(false)
		}
		s.handoff = newHandoffListener()
		s.baseCtx = context.WithValue(context.Background(), http.ServerContextKey, s.inner)
		s.listeners = make(map[*onceCloseListener]struct{})
		s.conns = make(map[*conn]struct{})
		go func() { _ = s.inner.Serve(s.handoff) }()
	})
}

// Serve accepts connections on ln and serves each in its own goroutine. It always returns a
// non-nil error and closes ln; after Shutdown or Close the error is http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	s.setup()
	l := &onceCloseListener{Listener: ln}
	defer l.Close()
	if !s.trackListener(l, true) {
		return http.ErrServerClosed
	}
	defer s.trackListener(l, false)

	var tempDelay time.Duration // how long to sleep on a temporary accept failure, as net/http
	for {
		rwc, err := l.Accept()
		if err != nil {
			if s.shuttingDown() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // net/http's rule for accept errors
				tempDelay = max(5*time.Millisecond, min(2*tempDelay, time.Second))
				s.logf("http: Accept error: %v; retrying in %v", err, tempDelay)
				time.Sleep(tempDelay)
				continue
			}
			return err
		}
		tempDelay = 0
		c := newConn(s, rwc)
		if !s.trackConn(c, true) {
			_ = rwc.Close()
			continue
		}
		go c.serve()
	}
}

// Shutdown gracefully shuts the server down like net/http's: it closes the listeners, closes idle
// connections at once, waits for active requests to finish (their connections are closed after
// the response) and shuts the internal net/http server down the same way. When ctx ends first it
// returns ctx.Err(); otherwise the error from closing the listeners, if any.
func (s *Server) Shutdown(ctx context.Context) error {
	s.setup()
	s.inShutdown.Store(true)
	s.mu.Lock()
	lnerr := s.closeListenersLocked()
	s.mu.Unlock()
	s.listenerGroup.Wait()

	innerDone := make(chan error, 1)
	go func() { innerDone <- s.inner.Shutdown(ctx) }()

	// Poll like net/http: there is no cheap way for connections to report that they went idle
	// without costing every request a synchronisation.
	const pollMax = 500 * time.Millisecond
	pollBase := time.Millisecond
	timer := time.NewTimer(pollBase)
	defer timer.Stop()
	for !s.closeIdleConns() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			pollBase = min(2*pollBase, pollMax)
			timer.Reset(pollBase + rand.N(pollBase/10+1))
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-innerDone:
		// The internal server's own result only repeats ctx.Err(), handled above, or the
		// in-memory listener's Close, which cannot fail.
	}
	return lnerr
}

// Close closes the listeners and every connection at once, including those handed to net/http,
// and returns the error from closing the listeners, if any.
func (s *Server) Close() error {
	s.setup()
	s.inShutdown.Store(true)
	s.mu.Lock()
	err := s.closeListenersLocked()
	s.mu.Unlock()
	s.listenerGroup.Wait()

	s.mu.Lock()
	for c := range s.conns {
		_ = c.rwc.Close()
		delete(s.conns, c)
	}
	s.mu.Unlock()
	_ = s.inner.Close()
	_ = s.handoff.Close()
	return err
}

// SetKeepAlivesEnabled controls whether HTTP keep-alives are enabled, like net/http's; disabling
// them also closes idle connections.
func (s *Server) SetKeepAlivesEnabled(v bool) {
	s.disableKeepAlives.Store(!v)
	s.setup()
	s.inner.SetKeepAlivesEnabled(v)
	if !v {
		s.closeIdleConns()
	}
}

func (s *Server) shuttingDown() bool { return s.inShutdown.Load() }

func (s *Server) doKeepAlives() bool { return !s.disableKeepAlives.Load() && !s.shuttingDown() }

func (s *Server) handler() http.Handler {
	if s.Handler != nil {
		return s.Handler
	}
	return http.DefaultServeMux
}

func (s *Server) readHeaderTimeout() time.Duration {
	if s.ReadHeaderTimeout != 0 {
		return s.ReadHeaderTimeout
	}
	return s.ReadTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout != 0 {
		return s.IdleTimeout
	}
	return s.ReadTimeout
}

func (s *Server) bodyReadTimeout() time.Duration {
	if s.BodyReadTimeout == 0 {
		return DefaultBodyReadTimeout
	}
	return s.BodyReadTimeout
}

func (s *Server) watchDelay() time.Duration {
	if s.WatchDelay == 0 {
		return DefaultWatchDelay
	}
	return s.WatchDelay
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// trackListener adds or removes a listener; adding fails once the server is shutting down.
func (s *Server) trackListener(l *onceCloseListener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shuttingDown() {
			return false
		}
		s.listeners[l] = struct{}{}
		s.listenerGroup.Add(1)
	} else {
		delete(s.listeners, l)
		s.listenerGroup.Done()
	}
	return true
}

// trackConn adds or removes a connection; adding fails once the server is shutting down.
func (s *Server) trackConn(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shuttingDown() {
			return false
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
	return true
}

func (s *Server) closeListenersLocked() error {
	var err error
	for l := range s.listeners {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// closeIdleConns closes the idle connections and reports whether none is left. Like net/http it
// treats a connection that has not sent its first request within 5 seconds as idle.
func (s *Server) closeIdleConns() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	quiescent := true
	staleNew := time.Now().Add(-5 * time.Second).UnixNano()
	for c := range s.conns {
		st := c.state.Load()
		if st == stateNew && c.acceptedAt < staleNew {
			st = stateIdle
		}
		if st != stateIdle {
			quiescent = false
			continue
		}
		_ = c.rwc.Close()
		delete(s.conns, c)
	}
	return quiescent
}

// onceCloseListener wraps a listener so that Serve's deferred Close and Shutdown's Close close it
// only once, like net/http's.
type onceCloseListener struct {
	net.Listener
	once     sync.Once
	closeErr error
}

func (l *onceCloseListener) Close() error {
	l.once.Do(func() { l.closeErr = l.Listener.Close() })
	return l.closeErr
}

// errorResponse is the whole answer, ending the connection, to a request the server will not
// read on: status with reason, its body from ErrorBody (told the request target, if known) or,
// without it, net/http's plain text. An answer in ErrorBody's envelope says X-Should-Retry:
// false, which the OpenAI and Anthropic SDKs obey before the status: the same head sent again
// is refused again, and they would otherwise send a 501 or 505's request again and again. It
// also says X-Content-Type-Options: nosniff, since ErrorBody may echo the target: a browser
// sent to a crafted address must not read the answer as a page or a script.
func (s *Server) errorResponse(status int, reason, target string) []byte {
	text := http.StatusText(status)
	if s.ErrorBody != nil {
		ct, body := s.ErrorBody(status, reason, target)
		return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nX-Content-Type-Options: nosniff\r\nX-Should-Retry: false\r\nConnection: close\r\n\r\n%s", status, text, ct, len(body), body)
	}
	if reason != "" {
		text += ": " + reason
	}
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n%d %s", status, text, status, text)
}

// Refusal is what a Server tells its RefusedHead of a request head it refused itself.
type Refusal struct {
	// Kind is why the head was refused: what a server counts it by, rather than by Reason's
	// words.
	Kind RefusalKind
	// Status is the answer's status (505 for an HTTP/2 preface, answered with a GOAWAY).
	Status int
	// Reason is the reason the answer gives (empty for net/http's 431), or HTTP2Refusal.
	Reason string
	// Target is the request target ErrorBody is told: empty when the head was not read far
	// enough to have one, "*" for an HTTP/2 preface.
	Target string
	// Method is the request line's method, as sent ("PRI" for an HTTP/2 preface): empty when
	// Target is, the request line not read. No header is read for a Refusal.
	Method string
	// RemoteAddr is the connection's peer ("ip:port"), as http.Request.RemoteAddr is before
	// any handler: behind a proxy, the proxy's address. No X-Forwarded-For is read from a head
	// the server refuses.
	RemoteAddr string
}

// RefusalKind is why a Server refused a request head itself (Refusal).
type RefusalKind uint8

const (
	// RefusedMalformed is a head the server cannot read (400): a request line or header that
	// does not parse, a bare CR in a header value, no Host.
	RefusedMalformed RefusalKind = iota + 1
	// RefusedAmbiguousLength is a head with both Content-Length and Transfer-Encoding (400).
	RefusedAmbiguousLength
	// RefusedTooLarge is a head beyond MaxHeaderBytes (431).
	RefusedTooLarge
	// RefusedTransferCoding is a transfer coding the server does not know (501).
	RefusedTransferCoding
	// RefusedVersion is an HTTP version the server does not speak (505).
	RefusedVersion
	// RefusedHTTP2 is an HTTP/2 connection preface: a client speaking HTTP/2 with prior
	// knowledge (h2c without an upgrade), refused with a GOAWAY (HTTP2Refusal).
	RefusedHTTP2
	// RefusedOther is any other answer net/http writes itself to a head (none is known).
	RefusedOther
)

// refusalKind is the kind of an answer net/http wrote itself to a head, by its status.
func refusalKind(status int) RefusalKind {
	switch status {
	case http.StatusBadRequest:
		return RefusedMalformed
	case http.StatusRequestHeaderFieldsTooLarge:
		return RefusedTooLarge
	case http.StatusNotImplemented:
		return RefusedTransferCoding
	case http.StatusHTTPVersionNotSupported:
		return RefusedVersion
	}
	return RefusedOther
}

// addrString is a's String, or empty when a is nil.
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// noteRefusedHead tells RefusedHead, when set, of a refused head.
func (s *Server) noteRefusedHead(r Refusal) {
	if s.RefusedHead != nil {
		s.RefusedHead(r)
	}
}
