package streamconv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// Decoder turns one upstream's SSE events into neutral events.
type Decoder interface {
	// Decode consumes one upstream event and appends the neutral events it yields to out. done
	// reports the upstream's terminal event ([DONE], response.completed/incomplete/failed,
	// message_stop). An in-band upstream error becomes an llm.EventError (not a Go error), after
	// which the stream is over; a Go error means the stream is malformed. Decode does not keep
	// ev.Data after it returns.
	Decode(ev sse.Event, out []llm.Event) (events []llm.Event, done bool, err error)
}

// NewDecoder returns a Decoder for an upstream that streams in format f. It panics on an
// unknown format, which is a programming error.
func NewDecoder(f llm.Format) Decoder {
	switch f {
	case llm.FormatChat:
		return &chatDecoder{}
	case llm.FormatResponses:
		return &responsesDecoder{lastPart: -1}
	case llm.FormatMessages:
		return &messagesDecoder{}
	}
	panic(fmt.Sprintf("streamconv: unknown format %q", f))
}

// Encoder turns neutral events into the client's SSE events. The events returned by one call
// share a buffer that the next call reuses; write them out before calling the Encoder again.
type Encoder interface {
	// Encode consumes one neutral event and appends the client events it yields to out. An
	// llm.EventError fails the stream as Fail does. After the stream has ended (Finish, Fail or
	// an EventError) Encode emits nothing, but it still records usage.
	Encode(ev llm.Event, out []sse.Event) []sse.Event
	// Finish closes a stream that ended cleanly with the format's terminal events: the closing
	// events of any open block or item, the stop reason, the usage where the format puts it,
	// and the terminal marker.
	Finish(out []sse.Event) []sse.Event
	// Fail ends a stream after an error: the format's in-band error, then its terminal, per the
	// gateway rules. errType is an error type of any of the formats' vocabularies (e.g.
	// "overloaded_error", "server_error", "rate_limit_exceeded") or of tollgate's own
	// ("upstream_error"); it is mapped to the client format's vocabulary.
	Fail(errType, message string, out []sse.Event) []sse.Event
	// Usage returns the usage seen so far (for metering, also after a client disconnect).
	Usage() llm.Usage
}

// Meta is what the client-side stream says about itself that the upstream cannot tell.
type Meta struct {
	// ID is the client-visible id of the answer (chatcmpl-…, resp_…, msg_…). When empty, the
	// upstream's id from the Start event is used.
	ID string
	// Created is the creation time in Unix seconds (chat created, Responses created_at).
	Created int64
	// Model is the client-visible model name. When empty, the upstream's model is used.
	Model string
	// IncludeUsage is a chat request's stream_options.include_usage: only then does a chat
	// stream end with a usage chunk.
	IncludeUsage bool
	// InputTokensEstimate is the input token count that message_start reports when the
	// upstream has not told the real one by then.
	InputTokensEstimate int64
	// ResponsesEcho is what a Responses response object echoes from the request (instructions,
	// tools, temperature, ...), as object members each preceded by a comma
	// (convert.ResponsesEchoMembers); every response object of a Responses stream ends with
	// them. Empty: none.
	ResponsesEcho []byte
	// Relayed says that the encoder follows a stream relayed to the client (Relay) rather than
	// writing it: the upstream's id from the Start event wins over ID (which stands in when the
	// stream fails before there is one), and a failed Responses answer lists no output items,
	// since the client has the upstream's own.
	Relayed bool
}

// NewEncoder returns an Encoder for a client that reads format f. It panics on an unknown
// format, which is a programming error.
func NewEncoder(f llm.Format, m Meta) Encoder {
	switch f {
	case llm.FormatChat:
		return &chatEncoder{meta: m}
	case llm.FormatResponses:
		return &responsesEncoder{meta: m}
	case llm.FormatMessages:
		return &messagesEncoder{meta: m}
	}
	panic(fmt.Sprintf("streamconv: unknown format %q", f))
}

// mergeUsage folds a cumulative usage report into what is known: counts only grow, so the
// larger value of each field wins, and a report that lacks a field does not erase it. The cache
// writes are one count split by time to live, and a later report may split it anew (Anthropic's
// breakdown): the split of the report with the most writes wins, the later one on a tie. The
// service tier is the last one reported.
func mergeUsage(have, u llm.Usage) llm.Usage {
	have.InputTokens = max(have.InputTokens, u.InputTokens)
	have.OutputTokens = max(have.OutputTokens, u.OutputTokens)
	have.CachedInputTokens = max(have.CachedInputTokens, u.CachedInputTokens)
	have.ReasoningTokens = max(have.ReasoningTokens, u.ReasoningTokens)
	have.AudioInputTokens = max(have.AudioInputTokens, u.AudioInputTokens)
	have.AudioOutputTokens = max(have.AudioOutputTokens, u.AudioOutputTokens)
	have.CompactionOutputTokens = max(have.CompactionOutputTokens, u.CompactionOutputTokens)
	if w := u.CacheWriteTokens(); w > 0 && w >= have.CacheWriteTokens() {
		have.CacheWrite5mTokens, have.CacheWrite1hTokens = u.CacheWrite5mTokens, u.CacheWrite1hTokens
	}
	if u.ServiceTier != "" {
		have.ServiceTier = u.ServiceTier
	}
	for i := range have.HostedCalls {
		have.HostedCalls[i] = max(have.HostedCalls[i], u.HostedCalls[i])
	}
	return have
}

// emitter collects the client events of one Encoder call in one reused buffer. Events are
// appended to buf and their extents recorded; flush turns them into sse.Events once the call is
// done writing, so growth of buf within a call never leaves an earlier event pointing at a stale
// array.
type emitter struct {
	buf   []byte
	marks []mark
}

type mark struct {
	name       string
	start, end int
}

// reset starts a new call: the previous call's events are no longer valid.
func (e *emitter) reset() {
	e.buf = e.buf[:0]
	e.marks = e.marks[:0]
}

// begin starts an event and returns where its data begins.
func (e *emitter) begin() int { return len(e.buf) }

// end records the event whose data was appended since start.
func (e *emitter) end(name string, start int) {
	e.marks = append(e.marks, mark{name: name, start: start, end: len(e.buf)})
}

// flush appends the recorded events to out.
func (e *emitter) flush(out []sse.Event) []sse.Event {
	for _, m := range e.marks {
		out = append(out, sse.Event{Name: m.name, Data: e.buf[m.start:m.end:m.end]})
	}
	e.marks = e.marks[:0]
	return out
}

// derivedID makes an id for something the upstream did not name (a tool call without an id, a
// Responses output item): prefix, the client-visible answer id without its own prefix, and n.
func derivedID(prefix, answerID string, n int) string {
	if i := strings.IndexAny(answerID, "_-"); i >= 0 {
		answerID = answerID[i+1:]
	}
	if answerID == "" {
		return prefix + strconv.Itoa(n)
	}
	return prefix + answerID + "_" + strconv.Itoa(n)
}
