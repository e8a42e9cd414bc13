package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// finish is why a reply ended.
type finish int

const (
	finishStop    finish = iota // natural end
	finishLength                // cut by the request's max tokens
	finishStopSeq               // the next word was a stop sequence
	finishTool                  // the reply is a tool call
)

// turn is the plan of one reply, the same whatever the wire format.
type turn struct {
	route   Route
	model   string
	stream  bool
	seed    uint64
	input   int // input tokens, those read from or written to the prompt cache included
	words   int // text tokens of the reply
	finish  finish
	stopSeq string
	tool    string // the called tool's name, when finish == finishTool
	// namespace is the Responses namespace of the called function, "" for a top-level tool.
	namespace string
	// searches is the number of hosted web searches that open the reply (see websearch.go).
	searches int
	// refusal says the reply's words are the model's refusal to answer (the refuse directive):
	// chat message.refusal, a Responses refusal part, Messages text with stop_reason refusal.
	refusal bool
	// refusalFrom, on the chat and Responses routes, is the first token of the refusal when
	// the reply's words before it are the answer's text (refuse=after_text); 0 when every word
	// is the refusal. On the Messages route, which has no place for a refusal's words, such a
	// reply is its text alone (words is refusalFrom), stopped as a refusal.
	refusalFrom int
	// noTextDeltas, on the Responses route, leaves out the output_text and refusal deltas, so
	// that a part's text comes only in its done events (deltas=false).
	noTextDeltas bool
	// frags, when set, are the reply's content events in place of vocabulary words: the
	// tokens of the tool call's arguments when finish == finishTool, else the tokens of the
	// JSON text of a structured answer (see structured.go).
	frags   []string
	fault   Fault
	first   time.Duration
	every   time.Duration // between content events
	created int64

	// cacheRead is the part of the input tokens read from the prompt cache; cacheWrite5m and
	// cacheWrite1h are the parts written to it for five minutes and for an hour (Messages).
	cacheRead, cacheWrite5m, cacheWrite1h int
	// cacheMin is the shortest cacheable prefix a cache_min directive asks for, in tokens; 0
	// means the route's and model's own (see cacheMinimum).
	cacheMin int
}

// planInput is what a format's decoder extracts for planning a turn.
type planInput struct {
	prompt       string    // the text of the last user message
	endsWithUser bool      // the conversation ends with that message (no tool result after it)
	maxTokens    int       // 0 = no bound
	stops        []string  // stop sequences
	tools        []toolDef // callable function tools
	choiceNone   bool      // tool_choice forbids tool calls
	forced       string    // tool_choice names this tool
	forcedNS     string    // and this Responses namespace (tool_choice's namespace field)
	anyTool      bool      // tool_choice requires some tool call
	// format is the structured output the request asks for, nil for free text.
	format *outputFormat
	// script is the script the conversation plays (see script.go), nil when none.
	script *script
	// webSearch reports a hosted web search tool on offer; searchCap, when searchCapped, is
	// the most searches the request allows (Messages max_uses, Responses max_tool_calls).
	webSearch    bool
	searchCap    int
	searchCapped bool
}

// plan builds the turn for a decoded request. It consumes a queued or directed fault.
func (s *Simulator) plan(rt Route, model string, stream bool, input int, in planInput) *turn {
	t := &turn{
		route:   rt,
		model:   model,
		stream:  stream,
		seed:    hashText(model, in.prompt),
		input:   input,
		first:   s.opts.FirstTokenLatency,
		created: time.Now().Unix(),
	}
	tps := s.opts.TokensPerSecond
	n := s.opts.DefaultWords
	d, hasDirective := parseDirectives(in.prompt)
	if hasDirective {
		switch {
		case d.words > 0:
			n = d.words
		case d.words < 0:
			n = 0
		}
		if d.tpsOK {
			tps = d.tps
		}
		if d.fOK {
			t.first = d.first
		}
		t.searches = planSearches(d.webSearch, &in)
		t.cacheMin = d.cacheMin
		t.noTextDeltas = d.noTextDeltas && rt == RouteResponses
	}
	if tps > 0 {
		t.every = time.Duration(float64(time.Second) / tps)
	}
	if in.script != nil {
		t.playScript(in.script, &in)
		t.fault = s.takeFault(model, d.orNil(hasDirective))
		return t
	}
	if hasDirective && d.refuse {
		// A refusal is words, whatever the request asks for: no tool call, no structured
		// output (it is where the OpenAI models refuse), no stop sequence.
		if in.maxTokens > 0 && in.maxTokens < n {
			n, t.finish = in.maxTokens, finishLength
		}
		t.words, t.refusal = n, true
		if d.refuseAfterText {
			t.refusalFrom = n / 2
			if rt == RouteMessages && t.refusalFrom > 0 {
				// The classifiers stopped the answer where the refusal would begin.
				t.words, t.finish = t.refusalFrom, finishStop
			}
		}
		t.fault = s.takeFault(model, &d)
		return t
	}
	if in.format != nil {
		t.frags = in.format.fragments(mix(t.seed ^ structuredSalt))
		n = len(t.frags)
	}
	if in.maxTokens > 0 && in.maxTokens < n {
		n, t.finish = in.maxTokens, finishLength
	}
	if len(in.stops) > 0 && t.frags == nil {
	words:
		for i := 0; i < n; i++ {
			w := word(t.seed, i)
			for _, stop := range in.stops {
				if stop != "" && strings.TrimSpace(stop) == w {
					n, t.finish, t.stopSeq = i, finishStopSeq, stop
					break words
				}
			}
		}
	}
	t.words = n
	if len(in.tools) > 0 && !in.choiceNone {
		var call *toolDef
		switch {
		case in.forced != "":
			if call = in.forcedTool(); call == nil {
				call = &toolDef{name: in.forced, namespace: in.forcedNS}
			}
		case in.anyTool || in.endsWithUser:
			if call = mentionedTool(in.prompt, in.tools); call == nil && in.anyTool {
				call = &in.tools[0]
			}
		}
		if call != nil {
			t.tool, t.namespace, t.finish, t.stopSeq = call.name, call.namespace, finishTool, ""
			t.frags = call.arguments(in.forced != "", mix(t.seed))
		}
	}
	t.fault = s.takeFault(model, d.orNil(hasDirective))
	return t
}

// toolDef is a callable function tool.
type toolDef struct {
	name string
	// namespace is the name of the Responses namespace tool that holds the function, "" for a
	// top-level tool. The function is mentioned as "call <namespace>__<name>" or "call <name>".
	namespace string
	// schema is its parameters (input_schema) JSON Schema, nil when not given.
	schema json.RawMessage
}

// qualified is the name with its namespace, as Codex spells an MCP tool: mcp__server__tool.
func (d *toolDef) qualified() string {
	if d.namespace == "" {
		return d.name
	}
	return d.namespace + "__" + d.name
}

// forcedTool returns the tool that tool_choice names, or nil. Without a namespace in
// tool_choice, a top-level function wins over one of that name in a namespace, and the name
// may also be a qualified <namespace>__<name>.
func (in *planInput) forcedTool() *toolDef { return findTool(in.tools, in.forced, in.forcedNS) }

// findTool returns the tool called name in namespace ns, or nil. Without a namespace, a
// top-level function wins over one of that name in a namespace, and the name may also be a
// qualified <namespace>__<name>.
func findTool(tools []toolDef, name, ns string) *toolDef {
	for i := range tools {
		if d := &tools[i]; d.name == name && d.namespace == ns {
			return d
		}
	}
	if ns != "" {
		return nil
	}
	for i := range tools {
		if d := &tools[i]; d.name == name {
			return d
		}
	}
	for i := range tools {
		if d := &tools[i]; d.namespace != "" && d.qualified() == name {
			return d
		}
	}
	return nil
}

// mentionedTool returns the tool whose name, or qualified name, is the longest to appear in
// prompt as "call <name>"; nil when none does.
func mentionedTool(prompt string, tools []toolDef) *toolDef {
	var best *toolDef
	n := 0
	for i := range tools {
		d := &tools[i]
		for _, name := range [...]string{d.name, d.qualified()} {
			if name != "" && len(name) > n && strings.Contains(prompt, "call "+name) {
				best, n = d, len(name)
			}
		}
	}
	return best
}

// contentEvents is the number of content events of the reply.
func (t *turn) contentEvents() int {
	if t.finish == finishTool {
		return len(t.frags)
	}
	return t.words
}

// outputTokens is the reply's output token count.
func (t *turn) outputTokens() int { return t.contentEvents() }

// toolFragment returns piece i of the tool call's arguments.
func (t *turn) toolFragment(i int) string { return t.frags[i] }

// toolArgs returns the tool call's complete arguments.
func (t *turn) toolArgs() string { return strings.Join(t.frags, "") }

// appendText appends the first n tokens of the reply text, escaped for a JSON string (the
// vocabulary words need no escaping; the JSON text of a structured answer does).
func (t *turn) appendText(b []byte, n int) []byte {
	return t.appendTokens(b, 0, n)
}

// appendTokens appends tokens from to to-1 of the reply text, escaped for a JSON string.
func (t *turn) appendTokens(b []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		b = t.appendToken(b, i)
	}
	return b
}

// appendToken appends token i of the reply text, escaped for a JSON string.
func (t *turn) appendToken(b []byte, i int) []byte {
	if t.frags != nil {
		return jsontext.AppendEscaped(b, t.frags[i])
	}
	return appendToken(b, t.seed, i)
}

// pacer waits for the content events of one stream with a single timer.
type pacer struct {
	ctx   context.Context
	timer *time.Timer
	start time.Time
	first time.Duration
	every time.Duration
}

// due waits until content event i is due. It reports false when the client has gone.
func (p *pacer) due(i int) bool {
	if p.first == 0 && p.every == 0 {
		return p.ctx.Err() == nil
	}
	return p.until(p.start.Add(p.first + time.Duration(i)*p.every))
}

// pause waits for d and shifts the rest of the schedule by d.
func (p *pacer) pause(d time.Duration) bool {
	p.start = p.start.Add(d)
	return p.until(time.Now().Add(d))
}

// until waits until t or the end of the request's context.
func (p *pacer) until(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return p.ctx.Err() == nil
	}
	if p.timer == nil {
		p.timer = time.NewTimer(d)
	} else {
		p.timer.Reset(d)
	}
	select {
	case <-p.timer.C:
		return true
	case <-p.ctx.Done():
		p.timer.Stop()
		return false
	}
}

// sleep waits for d or the end of ctx; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sse writes the events of one stream, flushing after each.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	err error
}

// start begins an event: its event: line (when name is set) and the data: prefix.
func (o *sse) start(name string) {
	o.buf = o.buf[:0]
	if name != "" {
		o.buf = append(append(append(o.buf, "event: "...), name...), '\n')
	}
	o.buf = append(o.buf, "data: "...)
}

// end terminates the event, writes it and flushes.
func (o *sse) end() {
	o.buf = append(o.buf, '\n', '\n')
	if o.err != nil {
		return
	}
	if _, o.err = o.w.Write(o.buf); o.err == nil {
		o.err = o.rc.Flush()
	}
}

// streamer writes the events of one wire format.
type streamer interface {
	// open writes the events before the first content event.
	open(o *sse)
	// content writes content event i.
	content(o *sse, i int)
	// close writes the terminal events.
	close(o *sse)
	// fail writes the in-band error after n content events.
	fail(o *sse, n int)
}

// stream sends the turn as an event stream, injecting its fault.
func (s *Simulator) stream(w http.ResponseWriter, r *http.Request, t *turn, st streamer) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	o := &sse{w: w, rc: http.NewResponseController(w), buf: make([]byte, 0, 1024)}
	if o.err = o.rc.Flush(); o.err != nil {
		return
	}
	p := pacer{ctx: r.Context(), start: time.Now(), first: t.first, every: t.every}
	n := t.contentEvents()
	at := -1
	switch t.fault.Kind {
	case FaultMidstream, FaultStall, FaultDrop:
		at = min(max(t.fault.After, 0), n)
	}
	if t.fault.Kind == FaultStall && at == 0 {
		// Headers only, then silence.
		if !p.pause(t.fault.Delay) {
			return
		}
		at = -1
	}
	st.open(o)
	for i := 0; ; i++ {
		if o.err != nil {
			return
		}
		if i == at {
			switch t.fault.Kind {
			case FaultMidstream:
				st.fail(o, i)
				return
			case FaultDrop:
				abort(o.rc)
				return
			case FaultStall:
				if !p.pause(t.fault.Delay) {
					return
				}
			}
		}
		if i == n {
			break
		}
		if !p.due(i) {
			return
		}
		st.content(o, i)
	}
	st.close(o)
}

// wait delays a reply that does not stream by the time its stream would have taken.
func (t *turn) wait(ctx context.Context) bool {
	d := t.first
	if n := t.contentEvents(); n > 1 {
		d += time.Duration(n-1) * t.every
	}
	return sleep(ctx, d)
}

// abort closes the client connection abruptly: the client sees the response (or its body)
// end unexpectedly. The caller must not touch the response afterwards. Where the connection
// cannot be hijacked (HTTP/2), it aborts the handler with http.ErrAbortHandler, which resets
// the stream.
func abort(rc *http.ResponseController) {
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// preFault applies the faults that strike before any byte of the reply. It reports whether the
// request has been answered (or abandoned). errorStatus writes a status in the route's envelope.
func (s *Simulator) preFault(w http.ResponseWriter, r *http.Request, t *turn, errorStatus func(status int)) bool {
	f := t.fault
	switch f.Kind {
	case FaultStallBefore:
		return !sleep(r.Context(), f.Delay)
	case FaultDropBefore:
		abort(http.NewResponseController(w))
		return true
	case FaultStatus:
		h := w.Header()
		if f.RetryAfter > 0 {
			secs := int((f.RetryAfter + time.Second - 1) / time.Second)
			h.Set("Retry-After", strconv.Itoa(secs))
			if !t.route.anthropic() {
				h.Set("Retry-After-Ms", strconv.FormatInt(f.RetryAfter.Milliseconds(), 10))
			}
		}
		if f.ShouldRetry != "" {
			h.Set("X-Should-Retry", f.ShouldRetry)
		}
		st := f.Status
		if st < 400 || st > 599 {
			st = http.StatusInternalServerError
		}
		errorStatus(st)
		return true
	case FaultStall:
		if !t.stream {
			return !sleep(r.Context(), f.Delay)
		}
	case FaultMidstream:
		if !t.stream {
			st := f.Status
			if st == 0 {
				st = http.StatusInternalServerError
				if t.route.anthropic() {
					st = 529
				}
			}
			errorStatus(st)
			return true
		}
	}
	return false
}

// writeBody sends a complete JSON body; a FaultDrop sends the headers and half of it, then
// closes the connection.
func (s *Simulator) writeBody(w http.ResponseWriter, t *turn, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if t.fault.Kind == FaultDrop {
		rc := http.NewResponseController(w)
		_, _ = w.Write(body[:len(body)/2])
		_ = rc.Flush()
		abort(rc)
		return
	}
	_, _ = w.Write(body)
}
