package sim

import (
	"errors"
	"hash/maphash"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWords is the reply length, in words (output tokens), when Options.DefaultWords is 0.
const DefaultWords = 12

// maxBody bounds a request body; larger ones get 413.
const maxBody = 32 << 20

// Options configures a Simulator.
type Options struct {
	// APIKey, when set, is required on every request: as "Authorization: Bearer <key>" on the
	// OpenAI routes and as "x-api-key: <key>" on the Anthropic routes. When empty, any request
	// passes.
	APIKey string
	// FirstTokenLatency is the pause between the start of a stream (its headers and opening
	// events) and its first content event. A reply that does not stream is delayed by it too.
	FirstTokenLatency time.Duration
	// TokensPerSecond paces the content events of a stream; 0 sends them as fast as possible.
	TokensPerSecond float64
	// DefaultWords is the reply length in words when the request asks for none; 0 means 12.
	DefaultWords int
	// Now, when set, is the clock by which cached prompt prefixes expire (see Prompt caching
	// in the package documentation); nil means time.Now. Tests set it to step over a cache's
	// lifetime.
	Now func() time.Time
}

// Route names one of the simulator's routes.
type Route string

// The simulator's routes, as recorded in Record.Route.
const (
	RouteChat        Route = "chat.completions"
	RouteResponses   Route = "responses"
	RouteMessages    Route = "messages"
	RouteCountTokens Route = "messages.count_tokens"
)

// anthropic reports whether the route speaks the Anthropic wire format.
func (r Route) anthropic() bool { return r == RouteMessages || r == RouteCountTokens }

// Record is what the simulator kept of one request it received.
type Record struct {
	// Route is the route the request was for.
	Route Route
	// Model is the request's model id ("" when the body could not be decoded).
	Model string
	// Header is the request's header; treat it as read-only.
	Header http.Header
	// Body is the request body as received; treat it as read-only.
	Body []byte
}

// Simulator is a deterministic stand-in for the OpenAI and Anthropic APIs. It is an
// http.Handler and is safe for concurrent use.
type Simulator struct {
	opts Options

	idSeed uint64
	idSeq  atomic.Uint64

	// cache holds the cached prompt prefixes, keyed by their hash under cacheSeed.
	cache     *promptCache
	cacheSeed maphash.Seed

	mu          sync.Mutex
	requests    map[string]int
	total       int
	queues      map[string][]Fault
	directives  map[string]int
	last        Record
	anthVersion string
	anthBeta    string
}

// New returns a Simulator configured by o.
func New(o Options) *Simulator {
	if o.DefaultWords <= 0 {
		o.DefaultWords = DefaultWords
	}
	if o.TokensPerSecond < 0 {
		o.TokensPerSecond = 0
	}
	return &Simulator{
		opts:       o,
		idSeed:     mix(uint64(time.Now().UnixNano())),
		cache:      newPromptCache(),
		cacheSeed:  maphash.MakeSeed(),
		requests:   make(map[string]int),
		queues:     make(map[string][]Fault),
		directives: make(map[string]int),
	}
}

// Enqueue appends f to the faults for upstream model id model; each later request for that
// model consumes the first queued fault, before any directive in its text is considered.
func (s *Simulator) Enqueue(model string, f Fault) {
	s.mu.Lock()
	s.queues[model] = append(s.queues[model], f)
	s.mu.Unlock()
}

// Requests returns how many requests for model the simulator has received (on any route,
// whatever their outcome, once the body could be decoded).
func (s *Simulator) Requests(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[model]
}

// TotalRequests returns how many requests the simulator has received on its API routes.
func (s *Simulator) TotalRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// LastRequest returns the record of the most recent request on an API route.
func (s *Simulator) LastRequest() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// LastHeaders returns a copy of the header of the most recent request on an API route, or
// nil when there has been none.
func (s *Simulator) LastHeaders() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.Header.Clone()
}

// AnthropicHeaders returns the anthropic-version and anthropic-beta headers of the most recent
// request on an Anthropic route ("" for a header it did not carry). The simulator accepts and
// otherwise ignores them.
func (s *Simulator) AnthropicHeaders() (version, beta string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.anthVersion, s.anthBeta
}

// Reset forgets the request counts, the queued faults, the times= counters of directives, the
// last request and the cached prompt prefixes.
func (s *Simulator) Reset() {
	s.cache.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.requests)
	clear(s.queues)
	clear(s.directives)
	s.total = 0
	s.last = Record{}
	s.anthVersion, s.anthBeta = "", ""
}

// record notes a request.
func (s *Simulator) record(rt Route, r *http.Request, model string, body []byte) {
	s.mu.Lock()
	s.total++
	if model != "" {
		s.requests[model]++
	}
	s.last = Record{Route: rt, Model: model, Header: r.Header, Body: body}
	if rt.anthropic() {
		s.anthVersion = strings.Join(r.Header.Values("Anthropic-Version"), ",")
		s.anthBeta = strings.Join(r.Header.Values("Anthropic-Beta"), ",")
	}
	s.mu.Unlock()
}

// takeFault returns the fault for this request: the first queued one for model, else the
// directive's (subject to its times= counter).
func (s *Simulator) takeFault(model string, d *directive) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[model]; len(q) > 0 {
		f := q[0]
		if len(q) == 1 {
			delete(s.queues, model)
		} else {
			s.queues[model] = q[1:]
		}
		return f
	}
	if d == nil || d.fault.Kind == FaultNone {
		return Fault{}
	}
	if d.times > 0 {
		s.directives[d.raw]++
		if s.directives[d.raw] > d.times {
			return Fault{}
		}
	}
	return d.fault
}

// newID returns prefix followed by n pseudo-random characters (hex when hex is set, else
// base62).
func (s *Simulator) newID(prefix string, n int, hex bool) string {
	const b62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	x := mix(s.idSeed + s.idSeq.Add(1)*0x9e3779b97f4a7c15)
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	for i := 0; i < n; i++ {
		if i%8 == 0 {
			x = mix(x)
		}
		if hex {
			b = append(b, "0123456789abcdef"[x&15])
			x >>= 4
		} else {
			b = append(b, b62[x%62])
			x /= 62
		}
	}
	return string(b)
}

// ServeHTTP answers one request.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	var rt Route
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		rt = RouteCountTokens
	case strings.HasSuffix(path, "/messages"):
		rt = RouteMessages
	case strings.HasSuffix(path, "/chat/completions"):
		rt = RouteChat
	case strings.HasSuffix(path, "/responses"):
		rt = RouteResponses
	case path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
		return
	default:
		s.writeOpenAIError(w, http.StatusNotFound, "invalid_request_error",
			"Invalid URL ("+r.Method+" "+path+")", "", "")
		return
	}
	if rt.anthropic() {
		w.Header().Set("Request-Id", s.newID("req_011C", 20, false))
	} else {
		w.Header().Set("X-Request-Id", s.newID("req_", 32, true))
	}
	if r.Method != http.MethodPost {
		if rt.anthropic() {
			s.writeAnthropicError(w, http.StatusMethodNotAllowed, "invalid_request_error", "Method Not Allowed")
		} else {
			s.writeOpenAIError(w, http.StatusMethodNotAllowed, "invalid_request_error",
				"Invalid URL ("+r.Method+" "+path+")", "", "")
		}
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge) && rt.anthropic():
			s.writeAnthropicError(w, http.StatusRequestEntityTooLarge, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
		case errors.As(err, &tooLarge):
			s.writeOpenAIError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "Request body too large.", "", "")
		}
		return // otherwise the client went away
	}
	switch rt {
	case RouteChat:
		s.serveChat(w, r, body)
	case RouteResponses:
		s.serveResponses(w, r, body)
	case RouteMessages:
		s.serveMessages(w, r, body)
	case RouteCountTokens:
		s.serveCountTokens(w, r, body)
	}
}

// readBody reads the whole request body, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, maxBody)
	size := 512
	if r.ContentLength > 0 && r.ContentLength <= maxBody {
		size = int(r.ContentLength) + 1
	}
	buf := make([]byte, 0, size)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// authorized checks the route's credential; it answers 401 and returns false when it fails.
func (s *Simulator) authorized(w http.ResponseWriter, r *http.Request, rt Route) bool {
	if s.opts.APIKey == "" {
		return true
	}
	if rt.anthropic() {
		switch key := r.Header.Get("X-Api-Key"); {
		case key == "":
			s.writeAnthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
			return false
		case key != s.opts.APIKey:
			s.writeAnthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
			return false
		}
		return true
	}
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	switch {
	case auth == "" || (ok && strings.TrimSpace(key) == ""):
		s.writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error",
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", "", "")
		return false
	case !ok || strings.TrimSpace(key) != s.opts.APIKey:
		s.writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error",
			"Incorrect API key provided: "+maskKey(strings.TrimSpace(key))+".", "", "invalid_api_key")
		return false
	}
	return true
}

// maskKey shows the first and last few characters of a key, as OpenAI's message does.
func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", 8) + k[len(k)-4:]
}
