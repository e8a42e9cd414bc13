package streamconv

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// responsesEncoder writes OpenAI Responses stream events (wire-protocols.md §2.2–2.5): every
// event named by its type and numbered from 0; created and in_progress first; each message item
// as output_item.added, content_part.added, output_text.delta…, output_text.done,
// content_part.done, output_item.done; a refusal as a part of the message, of type refusal
// with refusal.delta… and refusal.done, after its text (content_index 1) when the model wrote
// some first, as the Responses API's message holds an output_text part and a refusal part
// (openai-go v3.96.0 ResponseOutputMessage.Content; openai-agents-python's
// chatcmpl_stream_handler gives a chat answer's content and refusal one message item, the
// parts numbered in the order they began); each function call as output_item.added,
// function_call_arguments.delta…, function_call_arguments.done, output_item.done; then the
// terminal response.completed or response.incomplete carrying every output item and the usage.
// A function call is done when the next item begins if its arguments are whole by then (each
// of OpenAI's parallel calls is), else when they become whole or the answer ends, its deltas
// meanwhile interleaved with the next items' (an upstream that interleaves parallel calls;
// setAsideOpen). A failure is the flat error event, then response.failed. There is no [DONE].
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
	// waiting counts the function calls set aside in progress when a later item began, their
	// arguments not yet whole (an upstream that interleaves parallel calls): each is closed
	// when its arguments become whole, or at the end (setAsideOpen).
	waiting int
	// relayedItems, set by a Relay in the encoder's place, appends the relayed stream's items
	// to a failure's response (listRelayedItems).
	relayedItems func(dst []byte) []byte
	// tools maps a neutral tool index to its position in items.
	tools     []int
	stop      llm.StopReason
	usage     llm.Usage
	usageSeen bool
	// chars counts the characters of the answer's text so far (not its refusal's), which a
	// citation's range counts in.
	chars int
}

// respOut is one output item as far as it has been streamed.
type respOut struct {
	fc     bool
	id     string
	callID string
	name   string
	// text is a function call's arguments, or the text of a message's output_text part,
	// JSON-escaped (without quotes), so that the done events and the final response can
	// repeat it without escaping it again; refusal is the text of a message's refusal part,
	// likewise.
	text, refusal []byte
	// textIndex and refusalIndex are the content_index of a message's output_text and
	// refusal parts, -1 for a part it does not have; a part is added when its first delta
	// comes.
	textIndex, refusalIndex int
	status                  string
	// args follows a function call's arguments, to tell when they are whole.
	args argumentsShape
	// textAt is the answer's character count when a message's output_text part began, and
	// citations the part's url_citation annotations, their ranges counted from it.
	textAt    int
	citations []llm.Citation
}

// parts is how many content parts a message item has.
func (it *respOut) parts() int {
	n := 0
	if it.textIndex >= 0 {
		n++
	}
	if it.refusalIndex >= 0 {
		n++
	}
	return n
}

// part is the content_index of a message's output_text part, or of its refusal part when
// refusal is set (-1 when it has none), and the part's escaped text.
func (it *respOut) part(refusal bool) (int, *[]byte) {
	if refusal {
		return it.refusalIndex, &it.refusal
	}
	return it.textIndex, &it.text
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
		if r.open < 0 || r.items[r.open].fc {
			r.openMessage()
		}
		it := &r.items[r.open]
		ci, text := it.part(ev.Refusal)
		if ci < 0 {
			ci = r.addPart(ev.Refusal)
		}
		if !ev.Refusal {
			r.chars += utf8.RuneCountInString(ev.Text)
		}
		n := len(*text)
		*text = appendEscaped(*text, ev.Text)
		kind := partKindOf(ev.Refusal)
		s := r.begin(kind.delta)
		r.appendItemRef(r.open)
		r.appendContentIndex(ci)
		r.em.buf = append(r.em.buf, `,"delta":"`...)
		r.em.buf = append(r.em.buf, (*text)[n:]...)
		r.em.buf = append(r.em.buf, kind.tail...)
		r.end(s)
	case llm.EventCitation:
		r.cite(ev.Citation)
	case llm.EventToolCallStart:
		if r.stop != "" {
			break
		}
		r.start("", "")
		r.setAsideOpen()
		callID := ev.ToolCallID
		if callID == "" {
			callID = derivedID("call_", r.id, ev.ToolIndex)
		}
		r.open = len(r.items)
		r.items = append(r.items, respOut{fc: true, id: "fc_" + r.idBase() + "_" + strconv.Itoa(ev.ToolIndex), callID: callID, name: ev.ToolName,
			textIndex: -1, refusalIndex: -1, status: "in_progress"})
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
		// The delta goes to its call's item, the open one or one set aside in progress (an
		// upstream that interleaves calls): the events name the item by item_id and
		// output_index. A call set aside is closed once its arguments are whole. A delta for
		// a call whose item was already closed (arguments that looked whole and went on) is
		// still sent and kept: the arguments stay whole in the final response.
		i := r.tools[ev.ToolIndex]
		it := &r.items[i]
		it.args.feed(ev.Arguments)
		n := len(it.text)
		it.text = appendEscaped(it.text, ev.Arguments)
		s := r.begin("response.function_call_arguments.delta")
		r.appendItemRef(i)
		r.em.buf = append(r.em.buf, `,"delta":"`...)
		r.em.buf = append(r.em.buf, it.text[n:]...)
		r.em.buf = append(r.em.buf, '"')
		r.end(s)
		if r.waiting > 0 && i != r.open && it.status == "in_progress" && it.args.whole() {
			r.waiting--
			r.closeItem(i, "completed")
		}
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

// Finish implements Encoder: it closes the items still in progress (the open one, and calls
// set aside whose arguments were not whole) in output_index order and sends
// response.completed, or response.incomplete when the output bound cut the answer or it was
// filtered.
func (r *responsesEncoder) Finish(out []sse.Event) []sse.Event {
	if r.ended {
		return out
	}
	r.ended = true
	r.em.reset()
	r.start("", "")
	stop := effectiveStop(r.stop, len(r.tools) > 0)
	status, reason := convert.StopReasonFor(llm.FormatResponses, stop), convert.ResponsesIncompleteReason(stop)
	if r.waiting > 0 {
		r.open, r.waiting = -1, 0
		for i := range r.items {
			if r.items[i].status == "in_progress" {
				r.closeItem(i, status)
			}
		}
	}
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
// the events before them. The items in progress are left as they are; the failed response
// lists them as incomplete.
func (r *responsesEncoder) Fail(errType, message string, out []sse.Event) []sse.Event {
	if r.ended {
		return out
	}
	r.ended = true
	r.em.reset()
	// The SDK stream helpers require response.created first, even before an error.
	r.start("", "")
	for i := range r.items {
		if r.items[i].status == "in_progress" {
			r.items[i].status = "incomplete"
		}
	}
	r.open, r.waiting = -1, 0
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

// openMessage closes (or sets aside) the open item and opens a message item, without parts:
// the first delta of each part adds it (addPart).
func (r *responsesEncoder) openMessage() {
	r.setAsideOpen()
	r.open = len(r.items)
	id := "msg_" + r.idBase()
	for _, it := range r.items {
		if !it.fc {
			// Not the first message item: the first has the id a complete answer has.
			id += "_" + strconv.Itoa(r.open)
			break
		}
	}
	r.items = append(r.items, respOut{id: id, textIndex: -1, refusalIndex: -1, status: "in_progress"})
	s := r.begin("response.output_item.added")
	r.em.buf = append(r.em.buf, `,"output_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(r.open))
	r.em.buf = append(r.em.buf, `,"item":`...)
	r.appendItem(r.open)
	r.end(s)
}

// addPart adds an output_text part, or a refusal part when refusal is set, to the open
// message, after the part it has, and returns its content_index.
func (r *responsesEncoder) addPart(refusal bool) int {
	it := &r.items[r.open]
	ci := it.parts()
	if refusal {
		it.refusalIndex = ci
	} else {
		it.textIndex, it.textAt = ci, r.chars
	}
	s := r.begin("response.content_part.added")
	r.appendItemRef(r.open)
	r.appendContentIndex(ci)
	r.em.buf = append(r.em.buf, `,"part":`...)
	r.appendPart(nil, refusal, nil)
	r.end(s)
	return ci
}

// appendContentIndex appends the content_index of a part.
func (r *responsesEncoder) appendContentIndex(ci int) {
	r.em.buf = append(r.em.buf, `,"content_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(ci))
}

// messageParts lists the kinds of a message's parts in content_index order: false for its
// output_text part, true for its refusal part.
func (it *respOut) messageParts() []bool {
	switch {
	case it.textIndex == 0 && it.refusalIndex == 1:
		return orderTextRefusal
	case it.refusalIndex == 0 && it.textIndex == 1:
		return orderRefusalText
	case it.refusalIndex == 0:
		return orderRefusal
	case it.textIndex == 0:
		return orderText
	}
	return nil
}

var (
	orderText        = []bool{false}
	orderRefusal     = []bool{true}
	orderTextRefusal = []bool{false, true}
	orderRefusalText = []bool{true, false}
)

// setAsideOpen ends the open item before another begins: it closes it, except a function
// call whose arguments are not whole yet, which stays in progress, its deltas still sent to
// it by item_id and output_index, until they are whole or the answer ends. OpenAI's chat
// upstream sends parallel calls one after the other, each whole when the next begins: closed
// here, as they always were; an upstream that interleaves them (fragments of call 0 after
// call 1 began) has call 0 closed only when its arguments are, so that a client that acts
// on output_item.done (Codex runs the tool) gets them whole.
func (r *responsesEncoder) setAsideOpen() {
	if r.open >= 0 && r.items[r.open].fc && !r.items[r.open].args.whole() {
		r.open = -1
		r.waiting++
		return
	}
	r.closeOpen("completed")
}

// closeOpen sends the done events of the open item, which ends with the given status.
func (r *responsesEncoder) closeOpen(status string) {
	if r.open < 0 {
		return
	}
	i := r.open
	r.open = -1
	r.closeItem(i, status)
}

// closeItem sends the done events of item i, which ends with the given status.
func (r *responsesEncoder) closeItem(i int, status string) {
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
		for ci, refusal := range it.messageParts() {
			_, text := it.part(refusal)
			kind := partKindOf(refusal)
			s := r.begin(kind.done)
			r.appendItemRef(i)
			r.appendContentIndex(ci)
			r.em.buf = append(r.em.buf, kind.doneField...)
			r.em.buf = append(r.em.buf, *text...)
			r.em.buf = append(r.em.buf, kind.tail...)
			r.end(s)
			s = r.begin("response.content_part.done")
			r.appendItemRef(i)
			r.appendContentIndex(ci)
			r.em.buf = append(r.em.buf, `,"part":`...)
			r.appendPart(*text, refusal, it.citations)
			r.end(s)
		}
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

// partKind is how a message's part streams: its delta and done events, the done event's
// field, and what follows the text in both.
type partKind struct {
	delta, done, doneField, tail string
}

var (
	outputTextPart = partKind{delta: "response.output_text.delta", done: "response.output_text.done",
		doneField: `,"text":"`, tail: `","logprobs":[]`}
	refusalPart = partKind{delta: "response.refusal.delta", done: "response.refusal.done",
		doneField: `,"refusal":"`, tail: `"`}
)

// partKindOf is the part kind of a message: its refusal, or its output_text.
func partKindOf(refusal bool) *partKind {
	if refusal {
		return &refusalPart
	}
	return &outputTextPart
}

// appendPart appends an output_text part with the given escaped text and citations (its
// url_citation annotations), or a refusal part when refusal is set.
func (r *responsesEncoder) appendPart(text []byte, refusal bool, citations []llm.Citation) {
	if refusal {
		r.em.buf = append(r.em.buf, `{"type":"refusal","refusal":"`...)
		r.em.buf = append(r.em.buf, text...)
		r.em.buf = append(r.em.buf, `"}`...)
		return
	}
	r.em.buf = append(r.em.buf, `{"type":"output_text","text":"`...)
	r.em.buf = append(r.em.buf, text...)
	r.em.buf = append(r.em.buf, `","annotations":[`...)
	for i, c := range citations {
		if i > 0 {
			r.em.buf = append(r.em.buf, ',')
		}
		r.appendAnnotation(c)
	}
	r.em.buf = append(r.em.buf, `],"logprobs":[]}`...)
}

// appendAnnotation appends c as a url_citation annotation
// (https://platform.openai.com/docs/api-reference/responses/object, output_text.annotations).
func (r *responsesEncoder) appendAnnotation(c llm.Citation) {
	r.em.buf = append(r.em.buf, `{"type":"url_citation","end_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(c.End))
	r.em.buf = append(r.em.buf, `,"start_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(c.Start))
	r.em.buf = append(r.em.buf, `,"title":`...)
	r.em.buf = appendString(r.em.buf, c.Title)
	r.em.buf = append(r.em.buf, `,"url":`...)
	r.em.buf = appendString(r.em.buf, c.URL)
	r.em.buf = append(r.em.buf, '}')
}

// cite adds c, a citation of the text so far, to the output_text part of the message being
// streamed, as response.output_text.annotation.added does: its range counted from the part's
// start. A citation with no such part open (its text in an earlier item) has nowhere to go.
func (r *responsesEncoder) cite(c *llm.Citation) {
	if c == nil || r.open < 0 || r.items[r.open].fc || r.items[r.open].textIndex < 0 {
		return
	}
	it := &r.items[r.open]
	a := llm.Citation{URL: c.URL, Title: c.Title, Start: max(c.Start-it.textAt, 0), End: max(c.End-it.textAt, 0)}
	it.citations = append(it.citations, a)
	s := r.begin("response.output_text.annotation.added")
	r.appendItemRef(r.open)
	r.appendContentIndex(it.textIndex)
	r.em.buf = append(r.em.buf, `,"annotation_index":`...)
	r.em.buf = appendInt(r.em.buf, int64(len(it.citations)-1))
	r.em.buf = append(r.em.buf, `,"annotation":`...)
	r.appendAnnotation(a)
	r.end(s)
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
		for ci, refusal := range it.messageParts() {
			if ci > 0 {
				r.em.buf = append(r.em.buf, ',')
			}
			_, text := it.part(refusal)
			r.appendPart(*text, refusal, it.citations)
		}
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
