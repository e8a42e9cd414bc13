package convert

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// A conversation's tool history, as the Messages API takes it. The API refuses two shapes that
// the OpenAI formats accept and that their clients send:
//
//   - tool calls or results in the messages of a request that defines no tools ("Requests
//     which include `tool_use` or `tool_result` blocks must define tools."): opencode's
//     compaction turn sends the whole history without tools, to have it summarised;
//   - a tool call without its result at the start of the next turn ("`tool_use` ids were found
//     without `tool_result` blocks immediately after"), or a result whose call is not in the
//     turn before ("unexpected `tool_use_id` found in `tool_result` blocks"): a call the user
//     cancelled, results sent after other messages or out of order.
//
// A translated request is made valid, keeping what the conversation says: the tools its calls
// name are declared (historyTools; with tool_choice none when the client offered none), a call
// without its result is given an error result saying so, a result elsewhere is moved after its
// call when that is unambiguous, and any other result becomes text (pairToolResults). A
// Messages client's own request goes as sent.

// historyToolDescription and historyToolSchema declare a tool the history calls and the
// request does not offer: any arguments, and a description that tells the model it is not to
// be called.
const historyToolDescription = "Not available in this request: declared only because earlier turns of the conversation call it."

var historyToolSchema = json.RawMessage(`{"type":"object","additionalProperties":true}`)

// missingResultText is the content of the error result added for a call the client sent no
// result for.
const missingResultText = "No result: the client sent none for this tool call (it may have been cancelled)."

// historyTools returns the names of the tools the conversation's calls name and the request
// does not offer, in the order they are first called, for the Messages API, which refuses a
// call (tool_use) of a request without tools. Their names are ones the API takes: a translated
// request naming another was refused (checkToolNames).
func (w *writer) historyTools() []string {
	if !w.cross() {
		return nil
	}
	var names []string
	seen := make(map[string]bool, len(w.req.Tools))
	for _, t := range w.req.Tools {
		seen[t.Name] = true
	}
	for _, m := range w.req.Messages {
		for _, c := range m.ToolCalls {
			if !seen[c.Name] {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// Tool call ids repeated in a history. Every API takes a call id once per request: Anthropic
// answers "messages.N.content.M: `tool_use` ids must be unique" (anthropics/claude-code#20901,
// #28515, BerriAI/litellm#23510), also when the repeat is in a later turn (opencode#1150,
// NVIDIA-NeMo/Switchyard#502); OpenAI's chat completions answer a repeated result "Invalid
// parameter: Duplicate value for 'tool_call_id' of 'call_…' in messages[7] and messages[8]."
// (agno-agi/agno#5116), and its Responses API a repeated call_id (earendil-works/pi#9057). They
// come from upstreams whose ids restart every turn (kimi's "list_dir:0", grok's "call_0") and
// from clients that replay such a history every turn, so a 400 would break every later turn of
// the conversation: a translated request gives the later call a fresh id instead, and its
// result with it (freshCallIDs). A client of the upstream's own format gets its request sent
// as it is.

// freshIDs are the ids given to the calls whose id an earlier call has, by their place (message
// and call index), and to their results, by message index.
type freshIDs struct {
	calls   map[blockLoc]string
	results map[int]string
}

// callID is the id the j-th call of message i is sent with.
func (w *writer) callID(i, j int, id string) string {
	if w.fresh != nil {
		if f, ok := w.fresh.calls[blockLoc{i, j}]; ok {
			return f
		}
	}
	return id
}

// resultID is the id the tool result of message i is sent with.
func (w *writer) resultID(i int, id string) string {
	if w.fresh != nil {
		if f, ok := w.fresh.results[i]; ok {
			return f
		}
	}
	return id
}

// freshCallIDs gives each call of the history whose id an earlier call has the id with "_2" (or
// the next number that no id of the request has) appended, and the result that answers it
// (the first result with that id after the calls answered before it) the same, so that the
// history's calls and results pair as they did, in order. Each call given an id is named,
// "<call path> (repeated tool call id: a fresh one given)". A request whose calls all have ids
// of their own pays a hash of each id (a map past repeatScanLimit calls: repeatedCallID).
func (w *writer) freshCallIDs() {
	if !repeatedCallID(w.req.Messages) {
		return
	}
	used := map[string]bool{}
	for _, m := range w.req.Messages {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
		if m.Role == llm.RoleTool {
			used[m.ToolCallID] = true
		}
	}
	f := &freshIDs{calls: map[blockLoc]string{}, results: map[int]string{}}
	seen := map[string]bool{}
	// pending are, by the client's id, the ids of its calls not answered yet, in order.
	pending := map[string][]string{}
	for i, m := range w.req.Messages {
		switch m.Role {
		case llm.RoleAssistant:
			for j, c := range m.ToolCalls {
				id := c.ID
				if seen[c.ID] {
					for n := 2; used[id]; n++ {
						id = c.ID + "_" + strconv.Itoa(n)
					}
					used[id] = true
					f.calls[blockLoc{i, j}] = id
					w.drop(pathName(c.Path, "", "messages[].tool_calls[]") + " (repeated tool call id: a fresh one given)")
				}
				seen[c.ID] = true
				pending[c.ID] = append(pending[c.ID], id)
			}
		case llm.RoleTool:
			if q := pending[m.ToolCallID]; len(q) > 0 {
				if q[0] != m.ToolCallID {
					f.results[i] = q[0]
				}
				pending[m.ToolCallID] = q[1:]
			}
		}
	}
	w.fresh = f
}

// repeatScanLimit is the number of calls up to which repeatedCallID looks for a repeated id
// without allocating; a longer history is scanned with a map.
const repeatScanLimit = 64

// repeatedCallID reports whether two calls of msgs have the same id. Up to repeatScanLimit
// calls, each id sets a bit of a 512-bit set by its hash, and only an id whose bit is set
// already is compared with the ids before it.
func repeatedCallID(msgs []llm.Message) bool {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	if n < 2 {
		return false
	}
	if n > repeatScanLimit {
		seen := make(map[string]bool, n)
		for _, m := range msgs {
			for _, c := range m.ToolCalls {
				if seen[c.ID] {
					return true
				}
				seen[c.ID] = true
			}
		}
		return false
	}
	var bits [8]uint64
	for i, m := range msgs {
		for j, c := range m.ToolCalls {
			h := uint32(2166136261) // FNV-1a
			for k := 0; k < len(c.ID); k++ {
				h = (h ^ uint32(c.ID[k])) * 16777619
			}
			h %= 512
			if bits[h/64]&(1<<(h%64)) != 0 && calledBefore(msgs, i, j, c.ID) {
				return true
			}
			bits[h/64] |= 1 << (h % 64)
		}
	}
	return false
}

// calledBefore reports whether a call before the j-th of message i has the id id.
func calledBefore(msgs []llm.Message, i, j int, id string) bool {
	for _, m := range msgs[:i] {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				return true
			}
		}
	}
	for _, c := range msgs[i].ToolCalls[:j] {
		if c.ID == id {
			return true
		}
	}
	return false
}

// blockField is the string member key of a content block (an object being written).
func blockField(b any, key string) string {
	o, ok := b.(object)
	if !ok {
		return ""
	}
	for _, m := range o {
		if m.key == key {
			s, _ := m.value.(string)
			return s
		}
	}
	return ""
}

// blockLoc is where a block is among the turns.
type blockLoc struct{ turn, block int }

// pairToolResults makes each assistant turn's tool calls (tool_use blocks) followed by their
// results (tool_result blocks) at the start of the next turn, a user turn, and leaves no result
// without its call in the turn before, as the Messages API requires:
//
//   - a result in the next turn is put first there, in the order of the calls;
//   - a result in another turn is moved there when that is unambiguous (its id names one call
//     and one result, it comes after the next turn, and not in the last turn, which would leave
//     the conversation on the assistant's turn, a prefill), named "<path> (moved after its tool
//     call)";
//   - a call left without a result is given one with is_error and missingResultText, named
//     "<call path> (no tool result: an error result added)";
//   - a result left without its call becomes text in its turn ("Result of tool call <id>:"
//     and its text, its images and documents after it), named "<path> (no matching tool call:
//     sent as text)".
//
// Turns emptied by a move are left out, and turns of one role that meet are merged.
func (w *writer) pairToolResults(turns []turn) []turn {
	calls, results := map[string]int{}, map[string]int{}
	resultAt := map[string]blockLoc{}
	for t, tu := range turns {
		for b, blk := range tu.blocks {
			switch blockField(blk, "type") {
			case "tool_use":
				calls[blockField(blk, "id")]++
			case "tool_result":
				id := blockField(blk, "tool_use_id")
				results[id]++
				resultAt[id] = blockLoc{t, b}
			}
		}
	}
	if len(calls) == 0 && len(results) == 0 {
		return turns
	}
	taken := map[blockLoc]bool{}
	// front are the results put first in a user turn (by the index of the turn); added are the
	// user turns inserted after an assistant turn that no user turn follows.
	front := map[int][]any{}
	frontPaths := map[int][]string{}
	added := map[int]bool{}
	for t, tu := range turns {
		if tu.role != "assistant" {
			continue
		}
		next := t + 1
		if next >= len(turns) || turns[next].role != "user" {
			next = -1
		}
		for b, blk := range tu.blocks {
			if blockField(blk, "type") != "tool_use" {
				continue
			}
			id := blockField(blk, "id")
			loc, found := blockLoc{}, false
			if next >= 0 {
				for rb, r := range turns[next].blocks {
					l := blockLoc{next, rb}
					if !taken[l] && blockField(r, "type") == "tool_result" && blockField(r, "tool_use_id") == id {
						loc, found = l, true
						break
					}
				}
			}
			if r, ok := resultAt[id]; !found && ok && calls[id] == 1 && results[id] == 1 && r.turn > t+1 && r.turn < len(turns)-1 && !taken[r] {
				loc, found = r, true
				w.drop(pathName(turns[r.turn].paths[r.block], "", "messages[]") + " (moved after its tool call)")
			}
			var res any
			var path string
			if found {
				taken[loc] = true
				res, path = turns[loc.turn].blocks[loc.block], turns[loc.turn].paths[loc.block]
			} else {
				res = object{{"type", "tool_result"}, {"tool_use_id", id}, {"content", missingResultText}, {"is_error", true}}
				w.drop(pathName(tu.paths[b], "", "messages[].tool_calls[]") + " (no tool result: an error result added)")
			}
			at := next
			if at < 0 {
				at, added[t] = t, true // keyed by the assistant turn: a user turn inserted after it
			}
			front[at] = append(front[at], res)
			frontPaths[at] = append(frontPaths[at], path)
		}
	}
	out := make([]turn, 0, len(turns)+len(added))
	push := func(tu turn) {
		if len(tu.blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].role == tu.role {
			out[n-1].blocks = append(out[n-1].blocks, tu.blocks...)
			out[n-1].paths = append(out[n-1].paths, tu.paths...)
			return
		}
		out = append(out, tu)
	}
	for t, tu := range turns {
		if tu.role == "assistant" {
			push(tu)
			if added[t] {
				push(turn{"user", front[t], frontPaths[t]})
			}
			continue
		}
		nt := turn{role: tu.role, blocks: append([]any(nil), front[t]...), paths: append([]string(nil), frontPaths[t]...)}
		for b, blk := range tu.blocks {
			if taken[blockLoc{t, b}] {
				continue
			}
			if blockField(blk, "type") != "tool_result" {
				nt.blocks, nt.paths = append(nt.blocks, blk), append(nt.paths, tu.paths[b])
				continue
			}
			w.drop(pathName(tu.paths[b], "", "messages[]") + " (no matching tool call: sent as text)")
			for _, tb := range resultAsText(blk.(object)) {
				nt.blocks, nt.paths = append(nt.blocks, tb), append(nt.paths, tu.paths[b])
			}
		}
		push(nt)
	}
	return out
}

// resultAsText is a tool result whose call is not in the turn before, as the blocks of a user
// turn: a text block saying whose result it is, with its text, then its images and documents.
func resultAsText(res object) []any {
	id := blockField(res, "tool_use_id")
	var b strings.Builder
	if isError(res) {
		b.WriteString("Error result of tool call " + id + ":")
	} else {
		b.WriteString("Result of tool call " + id + ":")
	}
	var rest []any
	for _, m := range res {
		if m.key != "content" {
			continue
		}
		switch c := m.value.(type) {
		case string:
			b.WriteString("\n" + c)
		case []any:
			for _, blk := range c {
				if blockField(blk, "type") == "text" {
					b.WriteString("\n" + blockField(blk, "text"))
				} else {
					rest = append(rest, blk)
				}
			}
		}
	}
	return append([]any{object{{"type", "text"}, {"text", b.String()}}}, rest...)
}

// isError reports whether a tool_result block being written says is_error: true.
func isError(res object) bool {
	for _, m := range res {
		if m.key == "is_error" {
			b, _ := m.value.(bool)
			return b
		}
	}
	return false
}

// historyToolTokens is the input the Messages API is sent, beyond the request's own, when the
// chat or Responses request in v is translated for it (pairToolResults, historyTools): the
// declaration of each tool its calls name that its tools do not, and, when it offers no tool,
// the tool-use system prompt those declarations bring (AnthropicToolPromptTokens); an error
// result for each call whose id no result answers, and the words that say whose result it is
// for each result whose id no call or several name, and the fresh ids of calls whose id an
// earlier call has (freshCallIDs). offered is the number of tools the request offers. A
// request without a tool call or result in its messages pays a look-up (the marker of its
// format's calls in the body).
func historyToolTokens(f llm.Format, v *jsonview.View, offered [][]byte) int {
	var marker []byte
	switch f {
	case llm.FormatChat:
		marker = []byte(`"tool_call`) // tool_calls, and a tool message's tool_call_id
	case llm.FormatResponses:
		marker = []byte(`"function_call`) // function_call, function_call_output
	default:
		return 0
	}
	if !bytes.Contains(v.Body(), marker) {
		return 0
	}
	var h toolHistory
	switch f {
	case llm.FormatChat:
		raw, _ := v.Value("messages")
		items, _ := scanArray(raw)
		for _, it := range items {
			h.chatMessage(it)
		}
	case llm.FormatResponses:
		raw, _ := v.Value("input")
		items, _ := scanArray(raw)
		for _, it := range items {
			h.responsesItem(it)
		}
	}
	if len(h.names) == 0 && len(h.results) == 0 {
		return 0
	}
	have := make(map[string]bool, len(offered))
	for _, t := range offered {
		have[offeredName(f, t)] = true
	}
	size, tools := 0, 0
	for _, name := range h.names {
		if !have[name] {
			have[name] = true
			tools++
			size += len(name) + len(historyToolDescription) + len(historyToolSchema)
		}
	}
	n := tools * ToolOverheadTokens
	if tools > 0 && len(offered) == 0 {
		n += AnthropicToolPromptTokens
	}
	for id := range h.calls {
		if h.results[id] == 0 {
			n += ToolOverheadTokens
			size += len(id) + len(missingResultText)
		}
	}
	for _, c := range h.calls {
		if c > 1 {
			// The fresh ids of the calls after the first, and of their results
			// (freshCallIDs): "_2", "_3", ... appended.
			size += 2 * (c - 1) * len("_"+strconv.Itoa(c))
		}
	}
	for id, r := range h.results {
		switch {
		case h.calls[id] != 1 || r != 1:
			size += r * len("Error result of tool call : ")
		case h.resultTurn[id] != h.callTurn[id]+1:
			// Moved after its call, or, when it cannot be, sent as text and the call given
			// an error result: counted as the latter.
			n += ToolOverheadTokens
			size += len(id) + len(missingResultText) + len("Error result of tool call : ")
		}
	}
	return n + (size+BytesPerToken-1)/BytesPerToken
}

// toolHistory counts the tool calls and results of a request's messages, by id, and the names
// its calls give.
type toolHistory struct {
	calls, results map[string]int
	names          []string
	// turn counts the turns (runs of one side: the assistant's, the user's with the tool
	// results), side is the current turn's (0 before the first), and callTurn and resultTurn
	// are the turns of each id's last call and result.
	turn, side           int
	callTurn, resultTurn map[string]int
}

// Sides of a turn.
const (
	userSide      = 1
	assistantSide = 2
)

// at notes a message of side s.
func (h *toolHistory) at(s int) {
	if h.side != s {
		h.side = s
		h.turn++
	}
}

func (h *toolHistory) call(id, name string) {
	if h.calls == nil {
		h.calls, h.callTurn = map[string]int{}, map[string]int{}
	}
	h.calls[id]++
	h.callTurn[id] = h.turn
	h.names = append(h.names, name)
}

func (h *toolHistory) result(id string) {
	if h.results == nil {
		h.results, h.resultTurn = map[string]int{}, map[string]int{}
	}
	h.results[id]++
	h.resultTurn[id] = h.turn
}

// chatMessage counts a chat message: an assistant's tool_calls, a tool message's tool_call_id.
func (h *toolHistory) chatMessage(msg []byte) {
	var calls, result []byte
	side := 0
	_ = scanTop(msg, func(key, value []byte) error {
		switch string(key) {
		case "role":
			switch role, _ := stringValue(value); role {
			case "assistant":
				side = assistantSide
			case "user", "tool":
				side = userSide
			}
		case "tool_calls":
			calls = value
		case "tool_call_id":
			result = value
		}
		return nil
	})
	switch side {
	case userSide:
		h.at(userSide)
		if result != nil {
			id, _ := stringValue(result)
			h.result(id)
		}
	case assistantSide:
		h.at(assistantSide)
		list, _ := scanArray(calls)
		for _, c := range list {
			var id, name string
			_ = scanTop(c, func(key, value []byte) error {
				switch string(key) {
				case "id":
					id, _ = stringValue(value)
				case "function":
					_, name = typeAndName(value)
				}
				return nil
			})
			h.call(id, name)
		}
	}
}

// responsesItem counts a Responses input item: a function_call, a function_call_output.
func (h *toolHistory) responsesItem(item []byte) {
	var kind, name, id, role string
	_ = scanTop(item, func(key, value []byte) error {
		switch string(key) {
		case "type":
			kind, _ = stringValue(value)
		case "name":
			name, _ = stringValue(value)
		case "call_id":
			id, _ = stringValue(value)
		case "role":
			role, _ = stringValue(value)
		}
		return nil
	})
	switch {
	case kind == "function_call":
		h.at(assistantSide)
		h.call(id, name)
	case kind == "function_call_output":
		h.at(userSide)
		h.result(id)
	case role == "assistant":
		h.at(assistantSide)
	case role == "user":
		h.at(userSide)
	}
}

// offeredName is the name of a function tool a request of format f offers (chat's
// tools[].function.name, Responses' tools[].name).
func offeredName(f llm.Format, tool []byte) string {
	if f != llm.FormatChat {
		_, name := typeAndName(tool)
		return name
	}
	var name string
	_ = scanTop(tool, func(key, value []byte) error {
		if string(key) == "function" {
			_, name = typeAndName(value)
		}
		return nil
	})
	return name
}
