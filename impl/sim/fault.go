package sim

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// FaultKind is the kind of failure a Fault injects.
type FaultKind int

// The kinds of fault. "Content events" are the events that carry output: text deltas and tool
// argument fragments. A fault placed after more content events than the reply has fires just
// before the reply's terminal events.
const (
	// FaultNone injects nothing.
	FaultNone FaultKind = iota
	// FaultStatus answers Fault.Status before any byte of the reply, in the route's error
	// envelope, with Retry-After when Fault.RetryAfter is positive.
	FaultStatus
	// FaultMidstream sends the format's in-band error after Fault.After content events and
	// closes the stream. A request that does not stream gets the corresponding HTTP error
	// instead (500 for OpenAI routes, 529 for Messages, or Fault.Status when set).
	FaultMidstream
	// FaultStall sends the response headers and the stream's opening events, then pauses for
	// Fault.Delay after Fault.After content events before it continues normally. A request
	// that does not stream is delayed by Fault.Delay before its answer.
	FaultStall
	// FaultStallBefore sends nothing for Fault.Delay, then answers normally.
	FaultStallBefore
	// FaultDrop closes the connection abruptly after Fault.After content events, so the client
	// sees an unexpected EOF. A request that does not stream gets its headers and half of its
	// body before the connection closes. The connection is hijacked; where that is impossible
	// (HTTP/2, or a ResponseWriter that is not a server's) the handler panics with
	// http.ErrAbortHandler, which a server turns into a reset stream.
	FaultDrop
	// FaultDropBefore closes the connection before any byte of the response is sent.
	FaultDropBefore
)

// String returns the directive name of the kind.
func (k FaultKind) String() string {
	switch k {
	case FaultStatus:
		return "status"
	case FaultMidstream:
		return "midstream"
	case FaultStall:
		return "stall"
	case FaultStallBefore:
		return "stall_before"
	case FaultDrop:
		return "drop"
	case FaultDropBefore:
		return "drop_before"
	default:
		return "none"
	}
}

// Fault is a failure the simulator injects into one reply. The zero value injects nothing.
type Fault struct {
	// Kind selects the failure.
	Kind FaultKind
	// Status is the HTTP status of a FaultStatus (400-599; anything else means 500). For a
	// FaultMidstream it selects the in-band error's type (429 rate limit, 500 server error,
	// 503 or 529 overloaded); zero means the format's usual one (server_error for OpenAI,
	// overloaded_error for Anthropic).
	Status int
	// RetryAfter, when positive, adds Retry-After (whole seconds, rounded up) to a FaultStatus
	// answer, and retry-after-ms on the OpenAI routes.
	RetryAfter time.Duration
	// ShouldRetry, when "true" or "false", adds an x-should-retry header to a FaultStatus answer.
	ShouldRetry string
	// After is the number of content events sent before a FaultMidstream, FaultStall or
	// FaultDrop strikes.
	After int
	// Delay is the pause of a FaultStall or FaultStallBefore.
	Delay time.Duration
}

// directive is what the [[sim ...]] directives of a message ask for.
type directive struct {
	raw   string // the directives' text, the key of the times= counter
	words int    // reply length; 0 = default
	fault Fault
	times int // the fault applies to the first times requests carrying raw; 0 = always
	tps   float64
	tpsOK bool
	first time.Duration
	fOK   bool
	// webSearch is the number of hosted web searches asked for; 0 = none.
	webSearch int
	// cacheMin is the shortest cacheable prompt prefix asked for, in tokens (at least 1);
	// 0 = the model's own.
	cacheMin int
	// refuse asks for the model's refusal in place of an answer (refuse=true).
	refuse bool
	// refuseAfterText asks for an answer whose first half is text and the rest the model's
	// refusal, on the chat route (refuse=after_text).
	refuseAfterText bool
	// noTextDeltas asks a Responses stream without its text and refusal deltas
	// (deltas=false).
	noTextDeltas bool
}

// parseDirectives reads every [[sim key=value ...]] in text. Unknown keys and malformed values
// are ignored.
func parseDirectives(text string) (d directive, ok bool) {
	const open = "[[sim"
	rest := text
	for {
		i := strings.Index(rest, open)
		if i < 0 {
			break
		}
		body := rest[i+len(open):]
		end := strings.Index(body, "]]")
		if end < 0 {
			break
		}
		if scriptHead(rest[i:]) > 0 {
			// A script (see script.go) is no key=value directive; its JSON may hold "]]".
			n, _, _ := parseScript(rest[i:])
			rest = rest[i+n:]
			continue
		}
		inner := body[:end]
		rest = body[end+2:]
		if inner != "" && inner[0] != ' ' && inner[0] != '\t' && inner[0] != '\n' {
			continue // e.g. "[[simulate]]"
		}
		full := open + inner + "]]"
		if ok {
			d.raw += "\n" + full
		} else {
			d.raw = full
		}
		ok = true
		for _, kv := range strings.Fields(inner) {
			k, v, found := strings.Cut(kv, "=")
			if !found {
				continue
			}
			d.set(k, v)
		}
	}
	return d, ok
}

// orNil returns d when ok, else nil.
func (d *directive) orNil(ok bool) *directive {
	if !ok {
		return nil
	}
	return d
}

// set applies one key=value of a directive.
func (d *directive) set(k, v string) {
	num := func() (float64, bool) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, false
		}
		return f, true
	}
	switch k {
	case "words":
		if f, ok := num(); ok {
			d.words = int(f)
			if d.words == 0 {
				d.words = -1 // an explicit empty reply
			}
		}
	case "fault":
		switch v {
		case "midstream":
			d.fault.Kind = FaultMidstream
		case "stall":
			d.fault.Kind = FaultStall
		case "stall_before":
			d.fault.Kind = FaultStallBefore
		case "drop":
			d.fault.Kind = FaultDrop
		case "drop_before":
			d.fault.Kind = FaultDropBefore
		default:
			if n, err := strconv.Atoi(v); err == nil && n >= 400 && n <= 599 {
				d.fault.Kind, d.fault.Status = FaultStatus, n
			}
		}
	case "status":
		if n, err := strconv.Atoi(v); err == nil && n >= 400 && n <= 599 {
			d.fault.Status = n
		}
	case "retry_after":
		if f, ok := num(); ok {
			d.fault.RetryAfter = time.Duration(f * float64(time.Second))
		}
	case "should_retry":
		if v == "true" || v == "false" {
			d.fault.ShouldRetry = v
		}
	case "after":
		if f, ok := num(); ok {
			d.fault.After = int(f)
		}
	case "ms":
		if f, ok := num(); ok {
			d.fault.Delay = time.Duration(f * float64(time.Millisecond))
		}
	case "times":
		if f, ok := num(); ok {
			d.times = int(f)
		}
	case "tps":
		if f, ok := num(); ok {
			d.tps, d.tpsOK = f, true
		}
	case "web_search":
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			d.webSearch = n
		}
	case "refuse":
		d.refuse = v == "true" || v == "after_text"
		d.refuseAfterText = v == "after_text"
	case "deltas":
		d.noTextDeltas = v == "false"
	case "cache_min":
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			d.cacheMin = max(n, 1)
		}
	case "first_ms":
		if f, ok := num(); ok {
			d.first, d.fOK = time.Duration(f*float64(time.Millisecond)), true
		}
	}
}
