package streamconv

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// responsesEncoder writes OpenAI Responses stream events (wire-protocols.md §2.2–2.5): every
// event named by its type and numbered from 0; created and in_progress first; each message item
// as output_item.added, content_part.added, output_text.delta…, output_text.done,
// content_part.done, output_item.done (a refusal as a message of its own whose part is a
// refusal, with refusal.delta… and refusal.done); each function call as output_item.added,
// function_call_arguments.delta…, function_call_arguments.done, output_item.done; then the
// terminal response.completed or response.incomplete carrying every output item and the usage.
// A failure is the flat error event, then response.failed. There is no [DONE].
type responsesEncoder struct {
	meta    Meta
	em      emitter
	seq     int64
	started bool
	ended   bool
	id      string
	model   string
	// items are the output items in output_index order; open is the one still receiving
	// deltas (-1: none).
	items []respOut
	open  int
	// relayedItems, set by a Relay in the encoder's place, appends the relayed stream's items
	// to a failure's response (listRelayedItems).
	relayedItems func(dst []byte) []byte
	// tools maps a neutral tool index to its position in items.
	tools     []int
	stop      llm.StopReason
	usage     llm.Usage
	usageSeen bool
}

// respOut is one output item as far as it has been streamed.
type respOut struct {
	fc bool
	// refusal marks a message whose one part is the model's refusal, not output_text.
	refusal bool
	id      string
	callID  string
	name    string
	// text is the item's text or arguments, JSON-escaped (without quotes), so that the done
	// events and the final response can repeat it without escaping it again.
	text   []byte
	status string
}

// Encode implements Encoder.
func (r *responsesEncoder) Encode(ev llm.Event, out []sse.Event) []sse.Event {
	if ev.Kind == llm.EventUsage {
		r.usage = mergeUsage(r.usage, ev.Usage)
		r.usageSeen = true
		return out
	}
	if r.ended {
		return out
	}
	if ev.Kind == llm.EventError {
		t, m := errorOf(ev.Err)
		return r.Fail(t, m, out)
	}
	r.em.reset()
	switch ev.Kind {
	case llm.EventStart:
		r.start(ev.ID, ev.Model)
	case llm.EventTextDelta:
		if ev.Text == "" || r.stop != "" {
			break
		}
		r.start("", "")
		if r.open < 0 || r.items[r.open].fc || r.items[r.open].refusal != ev.Refusal {
			r.openMessage(ev.Refusal)
		}
		it := &r.items[r.open]
		n := len(it.text)
		it.text = appendEscaped(it.text, ev.Text)
		kind := partKindOf(it.refusal)
		s := r.begin(kind.delta)
		r.appendItemRef(r.open)
		r.em.buf = append(r.em.buf, `,"content_index":0,"delta":"`...)
		r.em.buf = append(r.em.buf, it.text[n:]...)
		r.em.buf = append(r.em.buf, kind.tail...)
		r.end(s)
	case llm.EventToolCallStart:
		if r.stop != "" {
			break
		}
		r.start("", "")
		r.closeOpen("completed")
		callID := ev.ToolCallID
		if callID == "" {
			callID = derivedID("call_", r.id, ev.ToolIndex)
		}
		r.open = len(r.items)
		r.items = append(r.items, respOut{fc: true, id: "fc_" + r.idBase() + "_" + strconv.Itoa(ev.ToolIndex), callID: callID, name: ev.ToolName, status: "in_progress"})
		for len(r.tools) <= ev.ToolIndex {
			r.tools = append(r.tools, -1)
		}
		r.tools[ev.ToolIndex] = r.open
		s := r.begin("response.output_item.added")
		r.em.buf = append(r.em.buf, `,"output_index":`...)
		r.em.buf = appendInt(r.em.buf, int64(r.open))
		r.em.buf = append(r.em.buf, `,"item":`...)
		r.appendItem(r.open)
		r.end(s)
	case llm.EventToolCallDelta:
		if ev.Arguments == "" || r.stop != "" || ev.ToolIndex < 0 || ev.ToolIndex >= len(r.tools) || r.tools[ev.ToolIndex] < 0 {
			break
		}
		// A delta for a call whose item was already closed (an upstream that interleaves
		// calls) is still sent and kept: no SDK checks the order, and the arguments stay whole
		// in the final response.
		i := r.tools[ev.ToolIndex]
		it := &r.items[i]
		n := len(it.text)
		it.text = appendEscaped(it.text, ev.Arguments)
		s := r.begin("response.function_call_arguments.delta")
		r.appendItemRef(i)
		r.em.buf = append(r.em.buf, `,"delta":"`...)
		r.em.buf = append(r.em.buf, it.text[n:]...)
		r.em.buf = append(r.em.buf, '"')
		r.end(s)
	case llm.EventStop:
		if r.stop == "" {
			r.stop = ev.Stop
			if r.stop == "" {
				r.stop = llm.StopEnd
			}
		}
	}
	return r.em.flush(out)
}

// Finish implements Encoder: it closes the open item and sends response.completed, or
// response.incomplete when the output bound cut the answer or it was filtered.
func (r *responsesEncoder) Finish(out []sse.Event) []sse.Event {
	if r.ended {
		return out
	}
	r.ended = true
	r.em.reset()
	r.start("", "")
	stop := effectiveStop(r.stop, len(r.tools) > 0)
	status, reason := convert.StopReasonFor(llm.FormatResponses, stop), convert.ResponsesIncompleteReason(stop)
	r.closeOpen(status)
	name := "response.completed"
	if status == "incomplete" {
		name = "response.incomplete"
	}
	s := r.begin(name)
	r.em.buf = append(r.em.buf, `,"response":`...)
	r.appendResponse(status, reason, "", "", true)
	r.end(s)
	return r.em.flush(out)
}

// Fail implements Encoder: the flat error event, then response.failed (§2.5), numbered on from
// the events before them. The open item is left as it is; the failed response lists it as
// incomplete.
func (r *responsesEncoder) Fail(errType, message string, out []sse.Event) []sse.Event {
	if r.ended {
		return out
	}
	r.ended = true
	r.em.reset()
	// The SDK stream helpers require response.created first, even before an error.
	r.start("", "")
	if r.open >= 0 {
		r.items[r.open].status = "incomplete"
		r.open = -1
	}
	code := responsesErrorCode(errorKind(errType))
	if k := errorKind(errType); k == apierror.KindUpstream && errType != "" && errType != "upstream_error" {
		// An upstream's own code that tollgate does not know is still the best description.
		code = errType
	}
	s := r.begin("error")
	r.em.buf = append(r.em.buf, `,"code":`...)
	r.em.buf = appendString(r.em.buf, code)
	r.em.buf = append(r.em.buf, `,"message":`...)
	r.em.buf = appendString(r.em.buf, message)
	r.em.buf = append(r.em.buf, `,"param":null`...)
	r.end(s)
	s = r.begin("response.failed")
	r.em.buf = append(r.em.buf, `,"response":`...)
	r.appendResponse("failed", "", code, message, r.usageSeen)
	r.end(s)
	return r.em.flush(out)
}

// Usage implements Encoder.
func (r *responsesEncoder) Usage() llm.Usage { return r.usage }

// listRelayedItems implements relayedItemsSource: the response of a failure lists what
// appendItems appends (the relayed stream's items) instead of the encoder's own, which the
// client never saw.
func (r *responsesEncoder) listRelayedItems(appendItems func(dst []byte) []byte) {
	r.relayedItems = appendItems
}

// follow implements sequenceFollower: the next event is numbered right after seq. The
// encoder's own events while it follows a relayed stream are not sent, so the relayed
// numbering is the one the client knows.
func (r *responsesEncoder) follow(seq int64) {
	r.seq = seq + 1
}

// start sends response.created and response.in_progress once.
func (r *responsesEncoder) start(id, model string) {
	if r.started {
		return
	}
	r.started = true
	r.open = -1
	r.id, r.model = id, model
	if r.meta.ID != "" && (id == "" || !r.meta.Relayed) {
		r.id = r.meta.ID
	}
	if r.meta.Model != "" {
		r.model = r.meta.Model
	}
	for _, name := range [...]string{"response.created", "response.in_progress"} {
		s := r.begin(name)
		r.em.buf = append(r.em.buf, `,"response":`...)
		r.appendResponse("in_progress", "", "", "", false)
		r.end(s)
	}
}

// idBase is the response id without its resp_ prefix: output item ids are derived from it as
// the converters derive them for a complete answer (msg_<base>, fc_<base>_<tool index>).
func (r *responsesEncoder) idBase() string { return strings.TrimPrefix(r.id, "resp_") }

// openMessage closes the open item and opens a message item with one output_text part, or
// with one refusal part when refusal is set.
func (r *responsesEncoder) openMessage(refusal bool) {
	r.closeOpen("completed")
	r.open = len(r.items)
	id := "msg_" + r.idBase()
	for _, it := range r.items {
		if !it.fc {
			// Not the first message item: the first has the id a complete answer has.
			id += "_" + strconv.Itoa(r.open)
			break
		}
	}
	r.items = append(r.items, respOut{id: id, status: "in_progress", refusal: refusal})
	s := r.begin("response.output_item.added")
	r.em.buf = append(r.em.buf, `,"output_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(r.open))
	r.em.buf = append(r.em.buf, `,"item":`...)
	r.appendItem(r.open)
	r.end(s)
	s = r.begin("response.content_part.added")
	r.appendItemRef(r.open)
	r.em.buf = append(r.em.buf, `,"content_index":0,"part":`...)
	r.appendPart(nil, refusal)
	r.end(s)
}

// closeOpen sends the done events of the open item, which ends with the given status.
func (r *responsesEncoder) closeOpen(status string) {
	if r.open < 0 {
		return
	}
	i := r.open
	r.open = -1
	it := &r.items[i]
	it.status = status
	if it.fc {
		s := r.begin("response.function_call_arguments.done")
		r.appendItemRef(i)
		r.em.buf = append(r.em.buf, `,"name":`...)
		r.em.buf = appendString(r.em.buf, it.name)
		r.em.buf = append(r.em.buf, `,"arguments":"`...)
		r.em.buf = append(r.em.buf, it.text...)
		r.em.buf = append(r.em.buf, '"')
		r.end(s)
	} else {
		kind := partKindOf(it.refusal)
		s := r.begin(kind.done)
		r.appendItemRef(i)
		r.em.buf = append(r.em.buf, kind.doneField...)
		r.em.buf = append(r.em.buf, it.text...)
		r.em.buf = append(r.em.buf, kind.tail...)
		r.end(s)
		s = r.begin("response.content_part.done")
		r.appendItemRef(i)
		r.em.buf = append(r.em.buf, `,"content_index":0,"part":`...)
		r.appendPart(it.text, it.refusal)
		r.end(s)
	}
	s := r.begin("response.output_item.done")
	r.em.buf = append(r.em.buf, `,"output_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(i))
	r.em.buf = append(r.em.buf, `,"item":`...)
	r.appendItem(i)
	r.end(s)
}

// begin starts an event of the given type with its sequence number.
func (r *responsesEncoder) begin(typ string) int {
	s := r.em.begin()
	r.em.buf = append(r.em.buf, `{"type":"`...)
	r.em.buf = append(r.em.buf, typ...)
	r.em.buf = append(r.em.buf, `","sequence_number":`...)
	r.em.buf = appendInt(r.em.buf, r.seq)
	r.seq++
	r.em.marks = append(r.em.marks, mark{name: typ, start: s})
	return s
}

// end closes the event begun at s.
func (r *responsesEncoder) end(s int) {
	r.em.buf = append(r.em.buf, '}')
	m := &r.em.marks[len(r.em.marks)-1]
	m.end = len(r.em.buf)
}

// appendItemRef appends the item_id and output_index of item i.
func (r *responsesEncoder) appendItemRef(i int) {
	r.em.buf = append(r.em.buf, `,"item_id":`...)
	r.em.buf = appendString(r.em.buf, r.items[i].id)
	r.em.buf = append(r.em.buf, `,"output_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(i))
}

// partKind is how a message's one part streams: its delta and done events, the done event's
// field, and what follows the text in both.
type partKind struct {
	delta, done, doneField, tail string
}

var (
	outputTextPart = partKind{delta: "response.output_text.delta", done: "response.output_text.done",
		doneField: `,"content_index":0,"text":"`, tail: `","logprobs":[]`}
	refusalPart = partKind{delta: "response.refusal.delta", done: "response.refusal.done",
		doneField: `,"content_index":0,"refusal":"`, tail: `"`}
)

// partKindOf is the part kind of a message: its refusal, or its output_text.
func partKindOf(refusal bool) *partKind {
	if refusal {
		return &refusalPart
	}
	return &outputTextPart
}

// appendPart appends an output_text part with the given escaped text, or a refusal part
// when refusal is set.
func (r *responsesEncoder) appendPart(text []byte, refusal bool) {
	if refusal {
		r.em.buf = append(r.em.buf, `{"type":"refusal","refusal":"`...)
		r.em.buf = append(r.em.buf, text...)
		r.em.buf = append(r.em.buf, `"}`...)
		return
	}
	r.em.buf = append(r.em.buf, `{"type":"output_text","text":"`...)
	r.em.buf = append(r.em.buf, text...)
	r.em.buf = append(r.em.buf, `","annotations":[],"logprobs":[]}`...)
}

// appendItem appends item i as it stands: in progress (no content, empty arguments) or done.
func (r *responsesEncoder) appendItem(i int) {
	it := &r.items[i]
	r.em.buf = append(r.em.buf, `{"id":`...)
	r.em.buf = appendString(r.em.buf, it.id)
	inProgress := it.status == "in_progress"
	if it.fc {
		r.em.buf = append(r.em.buf, `,"type":"function_call","status":`...)
		r.em.buf = appendString(r.em.buf, it.status)
		r.em.buf = append(r.em.buf, `,"arguments":"`...)
		if !inProgress {
			r.em.buf = append(r.em.buf, it.text...)
		}
		r.em.buf = append(r.em.buf, `","call_id":`...)
		r.em.buf = appendString(r.em.buf, it.callID)
		r.em.buf = append(r.em.buf, `,"name":`...)
		r.em.buf = appendString(r.em.buf, it.name)
		r.em.buf = append(r.em.buf, '}')
		return
	}
	r.em.buf = append(r.em.buf, `,"type":"message","status":`...)
	r.em.buf = appendString(r.em.buf, it.status)
	r.em.buf = append(r.em.buf, `,"role":"assistant","content":[`...)
	if !inProgress {
		r.appendPart(it.text, it.refusal)
	}
	r.em.buf = append(r.em.buf, "]}"...)
}

// appendResponse appends the response object. In progress it has no output and no usage; at
// the end it has every output item and (when withUsage) the usage.
func (r *responsesEncoder) appendResponse(status, incompleteReason, errCode, errMessage string, withUsage bool) {
	b := append(r.em.buf, `{"id":`...)
	b = appendString(b, r.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = appendInt(b, r.meta.Created)
	b = append(b, `,"status":`...)
	b = appendString(b, status)
	b = append(b, `,"background":false,"error":`...)
	if errCode != "" {
		b = append(b, `{"code":`...)
		b = appendString(b, errCode)
		b = append(b, `,"message":`...)
		b = appendString(b, errMessage)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if incompleteReason != "" {
		b = append(b, `{"reason":`...)
		b = appendString(b, incompleteReason)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, r.model)
	b = append(b, `,"output":[`...)
	r.em.buf = b
	switch {
	case status == "in_progress":
	case !r.meta.Relayed:
		for i := range r.items {
			if i > 0 {
				r.em.buf = append(r.em.buf, ',')
			}
			r.appendItem(i)
		}
	case r.relayedItems != nil:
		// A relayed stream's failure lists the upstream's items the client has (Relay).
		r.em.buf = r.relayedItems(r.em.buf)
	}
	b = append(r.em.buf, `],"usage":`...)
	if withUsage {
		b = convert.AppendResponsesUsage(b, r.usage)
	} else {
		b = append(b, "null"...)
	}
	// The tier asked for is not known here: default until the end, then the one the upstream
	// says served the answer.
	tier := "default"
	if status != "in_progress" {
		tier = convert.OpenAIServiceTier(r.usage.ServiceTier)
	}
	b = append(b, `,"service_tier":`...)
	b = appendString(b, tier)
	b = append(b, r.meta.ResponsesEcho...)
	r.em.buf = append(b, '}')
}
