package streamconv

import (
	"bytes"
	"strings"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// Relay carries a stream from an upstream of the client's own format to the client event by
// event, as the upstream sent it, so that what the neutral form does not model (thinking blocks
// and their signatures, citations, logprobs, refusal deltas, reasoning items, ...) reaches the
// client untouched. The gateway changes only what it owns: the model name, which is the
// client's and not the upstream's, and on chat the usage chunk, which the gateway asks for to
// meter the stream and which a client that did not ask for it is not shown.
//
// The caller still decodes every upstream event (for the usage, the errors and the end) and
// feeds the neutral events to an Encoder of the same format, whose output it discards: the
// encoder's state is what ends the stream in the format when it fails. Relay keeps that
// encoder's Responses sequence numbers after the upstream's, so that an error and its
// response.failed continue the numbering the client has seen.
type Relay struct {
	f            llm.Format
	model        string
	includeUsage bool
	follower     sequenceFollower // the encoder, when it numbers its events (Responses)
	buf          []byte
	unmodelled   int
}

// sequenceFollower is an Encoder whose event numbering continues after the numbers of a stream
// relayed in its place (the Responses encoder).
type sequenceFollower interface {
	follow(seq int64)
}

// NewRelay returns a Relay to a client of format f that knows the model as model;
// includeUsage says whether a chat client asked for the usage chunk. enc is the encoder the
// caller feeds (see Relay).
func NewRelay(f llm.Format, model string, includeUsage bool, enc Encoder) *Relay {
	follower, _ := enc.(sequenceFollower)
	return &Relay{f: f, model: model, includeUsage: includeUsage, follower: follower}
}

// Event appends what the client gets for the upstream event ev to out: ev itself, with the model
// rewritten where the event carries it; the canonical [DONE] for a chat terminal the decoder
// accepts; nothing for an event with no data (which the decoders skip), for a chat usage chunk
// the client did not ask for, or for a chat data line that is not a chunk (an error object of a
// compatible server, say: the decoder reports errors, in the gateway's words). An event whose
// JSON the model rewrite cannot read goes out as it came; the decoder, which read it first,
// judges malformed streams. The events appended share a buffer that the next call reuses:
// write them first.
func (r *Relay) Event(ev sse.Event, out []sse.Event) []sse.Event {
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		return out
	}
	var (
		data []byte
		err  error
	)
	switch r.f {
	case llm.FormatChat:
		if isDone(ev.Data) {
			return append(out, sse.Event{Name: ev.Name, Data: []byte("[DONE]")})
		}
		has, empty := chunkChoices(ev.Data)
		if !has && r.includeUsage && isUsageChunk(ev.Data) {
			// A usage chunk whose choices are null or absent (vLLM and other compatible
			// servers): the client that asked for usage gets it with choices [] (§1.5).
			var v jsonview.View
			if v.Parse(ev.Data) != nil {
				return out
			}
			var edits jsonview.Edits
			edits.Set(&v, "choices", []byte("[]"))
			if data, err = convert.SetModel(r.buf[:0], edits.AppendTo(nil, &v), r.model); err != nil {
				return out
			}
			r.buf = data
			return append(out, sse.Event{Name: ev.Name, Data: data})
		}
		if !has || (empty && !r.includeUsage) {
			return out
		}
		data, err = convert.SetModel(r.buf[:0], ev.Data, r.model)
	case llm.FormatMessages:
		if ev.Name == "content_block_delta" {
			r.unmodelled += thinkingLen(ev.Data)
		}
		if ev.Name != "message_start" {
			return append(out, ev)
		}
		data, err = convert.SetMemberModel(r.buf[:0], ev.Data, "message", r.model)
	case llm.FormatResponses:
		if isDone(ev.Data) {
			// A [DONE] the stream's terminal event did not come before is no end of it (the
			// decoder takes the stream as cut, and the client gets the error and response.failed
			// instead): the Responses API itself never sends one.
			return out
		}
		if seq, ok := sequenceNumber(ev.Data); ok && r.follower != nil {
			r.follower.follow(seq)
		}
		if strings.HasSuffix(ev.Name, ".delta") && !modelledResponsesDeltas[ev.Name] {
			r.unmodelled += memberLen(ev.Data, "delta")
		}
		data, err = convert.SetMemberModel(r.buf[:0], ev.Data, "response", r.model)
	default:
		return append(out, ev)
	}
	if err != nil {
		return append(out, ev)
	}
	r.buf = data
	return append(out, sse.Event{Name: ev.Name, Data: data})
}

// Unmodelled is how many characters of output the relayed stream carried that the neutral
// events do not (thinking, reasoning summaries and text, refusals of Responses): the gateway
// bills them, estimated from their length, when the upstream's usage never came.
func (r *Relay) Unmodelled() int { return r.unmodelled }

// modelledResponsesDeltas are the Responses delta events the decoder turns into neutral events
// (whose text the caller counts itself).
var modelledResponsesDeltas = map[string]bool{
	"response.output_text.delta":             true,
	"response.function_call_arguments.delta": true,
}

// chunkChoices reports whether a chat chunk has a choices array, and whether it is empty (the
// usage chunk that stream_options.include_usage adds at the end).
func chunkChoices(chunk []byte) (has, empty bool) {
	val, ok := member(chunk, "choices")
	if !ok || len(val) == 0 || val[0] != '[' {
		return false, false
	}
	return true, isEmptyArray(val)
}

// isUsageChunk reports whether a chat chunk without a choices array carries a usage object.
func isUsageChunk(chunk []byte) bool {
	val, ok := member(chunk, "usage")
	return ok && len(val) > 0 && val[0] == '{'
}

// thinkingLen is the length of a Messages content_block_delta's thinking text (0 for another
// delta).
func thinkingLen(data []byte) int {
	delta, _ := member(data, "delta")
	return memberLen(delta, "thinking")
}

// memberLen is the length in bytes of the string member name of the object data, as sent
// (escapes included), or 0.
func memberLen(data []byte, name string) int {
	val, ok := member(data, name)
	if !ok || len(val) < 2 || val[0] != '"' {
		return 0
	}
	return len(val) - 2
}

// isEmptyArray reports whether val is an empty JSON array.
func isEmptyArray(val []byte) bool {
	if len(val) < 2 || val[0] != '[' {
		return false
	}
	i := skipWS(val, 1)
	return i < len(val) && val[i] == ']'
}

// sequenceNumber is a Responses event's top-level sequence_number.
func sequenceNumber(data []byte) (int64, bool) {
	val, ok := member(data, "sequence_number")
	if !ok {
		return 0, false
	}
	n, ok := intOf(val)
	return int64(n), ok
}
