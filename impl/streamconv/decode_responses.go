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
	// partsSeen lists the message parts (output_text or refusal) whose text has been yielded,
	// from their deltas or from a done event, so that the text of a part that came in no
	// delta is taken from the first done event that carries it (the part's .done,
	// response.content_part.done, response.output_item.done, or the terminal response's
	// output), exactly once.
	partsSeen []partRef
	// hosted counts the calls of hosted tools (web searches, ...) among the items done so far.
	hosted llm.HostedCalls
	ev     respEvent
	// pair joins a character split between two text deltas.
	pair surrogatePair
	// refused says whether the answer had a refusal: a completed one stops as a refusal, as a
	// complete answer does (convert).
	refused bool
}

// partRef is a message part: its item's output_index and its content_index.
type partRef struct{ outputIndex, contentIndex int }

type respToolState struct {
	outputIndex int
	itemID      string
	argsSeen    bool
}

type respEvent struct {
	Type        string      `json:"type"`
	Response    *respObject `json:"response"`
	OutputIndex int         `json:"output_index"`
	Item        *respItem   `json:"item"`
	ItemID      string      `json:"item_id"`
	Delta       string      `json:"delta"`
	Text        string      `json:"text"`
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
		if e.Item != nil && e.Item.Type == "function_call" {
			out = d.startTool(e.OutputIndex, e.Item, out)
		}
	case "response.output_item.done":
		if e.Item == nil {
			break
		}
		if e.Item.Type == "message" {
			out = d.pair.flush(out)
			for ci := range e.Item.Content {
				out = d.unseenPart(e.OutputIndex, ci, &e.Item.Content[ci], out)
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
		n := d.tool(e.OutputIndex, e.Item.ID)
		if n < 0 {
			out = d.startTool(e.OutputIndex, e.Item, out)
		} else if !d.tools[n].argsSeen && e.Item.Arguments != "" {
			d.tools[n].argsSeen = true
			out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: e.Item.Arguments})
		}
	case "response.output_text.delta":
		if e.Delta != "" {
			d.markPart(e.OutputIndex, e.ContentIndex)
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: e.Delta})
		}
	case "response.refusal.delta":
		d.refused = true
		if e.Delta != "" {
			d.markPart(e.OutputIndex, e.ContentIndex)
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: e.Delta, Refusal: true})
		}
	case "response.output_text.done":
		out = d.pair.flush(out)
		out = d.unseenPart(e.OutputIndex, e.ContentIndex, &respPart{Type: "output_text", Text: e.Text}, out)
	case "response.refusal.done":
		d.refused = true
		out = d.unseenPart(e.OutputIndex, e.ContentIndex, &respPart{Type: "refusal", Refusal: e.Refusal}, out)
	case "response.content_part.done":
		if e.Part != nil {
			out = d.pair.flush(out)
			out = d.unseenPart(e.OutputIndex, e.ContentIndex, e.Part, out)
		}
	case "response.function_call_arguments.delta":
		if n := d.tool(e.OutputIndex, e.ItemID); n >= 0 && e.Delta != "" {
			d.tools[n].argsSeen = true
			out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: e.Delta})
		}
	case "response.function_call_arguments.done":
		if n := d.tool(e.OutputIndex, e.ItemID); n >= 0 && !d.tools[n].argsSeen && e.Arguments != "" {
			d.tools[n].argsSeen = true
			out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: e.Arguments})
		}
	case "response.completed", "response.incomplete":
		out = d.pair.flush(out)
		if e.Response != nil {
			// The final output holds the text of the parts no event before carried.
			for oi := range e.Response.Output {
				if it := &e.Response.Output[oi]; it.Type == "message" {
					for ci := range it.Content {
						out = d.unseenPart(oi, ci, &it.Content[ci], out)
					}
				}
			}
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
		d.tools[n].argsSeen = true
		out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: it.Arguments})
	}
	return out
}

// tool finds a function_call item by its item id, or else by its output index; -1 if unknown.
func (d *responsesDecoder) tool(outputIndex int, itemID string) int {
	if itemID != "" {
		for i := range d.tools {
			if d.tools[i].itemID == itemID {
				return i
			}
		}
	}
	for i := range d.tools {
		if d.tools[i].outputIndex == outputIndex {
			return i
		}
	}
	return -1
}

// markPart records that the text of a message part has been yielded (in part at least: a part
// whose deltas came is taken as they gave it).
func (d *responsesDecoder) markPart(outputIndex, contentIndex int) {
	if !d.partSeen(outputIndex, contentIndex) {
		d.partsSeen = append(d.partsSeen, partRef{outputIndex, contentIndex})
	}
}

// partSeen reports whether the text of a message part has been yielded. The latest part is
// looked at first: it is the one the deltas of a stream go on adding to.
func (d *responsesDecoder) partSeen(outputIndex, contentIndex int) bool {
	for i := len(d.partsSeen) - 1; i >= 0; i-- {
		if d.partsSeen[i] == (partRef{outputIndex, contentIndex}) {
			return true
		}
	}
	return false
}

// unseenPart yields the text of message part p, at output_index outputIndex and content_index
// contentIndex, unless the text of that part was yielded before (from its deltas or an earlier
// done event); a refusal part's text is the refusal's. A part without text yields nothing.
func (d *responsesDecoder) unseenPart(outputIndex, contentIndex int, p *respPart, out []llm.Event) []llm.Event {
	text, refusal := p.Text, p.Type == "refusal"
	if refusal {
		text = p.Refusal
		d.refused = true
	} else if p.Type != "output_text" {
		return out
	}
	if text == "" || d.partSeen(outputIndex, contentIndex) {
		return out
	}
	d.markPart(outputIndex, contentIndex)
	return append(out, llm.Event{Kind: llm.EventTextDelta, Text: text, Refusal: refusal})
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
// integer output_index, without encoding/json; ok is false for anything else.
func (d *responsesDecoder) fastDelta(typ string, data []byte, out []llm.Event) ([]llm.Event, bool) {
	var delta, itemID, index, content []byte
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
			dst = &index
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
		text string
		ok   bool
	)
	if typ == "response.output_text.delta" {
		text, ok = d.pair.text(delta)
	} else {
		text, ok = stringOf(delta)
	}
	if !ok {
		return out, false
	}
	outputIndex := 0
	if index != nil {
		if outputIndex, ok = intOf(index); !ok {
			return out, false
		}
	}
	contentIndex := 0
	if content != nil {
		if contentIndex, ok = intOf(content); !ok {
			return out, false
		}
	}
	if itemID != nil {
		// item_id only selects a tool; an unescaped one is compared in place.
		if len(itemID) < 2 || itemID[0] != '"' || bytes.IndexByte(itemID, '\\') >= 0 {
			return out, false
		}
	}
	if typ == "response.output_text.delta" {
		if text != "" {
			d.markPart(outputIndex, contentIndex)
			out = append(out, llm.Event{Kind: llm.EventTextDelta, Text: text})
		}
		return out, true
	}
	var n int
	if itemID != nil {
		n = d.toolByID(itemID[1:len(itemID)-1], outputIndex)
	} else {
		n = d.tool(outputIndex, "")
	}
	if n >= 0 && text != "" {
		d.tools[n].argsSeen = true
		out = append(out, llm.Event{Kind: llm.EventToolCallDelta, ToolIndex: n, Arguments: text})
	}
	return out, true
}

// toolByID is tool for an item id given as unquoted JSON bytes.
func (d *responsesDecoder) toolByID(itemID []byte, outputIndex int) int {
	if len(itemID) > 0 {
		for i := range d.tools {
			if d.tools[i].itemID == string(itemID) {
				return i
			}
		}
	}
	for i := range d.tools {
		if d.tools[i].outputIndex == outputIndex {
			return i
		}
	}
	return -1
}
