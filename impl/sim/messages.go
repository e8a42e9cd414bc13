package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// messagesRequest is the part of an Anthropic Messages request the simulator reads.
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	Stream        bool               `json:"stream"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	Tools         []struct {
		Type         string          `json:"type"`
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"input_schema"`
		MaxUses      *int            `json:"max_uses"`
		CacheControl *cacheControl   `json:"cache_control"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	OutputConfig json.RawMessage `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"` // the beta spelling of output_config.format
	// CacheControl asks for automatic caching: a breakpoint on the last block.
	CacheControl *cacheControl `json:"cache_control"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block of a message or of the system prompt, as far as the
// simulator counts and hashes it.
type anthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`          // tool_use
	Name         string          `json:"name"`        // tool_use
	Input        json.RawMessage `json:"input"`       // tool_use
	ToolUseID    string          `json:"tool_use_id"` // tool_result
	Content      json.RawMessage `json:"content"`     // tool_result
	Source       json.RawMessage `json:"source"`      // image, document
	CacheControl *cacheControl   `json:"cache_control"`
}

// messagesTurn is a planned Messages reply.
type messagesTurn struct {
	*turn
	id        string
	toolID    string
	searchIDs []string // srvtoolu_… of the server_tool_use blocks
}

// decodeMessages decodes and checks a Messages (or count_tokens) request and counts its input
// tokens in c; on the Messages route, when the request mentions cache_control, c also hashes
// its prompt and records its block boundaries in prefix order: tools, system, messages. It
// answers the client and returns false when the request is refused.
func (s *Simulator) decodeMessages(w http.ResponseWriter, r *http.Request, rt Route, body []byte, req *messagesRequest, in *planInput, c *counter) bool {
	decodeErr := json.Unmarshal(body, req)
	s.record(rt, r, req.Model, body)
	if !s.authorized(w, r, rt) {
		return false
	}
	bad := func(msg string) bool {
		s.writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return false
	}
	switch {
	case decodeErr != nil:
		return bad("There was an error parsing the body of your request. Please ensure it is valid JSON.")
	case req.Model == "":
		return bad("model: Field required")
	case req.Messages == nil:
		return bad("messages: Field required")
	case rt == RouteMessages && req.MaxTokens == nil:
		return bad("max_tokens: Field required")
	case rt == RouteMessages && *req.MaxTokens < 1:
		return bad("max_tokens: Input should be greater than or equal to 1")
	}
	for _, m := range req.Messages {
		// A system message among the turns is more system text (Claude Code sends one).
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return bad("messages: Input tag '" + m.Role + "' found using 'role' does not match any of the expected tags: 'user', 'assistant', 'system'")
		}
		if blankText(m.Content) {
			return bad("messages: text content blocks must contain non-whitespace text")
		}
	}
	for i, t := range req.Tools {
		if t.Type == "" || t.Type == "custom" {
			if msg := anthropicToolNameRefusal(i, t.Name); msg != "" {
				return bad(msg)
			}
		}
	}
	if bytes.Contains(body, []byte(`"tool_use`)) || bytes.Contains(body, []byte(`"tool_result"`)) {
		if msg := toolHistoryRefusal(req.Messages, len(req.Tools) > 0); msg != "" {
			return bad(msg)
		}
	}
	if trailingPrefill(req.Messages) {
		// As the API refuses a prefill (the assistant turn it continues) that ends in
		// whitespace.
		return bad("messages: final assistant content cannot end with trailing whitespace")
	}
	if req.Temperature != nil && req.TopP != nil {
		// As the API refuses them for the Claude 4.5 models and later, which the simulated
		// models stand in for.
		return bad("`temperature` and `top_p` cannot both be specified for this model. Please use only one.")
	}
	for _, s := range req.StopSequences {
		// As the API refuses them: a newline cannot stop a Messages answer.
		if s == "" {
			return bad("stop_sequences: each stop sequence must be non-empty")
		}
		if strings.TrimSpace(s) == "" {
			return bad("stop_sequences: each stop sequence must contain non-whitespace")
		}
	}
	if rt == RouteMessages {
		in.maxTokens = *req.MaxTokens
	}
	if rt == RouteMessages && bytes.Contains(body, []byte("cache_control")) {
		c.startHash(s.cacheSeed, 0, len(body), string(RouteMessages), req.Model, account(r, rt))
		c.blocks = make([]boundary, 0, len(req.Tools)+len(req.Messages)+4)
		for _, t := range req.Tools {
			c.mark(t.Type)
			c.mark(t.Name)
			c.mark(t.Description)
			c.markRaw(t.InputSchema)
			c.boundary(t.CacheControl.life())
		}
	}
	if sys, ok := rawString(req.System); ok {
		c.mark("text")
		c.add(sys)
		c.boundary(0)
	} else if !isNull(req.System) {
		systemBlocks(req.System, c)
	}
	last := len(req.Messages) - 1 // the last turn: system messages are not turns
	for last >= 0 && req.Messages[last].Role == "system" {
		last--
	}
	var sc scriptScan
	for i, m := range req.Messages {
		c.mark(m.Role)
		text, hasResult := anthropicContent(m.Content, c, &sc)
		if m.Role == "user" {
			in.prompt = text
			in.endsWithUser = i == last && !hasResult
			sc.user(text)
		}
	}
	if rt == RouteMessages {
		if in.script = sc.script(); in.script != nil && in.script.err != nil {
			return bad(in.script.errorMessage())
		}
	}
	in.stops = req.StopSequences
	for _, t := range req.Tools {
		switch {
		case t.Type == "" || t.Type == "custom":
			in.tools = append(in.tools, toolDef{name: t.Name, schema: t.InputSchema})
		case strings.HasPrefix(t.Type, "web_search_") && !in.webSearch:
			in.webSearch = true
			if t.MaxUses != nil {
				in.searchCap, in.searchCapped = *t.MaxUses, true
			}
		}
	}
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "none":
			in.choiceNone = true
		case "any":
			in.anyTool = true
		case "tool":
			in.forced = tc.Name
		}
	}
	in.format = messagesOutputFormat(req.OutputConfig, req.OutputFormat)
	if n := len(c.blocks); n > 0 {
		// Automatic caching puts a breakpoint on the last block.
		c.blocks[n-1].ttl = max(c.blocks[n-1].ttl, req.CacheControl.life())
	}
	return true
}

// toolHistoryRefusal is the Messages API's refusal of a request's tool history, "" when it
// takes it, in the API's words: tool_use or tool_result blocks in a request that defines no
// tools (hasTools false); a tool_use whose id an earlier tool_use of the request has, in its
// turn or another ("messages.N.content.M: `tool_use` ids must be unique",
// anthropics/claude-code#20901, opencode#1150); a tool_use whose tool_result is not in the next
// message; a tool_result whose tool_use is not in the message before.
func toolHistoryRefusal(msgs []anthropicMessage, hasTools bool) string {
	blocks := make([][]anthropicBlock, len(msgs))
	for i, m := range msgs {
		if t := bytes.TrimLeft(m.Content, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			_ = json.Unmarshal(m.Content, &blocks[i])
		}
	}
	for _, bs := range blocks {
		for _, b := range bs {
			if (b.Type == "tool_use" || b.Type == "tool_result") && !hasTools {
				return "Requests which include `tool_use` or `tool_result` blocks must define tools."
			}
		}
	}
	ids := map[string]bool{}
	for i, bs := range blocks {
		for j, b := range bs {
			if b.Type == "tool_use" {
				if ids[b.ID] {
					return "messages." + strconv.Itoa(i) + ".content." + strconv.Itoa(j) + ": `tool_use` ids must be unique"
				}
				ids[b.ID] = true
			}
		}
	}
	for i, bs := range blocks {
		var missing []string
		for _, b := range bs {
			if b.Type != "tool_use" {
				continue
			}
			found := false
			if i+1 < len(msgs) && msgs[i+1].Role == "user" {
				for _, r := range blocks[i+1] {
					found = found || (r.Type == "tool_result" && r.ToolUseID == b.ID)
				}
			}
			if !found {
				missing = append(missing, b.ID)
			}
		}
		if len(missing) > 0 {
			return "messages." + strconv.Itoa(i) + ": `tool_use` ids were found without `tool_result` blocks immediately after: " +
				strings.Join(missing, ", ") + ". Each `tool_use` block must have a corresponding `tool_result` block in the next message."
		}
		for j, b := range bs {
			if b.Type != "tool_result" {
				continue
			}
			found := false
			if i > 0 && msgs[i-1].Role == "assistant" {
				for _, u := range blocks[i-1] {
					found = found || (u.Type == "tool_use" && u.ID == b.ToolUseID)
				}
			}
			if !found {
				return "messages." + strconv.Itoa(i) + ".content." + strconv.Itoa(j) + ": unexpected `tool_use_id` found in `tool_result` blocks: " +
					b.ToolUseID + ". Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
			}
		}
	}
	return ""
}

// blankText reports whether a message's content (a string or blocks) has a text block of
// whitespace alone, which the Messages API refuses ("text content blocks must contain
// non-whitespace text"); an empty string is another refusal, not simulated.
func blankText(raw json.RawMessage) bool {
	blank := func(s string) bool { return s != "" && strings.TrimSpace(s) == "" }
	if s, ok := rawString(raw); ok {
		return blank(s)
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "text" && blank(b.Text) {
			return true
		}
	}
	return false
}

// trailingPrefill reports whether the conversation ends with an assistant turn (a prefill,
// which the model continues) whose final content is text ending in whitespace, which the
// Messages API refuses ("final assistant content cannot end with trailing whitespace").
func trailingPrefill(msgs []anthropicMessage) bool {
	last := len(msgs) - 1
	for last >= 0 && msgs[last].Role == "system" {
		last--
	}
	if last < 0 || msgs[last].Role != "assistant" {
		return false
	}
	text, ok := rawString(msgs[last].Content)
	if !ok {
		var blocks []anthropicBlock
		if json.Unmarshal(msgs[last].Content, &blocks) != nil || len(blocks) == 0 || blocks[len(blocks)-1].Type != "text" {
			return false
		}
		text = blocks[len(blocks)-1].Text
	}
	return text != strings.TrimRightFunc(text, unicode.IsSpace)
}

// systemBlocks counts the text of the blocks of a system prompt given as an array, as
// contentText joins it, and records their boundaries.
func systemBlocks(raw json.RawMessage, c *counter) {
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	joined := false // some text so far, so that the next one follows a newline
	for _, b := range blocks {
		c.mark(b.Type)
		switch b.Type {
		case "text", "input_text", "output_text":
			if joined {
				c.add("\n")
			}
			c.add(b.Text)
			joined = joined || b.Text != ""
		}
		c.boundary(b.CacheControl.life())
	}
}

// anthropicContent returns the text of a message's content, counts all of its text and
// records its block boundaries (a string is one text block); hasResult reports a tool_result
// block. Each tool_result block is noted in sc.
func anthropicContent(raw json.RawMessage, c *counter, sc *scriptScan) (text string, hasResult bool) {
	if s, ok := rawString(raw); ok {
		c.mark("text")
		c.add(s)
		c.boundary(0)
		return s, false
	}
	var blocks []anthropicBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return "", false
	}
	for _, b := range blocks {
		c.mark(b.Type)
		switch b.Type {
		case "text":
			c.add(b.Text)
			if text != "" {
				text += "\n"
			}
			text += b.Text
		case "tool_use":
			c.mark(b.ID)
			c.mark(b.Name)
			c.addRaw(b.Input)
		case "tool_result":
			hasResult = true
			out := contentText(b.Content)
			c.mark(b.ToolUseID)
			c.add(out)
			sc.result(out)
		default:
			c.markRaw(b.Source)
		}
		c.boundary(b.CacheControl.life())
	}
	return text, hasResult
}

func (s *Simulator) serveCountTokens(w http.ResponseWriter, r *http.Request, body []byte) {
	var req messagesRequest
	var in planInput
	var c counter
	if !s.decodeMessages(w, r, RouteCountTokens, body, &req, &in, &c) {
		return
	}
	b := append(appendInt([]byte(`{"input_tokens":`), c.tokens()), "}\n"...)
	writeJSON(w, http.StatusOK, b)
}

func (s *Simulator) serveMessages(w http.ResponseWriter, r *http.Request, body []byte) {
	var req messagesRequest
	var in planInput
	var c counter
	if !s.decodeMessages(w, r, RouteMessages, body, &req, &in, &c) {
		return
	}
	t := &messagesTurn{turn: s.plan(RouteMessages, req.Model, req.Stream, c.tokens(), in)}
	if s.preFault(w, r, t.turn, func(st int) { s.anthropicStatus(w, st) }) {
		return
	}
	s.cacheAnthropic(t.turn, c.blocks)
	t.id = s.newID("msg_01", 22, false)
	if t.finish == finishTool {
		t.toolID = s.newID("toolu_01", 22, false)
	}
	for range t.searches {
		t.searchIDs = append(t.searchIDs, s.newID("srvtoolu_01", 22, false))
	}
	if !req.Stream {
		if !t.wait(r.Context()) {
			return
		}
		s.writeBody(w, t.turn, t.body())
		return
	}
	s.stream(w, r, t.turn, t)
}

// stopReason is the turn's stop_reason.
func (t *messagesTurn) stopReason() string {
	switch t.finish {
	case finishLength:
		return "max_tokens"
	case finishStopSeq:
		return "stop_sequence"
	case finishTool:
		return "tool_use"
	default:
		if t.refusal {
			return "refusal" // its classifiers stopped the answer
		}
		return "end_turn"
	}
}

// appendBlock appends the content block in its final form.
func (t *messagesTurn) appendBlock(b []byte) []byte {
	if t.finish == finishTool {
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendString(b, t.toolID)
		b = append(b, `,"name":`...)
		b = appendString(b, t.tool)
		b = append(b, `,"input":`...)
		b = append(b, t.toolArgs()...)
		return append(b, '}')
	}
	b = append(b, `{"type":"text","text":"`...)
	b = t.appendText(b, t.words)
	return append(b, `"}`...)
}

// appendStopSequence appends the stop_sequence value.
func (t *messagesTurn) appendStopSequence(b []byte) []byte {
	if t.finish == finishStopSeq {
		return appendString(b, t.stopSeq)
	}
	return append(b, "null"...)
}

// appendMessageHead appends the message fields up to "content":.
func (t *messagesTurn) appendMessageHead(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, t.model)
	return append(b, `,"content":`...)
}

// appendUsage appends the usage object of the message with output output tokens; final adds
// the web search count when the turn searched. input_tokens counts only the input tokens
// neither read from nor written to the prompt cache.
func (t *messagesTurn) appendUsage(b []byte, output int, final bool) []byte {
	b = t.appendInputUsage(b)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = appendInt(b, t.cacheWrite5m)
	b = append(b, `,"ephemeral_1h_input_tokens":`...)
	b = appendInt(b, t.cacheWrite1h)
	b = append(b, `},"output_tokens":`...)
	b = appendInt(b, output)
	if final {
		b = t.appendServerToolUse(b)
	}
	return append(b, `,"service_tier":"standard"}`...)
}

// appendInputUsage appends {"input_tokens":…,"cache_creation_input_tokens":…,
// "cache_read_input_tokens":… (the object left open), as the message's usage and the stream's
// message_delta begin.
func (t *messagesTurn) appendInputUsage(b []byte) []byte {
	written := t.cacheWrite5m + t.cacheWrite1h
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, t.input-t.cacheRead-written)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, written)
	b = append(b, `,"cache_read_input_tokens":`...)
	return appendInt(b, t.cacheRead)
}

// appendServerToolUse appends ,"server_tool_use":{…} when the turn searched.
func (t *messagesTurn) appendServerToolUse(b []byte) []byte {
	if t.searches == 0 {
		return b
	}
	b = append(b, `,"server_tool_use":{"web_search_requests":`...)
	b = appendInt(b, t.searches)
	return append(b, '}')
}

// appendSearchUse appends the server_tool_use block of search i, with its input when withInput
// is set and with an empty input (as content_block_start opens it) otherwise.
func (t *messagesTurn) appendSearchUse(b []byte, i int, withInput bool) []byte {
	b = append(b, `{"type":"server_tool_use","id":`...)
	b = appendString(b, t.searchIDs[i])
	b = append(b, `,"name":"web_search","input":`...)
	if withInput {
		b = append(b, `{"query":"`...)
		b = t.appendQuery(b, i)
		b = append(b, `"}`...)
	} else {
		b = append(b, `{}`...)
	}
	return append(b, '}')
}

// appendSearchResult appends the web_search_tool_result block of search i.
func (t *messagesTurn) appendSearchResult(b []byte, i int) []byte {
	b = append(b, `{"type":"web_search_tool_result","tool_use_id":`...)
	b = appendString(b, t.searchIDs[i])
	b = append(b, `,"content":[`...)
	for r := range searchResults {
		if r > 0 {
			b = append(b, ',')
		}
		b = t.turn.appendSearchResult(b, i, r)
	}
	return append(b, "]}"...)
}

// mainIndex is the index of the reply's text or tool_use block, after the search blocks.
func (t *messagesTurn) mainIndex() int { return 2 * t.searches }

// blockStart writes a content_block_start of block index, its content_block appended by
// block, followed by the ping when it is the stream's first block.
func (t *messagesTurn) blockStart(o *sse, index int, block func(b []byte) []byte) {
	o.start("content_block_start")
	o.buf = append(o.buf, `{"type":"content_block_start","index":`...)
	o.buf = appendInt(o.buf, index)
	o.buf = append(o.buf, `,"content_block":`...)
	o.buf = block(o.buf)
	o.buf = append(o.buf, '}')
	o.end()
	if index == 0 {
		o.start("ping")
		o.buf = append(o.buf, `{"type":"ping"}`...)
		o.end()
	}
}

// blockStop writes the content_block_stop of block index.
func (t *messagesTurn) blockStop(o *sse, index int) {
	o.start("content_block_stop")
	o.buf = append(o.buf, `{"type":"content_block_stop","index":`...)
	o.buf = appendInt(o.buf, index)
	o.buf = append(o.buf, '}')
	o.end()
}

// search writes the blocks of web search i: the server_tool_use block, its input streamed as
// input_json_delta (an empty one first, as for tool_use), then the web_search_tool_result
// block given whole in its content_block_start, as Anthropic sends it.
func (t *messagesTurn) search(o *sse, i int) {
	use := 2 * i
	t.blockStart(o, use, func(b []byte) []byte { return t.appendSearchUse(b, i, false) })
	t.jsonDelta(o, use, "")
	t.jsonDelta(o, use, `{"query":"`)
	t.jsonDelta(o, use, t.query(i))
	t.jsonDelta(o, use, `"}`)
	t.blockStop(o, use)
	t.blockStart(o, use+1, func(b []byte) []byte { return t.appendSearchResult(b, i) })
	t.blockStop(o, use+1)
}

// body is the non-streaming message object.
func (t *messagesTurn) body() []byte {
	b := make([]byte, 0, 512)
	b = t.appendMessageHead(b)
	b = append(b, '[')
	for i := range t.searches {
		b = t.appendSearchUse(b, i, true)
		b = append(b, ',')
		b = t.appendSearchResult(b, i)
		b = append(b, ',')
	}
	b = t.appendBlock(b)
	b = append(b, `],"stop_reason":"`...)
	b = append(b, t.stopReason()...)
	b = append(b, `","stop_sequence":`...)
	b = t.appendStopSequence(b)
	b = append(b, `,"usage":`...)
	b = t.appendUsage(b, t.outputTokens(), true)
	return append(b, "}\n"...)
}

func (t *messagesTurn) open(o *sse) {
	o.start("message_start")
	o.buf = append(o.buf, `{"type":"message_start","message":`...)
	o.buf = t.appendMessageHead(o.buf)
	o.buf = append(o.buf, `[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	o.buf = t.appendUsage(o.buf, 1, false)
	o.buf = append(o.buf, "}}"...)
	o.end()

	for i := range t.searches {
		t.search(o, i)
	}

	t.blockStart(o, t.mainIndex(), func(b []byte) []byte {
		if t.finish == finishTool {
			b = append(b, `{"type":"tool_use","id":`...)
			b = appendString(b, t.toolID)
			b = append(b, `,"name":`...)
			b = appendString(b, t.tool)
			return append(b, `,"input":{}}`...)
		}
		return append(b, `{"type":"text","text":""}`...)
	})

	if t.finish == finishTool {
		// Anthropic opens a tool_use block with an empty partial_json.
		t.jsonDelta(o, t.mainIndex(), "")
	}
}

// jsonDelta writes an input_json_delta of block index.
func (t *messagesTurn) jsonDelta(o *sse, index int, partial string) {
	o.start("content_block_delta")
	o.buf = append(o.buf, `{"type":"content_block_delta","index":`...)
	o.buf = appendInt(o.buf, index)
	o.buf = append(o.buf, `,"delta":{"type":"input_json_delta","partial_json":`...)
	o.buf = appendString(o.buf, partial)
	o.buf = append(o.buf, "}}"...)
	o.end()
}

func (t *messagesTurn) content(o *sse, i int) {
	if t.finish == finishTool {
		t.jsonDelta(o, t.mainIndex(), t.toolFragment(i))
		return
	}
	o.start("content_block_delta")
	o.buf = append(o.buf, `{"type":"content_block_delta","index":`...)
	o.buf = appendInt(o.buf, t.mainIndex())
	o.buf = append(o.buf, `,"delta":{"type":"text_delta","text":"`...)
	o.buf = t.appendToken(o.buf, i)
	o.buf = append(o.buf, `"}}`...)
	o.end()
}

func (t *messagesTurn) close(o *sse) {
	t.blockStop(o, t.mainIndex())

	o.start("message_delta")
	o.buf = append(o.buf, `{"type":"message_delta","delta":{"stop_reason":"`...)
	o.buf = append(o.buf, t.stopReason()...)
	o.buf = append(o.buf, `","stop_sequence":`...)
	o.buf = t.appendStopSequence(o.buf)
	// The usage is cumulative: the input counts of message_start again, and the output.
	o.buf = append(o.buf, `},"usage":`...)
	o.buf = t.appendInputUsage(o.buf)
	o.buf = append(o.buf, `,"output_tokens":`...)
	o.buf = appendInt(o.buf, t.outputTokens())
	o.buf = t.appendServerToolUse(o.buf)
	o.buf = append(o.buf, "}}"...)
	o.end()

	o.start("message_stop")
	o.buf = append(o.buf, `{"type":"message_stop"}`...)
	o.end()
}

func (t *messagesTurn) fail(o *sse, _ int) {
	status := t.fault.Status
	if status == 0 {
		status = 529
	}
	typ, msg := anthropicType(status)
	o.start("error")
	o.buf = appendAnthropicError(o.buf, typ, msg)
	o.end()
}
