package streamconv

import (
	"github.com/tollgate/tollgate/impl/convert"
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
	enc          Encoder
	buf          []byte
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
	return &Relay{f: f, model: model, includeUsage: includeUsage, enc: enc}
}

// Event appends what the client gets for the upstream event ev to out: ev itself, with the model
// rewritten where the event carries it, or nothing for a chat usage chunk the client did not
// ask for. The events appended share a buffer that the next call reuses: write them first. An
// error means the event's JSON could not be read.
func (r *Relay) Event(ev sse.Event, out []sse.Event) ([]sse.Event, error) {
	var (
		data []byte
		err  error
	)
	switch r.f {
	case llm.FormatChat:
		if string(ev.Data) == "[DONE]" {
			return append(out, ev), nil
		}
		if !r.includeUsage && withoutChoices(ev.Data) {
			return out, nil
		}
		data, err = convert.SetModel(r.buf[:0], ev.Data, r.model)
	case llm.FormatMessages:
		if ev.Name != "message_start" {
			return append(out, ev), nil
		}
		data, err = convert.SetMemberModel(r.buf[:0], ev.Data, "message", r.model)
	case llm.FormatResponses:
		if seq, ok := sequenceNumber(ev.Data); ok {
			if f, ok := r.enc.(sequenceFollower); ok {
				f.follow(seq)
			}
		}
		data, err = convert.SetMemberModel(r.buf[:0], ev.Data, "response", r.model)
	default:
		return append(out, ev), nil
	}
	if err != nil {
		return out, err
	}
	r.buf = data
	return append(out, sse.Event{Name: ev.Name, Data: data}), nil
}

// withoutChoices reports whether a chat chunk's choices are empty: the usage chunk that
// stream_options.include_usage adds at the end.
func withoutChoices(chunk []byte) bool {
	it := iterObject(chunk)
	for {
		key, val, ok := it.next()
		if !ok {
			return false
		}
		if string(key) == "choices" {
			return isEmptyArray(val)
		}
	}
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
	it := iterObject(data)
	for {
		key, val, ok := it.next()
		if !ok {
			return 0, false
		}
		if string(key) == "sequence_number" {
			n, ok := intOf(val)
			return int64(n), ok
		}
	}
}
