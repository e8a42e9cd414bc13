package streamconv

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/sse"
)

// responsesDecoder decodes OpenAI Responses stream events (wire-protocols.md §2.3–2.5).
type responsesDecoder struct {
	started bool
	// failed is set once an error has been reported; the terminal response.failed that follows
	// an error event then adds only its usage.
	failed bool
	// tools are the function_call items seen, in order: their position is the neutral tool
	// index.
	tools []respToolState
	// messages are the message items seen (from their output_item.added, or from the first
	// event of one of their parts), in order; parts refers to them by position.
	messages []respMessage
	// parts lists the message parts (output_text or refusal) whose text has been yielded, from
	// their deltas or from a done event, and how much of it: the text of a part that came in
	// no delta is taken from the first done event that carries it (the part's .done,
	// response.content_part.done, response.output_item.done, or the terminal response's
	// output), and a done event whose text is longer than what was yielded, and begins with
	// it, yields the rest.
	parts []respPartState
	// lastPart is the part the latest text delta went to (an index in parts), -1 before any.
	lastPart int
	// hosted counts the calls of hosted tools (web searches, ...) among the items done so far.
	hosted llm.HostedCalls
	ev     respEvent
	// pair joins a character split between two text deltas; each function call has its own
	// for its arguments (respToolState.pair).
	pair surrogatePair
	// refused says whether the answer had a refusal: a completed one stops as a refusal, as a
	// complete answer does (convert).
	refused bool
}

// respMessage is a message item of the answer: its item id and its output_index, either
// unknown ("" and -1) until an event names it. Parts are matched to their item by item_id
// first, since an upstream may leave output_index off some of its events (a delta) and set it
// on others (the done events): matched by output_index alone, such a part's text came once
// from the deltas and again from the done events.
type respMessage struct {
	id          string
	outputIndex int
}

// respPartState is a message part whose text has been yielded: its item (an index in
// messages), its content_index, and the length and FNV-1a hash of the text yielded so far, by
// which a done event's full text is known to extend it.
type respPartState struct {
	message, content int
	yielded          int
	sum              uint64
}

// respToolState is a function_call item: its output_index and item id, the length and hash
// of the arguments yielded so far (argsSeen: any), so that a done event's arguments that
// extend them yield the rest, and the pair that joins a character split between two of its
// arguments deltas (one a call: items are named by item_id and output_index, so two calls'
// deltas may interleave).
type respToolState struct {
	outputIndex int
	itemID      string
	argsSeen    bool
	yielded     int
	sum         uint64
	pair        surrogatePair
}

// optionalIndex is an integer member of an event that may be left out (output_index): set
// says it was there.
type optionalIndex struct {
	n   int
	set bool
}

// UnmarshalJSON implements json.Unmarshaler; a value that is not an integer leaves the index
// unset, as absence does.
func (o *optionalIndex) UnmarshalJSON(b []byte) error {
	var n int
	if json.Unmarshal(b, &n) == nil && string(b) != "null" {
		o.n, o.set = n, true
	}
	return nil
}

type respEvent struct {
	Type        string        `json:"type"`
	Response    *respObject   `json:"response"`
	OutputIndex optionalIndex `json:"output_index"`
	Item        *respItem     `json:"item"`
	ItemID      string        `json:"item_id"`
	// Delta is the delta's JSON token, so that a text delta is read through the surrogate
	// pair on this path as on the fast one (surrogatePair.textOf).
	Delta json.RawMessage `json:"delta"`
	Text  string          `json:"text"`
	// ContentIndex, Refusal and Part are those of a message part's events (refusal.done,
	// content_part.done).
	ContentIndex int             `json:"content_index"`
	Refusal      string          `json:"refusal"`
	Part         *respPart       `json:"part"`
	Arguments    string          `json:"arguments"`
	Code         json.RawMessage `json:"code"`
	Message      string          `json:"message"`
	// Error is the nested form of the error event that OpenAI has been seen sending (§2.5).
	Error *wireError `json:"error"`
}

type respObject struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error  *wireError `json:"error"`
	Output []struct {
		ID      string     `json:"id"`
		Type    string     `json:"type"`
		Content []respPart `json:"content"`
	} `json:"output"`
	Usage *respUsage `json:"usage"`
	// ServiceTier is the tier that served the response; only a terminal event's says so (the
	// earlier ones repeat the tier asked for).
	ServiceTier convert.ServiceTier `json:"service_tier"`
}

type respItem struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Content is a message item's parts.
	Content []respPart `json:"content"`
}

// respPart is a message's content part: output_text (Text) or refusal (Refusal).
type respPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// hostedIn is the hosted-tool calls of a finished response: those among its output items,
// or those counted as the items were done, whichever is more.
func (d *responsesDecoder) hostedIn(r *respObject) llm.HostedCalls {
	calls := d.hosted
	var listed llm.HostedCalls
	for _, item := range r.Output {
		if t, hosted := convert.HostedItemTool(item.Type); hosted {
			listed[t]++
		}
	}
	for i := range calls {
		calls[i] = max(calls[i], listed[i])
	}
	return calls
}

// usage is the neutral usage of a terminal response object, which has a usage.
func (r *respObject) usage() llm.Usage {
	u := r.Usage
	return llm.Usage{
		InputTokens:       u.InputTokens,
		OutputTokens:      u.OutputTokens,
		CachedInputTokens: u.InputTokensDetails.CachedTokens,
		ReasoningTokens:   u.OutputTokensDetails.ReasoningTokens,
		ServiceTier:       string(r.ServiceTier),
	}
}

// Decode implements Decoder.
func (d *responsesDecoder) Decode(ev sse.Event, out []llm.Event) ([]llm.Event, bool, error) {
	if isDone(ev.Data) {
		// Not sent by OpenAI, but the Open Responses spec asks for it (§2.4), after the
		// terminal event, which ends the stream before it is read. Alone it ends nothing: the
		// stream was cut before its response.completed (or .incomplete, or .failed), as one
		// that simply stops is (trial h1: a [DONE] in its place was taken for a complete
		// answer). After an error, it ends the wait for the terminal event.
		return out, d.failed, nil
	}
	if len(ev.Data) == 0 {
		return out, false, nil
	}
	typ := ev.Name
	if typ == "" || typ == "message" {
		var err error
		if typ, err = eventType("Responses", ev.Data); err != nil {
			return out, false, err
		}
	}
	switch typ {
	case "response.created", "response.in_progress", "response.queued",
		"response.output_item.added", "response.output_item.done",
		"response.output_text.delta", "response.output_text.done", "response.refusal.delta",
		"response.refusal.done", "response.content_part.done",
		"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.completed", "response.incomplete", "response.failed", "error":
	default:
		// Reasoning, annotations, content parts added (empty), tool progress and whatever comes
		// next carry nothing the neutral form has.
		return out, false, nil
	}
	if d.started && !d.failed && !disableFastPath &&
		(typ == "response.output_text.delta" || typ == "response.function_call_arguments.delta") {
		if out, ok := d.fastDelta(typ, ev.Data, out); ok {
			return out, false, nil
		}
	}
	d.ev = respEvent{}
	if err := unmarshal("Responses", ev.Data, &d.ev); err != nil {
		return out, false, err
	}
	e := &d.ev
	if d.failed {
		// The error was reported; the terminal event that follows (response.failed, §2.5) adds
		// no error, but its usage is what the upstream bills for the failed response.
		if typ == "response.failed" && e.Response != nil && e.Response.Usage != nil {
			out = append(out, llm.Event{Kind: llm.EventUsage, Usage: e.Response.usage()})
		}
		return out, typ == "response.failed" || typ == "response.completed" || typ == "response.incomplete", nil
	}
	if !d.started && typ != "error" {
		d.started = true
		var id, model string
		if e.Response != nil {
			id, model = e.Response.ID, e.Response.Model
		}
		out = append(out, llm.Event{Kind: llm.EventStart, ID: id, Model: model})
	}
	switch typ {
	case "response.output_item.added":
		if e.Item == nil {
			break
		}
		switch e.Item.Type {
		case "function_call":
			out = d.startTool(e.OutputIndex.n, e.Item, out)
		case "message":
			d.addMessage(e.Item.ID, e.OutputIndex)
		}
	case "response.output_item.done":
		if e.Item == nil {
			break
		}
		if e.Item.Type == "message" {
			m := d.message(e.Item.ID, e.OutputIndex)
			for ci := range e.Item.Content {
				out = d.donePart(m, ci, &e.Item.Content[ci], out)
			}
			break
		}
		if t, hosted := convert.HostedItemTool(e.Item.Type); hosted {
			// Billed per call: counted as it is done, in case the stream ends before its
			// terminal event.
			d.hosted[t]++
			out = append(out, llm.Event{Kind: llm.EventUsage, Usage: llm.Usage{HostedCalls: d.hosted}})
		}
		if e.Item.Type != "function_call" {
			break
		}
		if n := d.tool(e.Item.ID, e.OutputIndex); n < 0 {
			out = d.startTool(e.OutputIndex.n, e.Item, out)
		} else {
			out = d.doneArguments(n, e.Item.Arguments, out)
		}
	case "response.output_text.delta", "response.refusal.delta":
		refusal := typ == "response.refusal.delta"
		var text string
		if refusal {
			d.refused = true
			// A refusal's text is read without the pair: a half held back from the text
			// before becomes U+FFFD, in its place.
			out = d.pair.flush(out)
			text, _ = stringOf(e.Delta)
		} else {
			text = d.pair.textOf(e.Delta)
		}
		if text != "" {
			d.yieldPart(d.part(d.message(e.ItemID, e.OutputIndex), e.ContentIndex), text)
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text, Refusal: refusal})
		}
	case "response.output_text.done":
		out = d.donePart(d.message(e.ItemID, e.OutputIndex), e.ContentIndex, &respPart{Type: "output_text", Text: e.Text}, out)
	case "response.refusal.done":
		d.refused = true
		out = d.donePart(d.message(e.ItemID, e.OutputIndex), e.ContentIndex, &respPart{Type: "refusal", Refusal: e.Refusal}, out)
	case "response.content_part.done":
		if e.Part != nil {
			out = d.donePart(d.message(e.ItemID, e.OutputIndex), e.ContentIndex, e.Part, out)
		}
	case "response.function_call_arguments.delta":
		if n := d.tool(e.ItemID, e.OutputIndex); n >= 0 {
			// The arguments are read through the call's pair, as on the fast path.
			if args := d.tools[n].pair.textOf(e.Delta); args != "" {
				d.yieldArguments(n, args)
				out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: args})
			}
		}
	case "response.function_call_arguments.done":
		if n := d.tool(e.ItemID, e.OutputIndex); n >= 0 {
			out = d.doneArguments(n, e.Arguments, out)
		}
	case "response.completed", "response.incomplete":
		if e.Response != nil {
			// The final output holds the text of the parts no event before carried, and the
			// rest of those whose deltas fell short.
			for oi := range e.Response.Output {
				if it := &e.Response.Output[oi]; it.Type == "message" {
					m := d.message(it.ID, optionalIndex{n: oi, set: true})
					for ci := range it.Content {
						out = d.donePart(m, ci, &it.Content[ci], out)
					}
				}
			}
		}
		out = d.pair.flush(out)
		for i := range d.tools {
			out = d.tools[i].pair.flushArguments(i, out)
		}
		status, reason := "completed", ""
		if typ == "response.incomplete" {
			status = "incomplete"
			if e.Response != nil && e.Response.IncompleteDetails != nil {
				reason = e.Response.IncompleteDetails.Reason
			}
		}
		stop := convert.ResponsesStopReason(status, reason, len(d.tools) > 0 || (e.Response != nil && hasFunctionCall(e.Response)))
		if stop == llm.StopEnd && d.refused {
			stop = llm.StopRefusal
		}
		out = append(out, llm.Event{Kind: llm.EventStop, Stop: stop})
		if e.Response != nil && e.Response.Usage != nil {
			u := e.Response.usage()
			u.HostedCalls = d.hostedIn(e.Response)
			out = append(out, llm.Event{Kind: llm.EventUsage, Usage: u})
		}
		return out, true, nil
	case "response.failed":
		d.failed = true
		if e.Response != nil && e.Response.Usage != nil {
			out = append(out, llm.Event{Kind: llm.EventUsage, Usage: e.Response.usage()})
		}
		se := newStreamError("", "", "")
		if e.Response != nil && e.Response.Error != nil {
			se = e.Response.Error.streamError()
		}
		return append(out, llm.Event{Kind: llm.EventError, Err: se}), true, nil
	case "error":
		d.failed = true
		se := newStreamError("", rawText(e.Code), e.Message)
		if e.Error != nil {
			se = e.Error.streamError()
		}
		return append(out, llm.Event{Kind: llm.EventError, Err: se}), false, nil
	}
	return out, false, nil
}

// startTool records a function_call item and yields its ToolCallStart (and its arguments, for
// an upstream that sends them whole with the item).
func (d *responsesDecoder) startTool(outputIndex int, it *respItem, out []llm.Event) []llm.Event {
	n := len(d.tools)
	d.tools = append(d.tools, respToolState{outputIndex: outputIndex, itemID: it.ID})
	out = append(out, llm.Event{Kind: llm.EventToolCallStart, ToolIndex: n, ToolCallID: it.CallID, ToolName: it.Name})
	if it.Arguments != "" {
		d.yieldArguments(n, it.Arguments)
		out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: it.Arguments})
	}
	return out
}

// tool finds a function_call item by its item id, or else by its output index, or else, for
// an event that gives neither, the latest one; -1 if unknown.
func (d *responsesDecoder) tool(itemID string, index optionalIndex) int {
	if itemID != "" {
		for i := range d.tools {
			if d.tools[i].itemID == itemID {
				return i
			}
		}
	}
	return d.toolByIndex(itemID != "", index)
}

// toolByIndex is tool's search by output index, for an event whose item id, if it has one
// (named), matched no item.
func (d *responsesDecoder) toolByIndex(named bool, index optionalIndex) int {
	if !index.set {
		if named {
			return -1
		}
		return len(d.tools) - 1
	}
	for i := range d.tools {
		if d.tools[i].outputIndex == index.n {
			return i
		}
	}
	return -1
}

// yieldArguments records that arguments were yielded for tool n.
func (d *responsesDecoder) yieldArguments(n int, args string) {
	t := &d.tools[n]
	t.argsSeen = true
	t.yielded += len(args)
	t.sum = fnv1a(t.sum, args)
}

// doneArguments yields what a done event's complete arguments of tool n add to those yielded
// before: all of them when none came, the rest when they extend what came, nothing else. A
// character held back from the call's last delta (its pair) is given up when the rest carries
// it whole, and yielded as U+FFFD otherwise: no delta of the call follows its done event.
func (d *responsesDecoder) doneArguments(n int, args string, out []llm.Event) []llm.Event {
	t := &d.tools[n]
	rest, ok := extension(t.argsSeen, t.yielded, t.sum, args)
	if !ok {
		return t.pair.flushArguments(n, out)
	}
	t.pair.high = 0
	d.yieldArguments(n, rest)
	return append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: rest})
}

// addMessage records the message item that an output_item.added announces, and returns its
// position in messages; an item already known by its id is not added again.
func (d *responsesDecoder) addMessage(itemID string, index optionalIndex) int {
	if itemID != "" {
		for i := range d.messages {
			if d.messages[i].id == itemID {
				return i
			}
		}
	}
	m := respMessage{id: itemID, outputIndex: -1}
	if index.set {
		m.outputIndex = index.n
	}
	d.messages = append(d.messages, m)
	return len(d.messages) - 1
}

// message finds the message item that an event of one of its parts names, and returns its
// position in messages: by item_id; else by output_index (an item known by another id is
// another item); else the latest item, when nothing the event says contradicts it (an event
// that names neither belongs to the item being streamed); else a new item. What the event
// tells of an item that was unknown is recorded.
func (d *responsesDecoder) message(itemID string, index optionalIndex) int {
	if itemID != "" {
		for i := range d.messages {
			if d.messages[i].id == itemID {
				if d.messages[i].outputIndex < 0 && index.set {
					d.messages[i].outputIndex = index.n
				}
				return i
			}
		}
	}
	if index.set {
		for i := range d.messages {
			if m := &d.messages[i]; m.outputIndex == index.n && (m.id == "" || itemID == "") {
				if m.id == "" {
					m.id = itemID
				}
				return i
			}
		}
	}
	if n := len(d.messages) - 1; n >= 0 {
		m := &d.messages[n]
		if (m.id == "" || itemID == "") && (m.outputIndex < 0 || !index.set) {
			if m.id == "" {
				m.id = itemID
			}
			if m.outputIndex < 0 && index.set {
				m.outputIndex = index.n
			}
			return n
		}
	}
	return d.addMessage(itemID, index)
}

// part returns the position in parts of part contentIndex of message m, adding it (with
// nothing yielded) if it is new. The latest part is looked at first: it is the one the deltas
// of a stream go on adding to.
func (d *responsesDecoder) part(m, contentIndex int) int {
	for i := len(d.parts) - 1; i >= 0; i-- {
		if d.parts[i].message == m && d.parts[i].content == contentIndex {
			return i
		}
	}
	d.parts = append(d.parts, respPartState{message: m, content: contentIndex})
	return len(d.parts) - 1
}

// yieldPart records that text of part p was yielded.
func (d *responsesDecoder) yieldPart(p int, text string) {
	st := &d.parts[p]
	st.yielded += len(text)
	st.sum = fnv1a(st.sum, text)
	d.lastPart = p
}

// donePart yields what the full text of a done event's part adds to what was yielded of that
// part (contentIndex of message m): all of it when none came, the rest when the deltas gave a
// beginning of it (the done text wins where it extends the deltas: their text was cut short),
// and nothing when it is what came or differs from it (what the client has stays as it
// came). A refusal part's text is the refusal's; a part without text yields nothing. A
// character held back from the last delta (surrogatePair) is given up when the done text of
// its part carries the rest, which has the whole character, and yielded as U+FFFD otherwise.
func (d *responsesDecoder) donePart(m, contentIndex int, p *respPart, out []llm.Event) []llm.Event {
	text, refusal := p.Text, p.Type == "refusal"
	if refusal {
		text = p.Refusal
		d.refused = true
	} else if p.Type != "output_text" {
		return out
	}
	n := d.part(m, contentIndex)
	st := &d.parts[n]
	rest, ok := extension(st.yielded > 0, st.yielded, st.sum, text)
	if d.pair.high != 0 && (!ok || n != d.lastPart) {
		out = d.pair.flush(out)
	}
	if !ok {
		return out
	}
	d.pair.high = 0
	d.yieldPart(n, rest)
	return append(out, llm.Event{Kind: llm.EventTextDelta, Text: rest, Refusal: refusal})
}

// extension is what full, a done event's complete text (or arguments), adds to what was
// yielded before (seen: any; yielded bytes with FNV-1a hash sum): full when nothing was, the
// rest of full when it begins with what was, and ok false when it adds nothing.
func extension(seen bool, yielded int, sum uint64, full string) (rest string, ok bool) {
	if !seen || yielded == 0 {
		return full, full != ""
	}
	if len(full) <= yielded || fnv1a(0, full[:yielded]) != sum {
		return "", false
	}
	return full[yielded:], true
}

// fnv1a continues the 64-bit FNV-1a hash sum (0: none yet) over s.
func fnv1a(sum uint64, s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	if sum == 0 {
		sum = offset
	}
	for i := 0; i < len(s); i++ {
		sum ^= uint64(s[i])
		sum *= prime
	}
	return sum
}

func hasFunctionCall(r *respObject) bool {
	for _, it := range r.Output {
		if it.Type == "function_call" {
			return true
		}
	}
	return false
}

// fastDelta decodes the common text and arguments delta events, with a string delta and an
// integer output_index (or none), without encoding/json; ok is false for anything else.
func (d *responsesDecoder) fastDelta(typ string, data []byte, out []llm.Event) ([]llm.Event, bool) {
	var delta, itemID, indexTok, content []byte
	it := iterObject(data)
	for {
		k, v, more := it.next()
		if !more {
			break
		}
		var dst *[]byte
		switch string(k) {
		case "delta":
			dst = &delta
		case "item_id":
			dst = &itemID
		case "output_index":
			dst = &indexTok
		case "content_index":
			dst = &content
		default:
			// Fields of respEvent this event does not carry would still be decoded by the
			// encoding/json path; none of them changes what a delta yields except these.
			if foldable(k) {
				return out, false
			}
			continue
		}
		if *dst != nil {
			return out, false
		}
		*dst = v
	}
	if !it.ok() || delta == nil {
		return out, false
	}
	var (
		index optionalIndex
		ok    bool
	)
	if indexTok != nil {
		if index.n, ok = intOf(indexTok); !ok {
			return out, false
		}
		index.set = true
	}
	contentIndex := 0
	if content != nil {
		if contentIndex, ok = intOf(content); !ok {
			return out, false
		}
	}
	if itemID != nil {
		// An unescaped item_id is compared in place.
		if len(itemID) < 2 || itemID[0] != '"' || bytes.IndexByte(itemID, '\\') >= 0 {
			return out, false
		}
		itemID = itemID[1 : len(itemID)-1]
	}
	if typ == "response.output_text.delta" {
		text, ok := d.pair.text(delta)
		if !ok {
			return out, false
		}
		if text != "" {
			d.yieldPart(d.part(d.messageByID(itemID, index), contentIndex), text)
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
		}
		return out, true
	}
	// Arguments are read through their call's pair; those of no known call are only checked,
	// as encoding/json would.
	n := d.toolByID(itemID, index)
	if n < 0 {
		_, ok = stringOf(delta)
		return out, ok
	}
	args, ok := d.tools[n].pair.text(delta)
	if !ok {
		return out, false
	}
	if args != "" {
		d.yieldArguments(n, args)
		out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: args})
	}
	return out, true
}

// toolByID is tool for an item id given as the bytes of an unescaped JSON string.
func (d *responsesDecoder) toolByID(itemID []byte, index optionalIndex) int {
	if len(itemID) > 0 {
		for i := range d.tools {
			if d.tools[i].itemID == string(itemID) {
				return i
			}
		}
	}
	return d.toolByIndex(len(itemID) > 0, index)
}

// messageByID is message for an item id given as the bytes of an unescaped JSON string: an
// item known by it is found without copying it.
func (d *responsesDecoder) messageByID(itemID []byte, index optionalIndex) int {
	if len(itemID) > 0 {
		for i := len(d.messages) - 1; i >= 0; i-- {
			if m := &d.messages[i]; m.id == string(itemID) {
				if m.outputIndex < 0 && index.set {
					m.outputIndex = index.n
				}
				return i
			}
		}
	}
	return d.message(string(itemID), index)
}
