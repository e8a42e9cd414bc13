package sim

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// responsesRequest is the part of a Responses request the simulator reads or echoes.
type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       json.RawMessage `json:"instructions"`
	Stream             bool            `json:"stream"`
	StreamOptions      json.RawMessage `json:"stream_options"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	MaxToolCalls       *int            `json:"max_tool_calls"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Temperature        json.RawMessage `json:"temperature"`
	TopP               json.RawMessage `json:"top_p"`
	Store              json.RawMessage `json:"store"`
	Metadata           json.RawMessage `json:"metadata"`
	ParallelToolCalls  json.RawMessage `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Text               json.RawMessage `json:"text"`
	Truncation         json.RawMessage `json:"truncation"`
	// PromptCacheKey partitions the prompt cache; PromptCacheRetention "24h" extends the
	// lifetime of the cached prefixes. They are not echoed.
	PromptCacheKey       string `json:"prompt_cache_key"`
	PromptCacheRetention string `json:"prompt_cache_retention"`
	// ServiceTier "flex" or "priority" is the tier the answer says it was served on.
	ServiceTier string `json:"service_tier"`
}

// responsesItem is an input item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// EncryptedContent is a compaction item's: the summary a compaction_trigger answered
	// with, which the simulator writes as the summary's text in base64 (compactionContent).
	EncryptedContent string `json:"encrypted_content"`
}

// responsesTool is a tool of a Responses request: a function, a namespace of functions (and
// custom tools, which the simulator does not call), a hosted tool.
type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Tools      []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

// responsesTurn is a planned Responses reply.
type responsesTurn struct {
	*turn
	req       *responsesRequest
	id        string
	itemID    string // msg_… or fc_…
	callID    string
	searchIDs []string // ws_… of the web_search_call items
	obfuscate bool
	seq       int
	// compact is set when the input ends with a compaction_trigger item: the answer is one
	// compaction item (itemID cmp_…) whose encrypted_content holds the summary, which streams
	// no deltas.
	compact bool
}

func (s *Simulator) serveResponses(w http.ResponseWriter, r *http.Request, body []byte) {
	req := new(responsesRequest)
	decodeErr := json.Unmarshal(body, req)
	s.record(RouteResponses, r, req.Model, body)
	if !s.authorized(w, r, RouteResponses) {
		return
	}
	if decodeErr != nil {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
			"We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)", "", "")
		return
	}
	var opts streamOptions
	if !isNull(req.StreamOptions) {
		if !req.Stream {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "")
			return
		}
		if json.Unmarshal(req.StreamOptions, &opts) != nil {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid type for 'stream_options': expected an object.", "stream_options", "invalid_type")
			return
		}
	}
	if req.Model == "" {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'model'.", "model", "missing_required_parameter")
		return
	}
	in := planInput{}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 16 {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got "+strconv.Itoa(*req.MaxOutputTokens)+" instead.", "max_output_tokens", "integer_below_min_value")
			return
		}
		in.maxTokens = *req.MaxOutputTokens
	}

	var c counter
	if len(body) >= stepChars { // a shorter body cannot reach a cache checkpoint
		c.startHash(s.cacheSeed, stepChars, len(body), string(RouteResponses), req.Model, account(r, RouteResponses), req.PromptCacheKey)
		c.markRaw(req.Tools)
		c.markRaw(req.Text)
	}
	var sc scriptScan
	compact := false
	if ins, ok := rawString(req.Instructions); ok {
		c.mark("instructions")
		c.add(ins)
	}
	if text, ok := rawString(req.Input); ok {
		c.mark("user")
		c.add(text)
		in.prompt, in.endsWithUser = text, true
		sc.user(text)
	} else if !isNull(req.Input) {
		var items []responsesItem
		if json.Unmarshal(req.Input, &items) != nil {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid type for 'input': expected one of a string or an array of input items.", "input", "invalid_type")
			return
		}
		for i, it := range items {
			switch it.Type {
			case "", "message":
				text := contentText(it.Content)
				c.mark(it.Role)
				c.add(text)
				if it.Role == "user" {
					in.prompt = text
					in.endsWithUser = i == len(items)-1
					sc.user(text)
				}
			case "function_call":
				c.mark(it.Type)
				c.add(it.Name)
				c.add(it.Arguments)
			case "function_call_output":
				out := contentText(it.Output)
				c.mark(it.Type)
				c.add(out)
				sc.result(out)
			case "compaction":
				c.mark(it.Type)
				c.add(compactionText(it.EncryptedContent))
			case "compaction_trigger":
				compact = i == len(items)-1
			}
		}
	}
	if in.script = sc.script(); in.script != nil && in.script.err != nil {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", in.script.errorMessage(), "input", "invalid_sim_script")
		return
	}
	if !isNull(req.Tools) {
		var tools []responsesTool
		if json.Unmarshal(req.Tools, &tools) != nil {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid type for 'tools': expected an array of tools.", "tools", "invalid_type")
			return
		}
		for i, t := range tools {
			if t.Type != "function" {
				continue
			}
			param := "tools[" + strconv.Itoa(i) + "].name"
			if msg, code := openAIToolNameRefusal(param, t.Name); msg != "" {
				s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", msg, param, code)
				return
			}
		}
		for _, t := range tools {
			switch {
			case t.Type == "function":
				in.tools = append(in.tools, toolDef{name: t.Name, schema: t.Parameters})
			case t.Type == "namespace":
				for _, f := range t.Tools {
					if f.Type == "function" {
						in.tools = append(in.tools, toolDef{name: f.Name, namespace: t.Name, schema: f.Parameters})
					}
				}
			case strings.HasPrefix(t.Type, "web_search"):
				in.webSearch = true
			}
		}
	}
	if choice, ok := rawString(req.ToolChoice); ok {
		in.choiceNone = choice == "none"
		in.anyTool = choice == "required"
	} else if !isNull(req.ToolChoice) {
		var tc struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		}
		if json.Unmarshal(req.ToolChoice, &tc) == nil && tc.Type == "function" {
			in.forced, in.forcedNS = tc.Name, tc.Namespace
		}
	}
	in.format = responsesOutputFormat(req.Text)
	if req.MaxToolCalls != nil {
		in.searchCap, in.searchCapped = *req.MaxToolCalls, true
	}

	if compact {
		// A compaction pass writes a summary, whatever tools the conversation offers.
		in.tools, in.webSearch, in.forced, in.forcedNS, in.anyTool, in.endsWithUser = nil, false, "", "", false, true
	}
	t := &responsesTurn{turn: s.plan(RouteResponses, req.Model, req.Stream, c.tokens(), in), req: req, compact: compact}
	status := func(st int) { s.openAIStatus(w, st, req.Model) }
	if s.preFault(w, r, t.turn, status) {
		return
	}
	s.cacheOpenAI(t.turn, c.points, openAIRetentionOf(req.PromptCacheRetention))
	t.id = s.newID("resp_", 50, true)
	for range t.searches {
		t.searchIDs = append(t.searchIDs, s.newID("ws_", 50, true))
	}
	switch {
	case t.compact:
		t.itemID = s.newID("cmp_", 50, true)
	case t.finish == finishTool:
		t.itemID = s.newID("fc_", 50, true)
		t.callID = s.newID("call_", 24, false)
	default:
		t.itemID = s.newID("msg_", 50, true)
	}
	if !req.Stream {
		if !t.wait(r.Context()) {
			return
		}
		b := t.appendResponse(make([]byte, 0, 1536), respFinal, 0)
		s.writeBody(w, t.turn, append(b, '\n'))
		return
	}
	t.obfuscate = opts.IncludeObfuscation == nil || *opts.IncludeObfuscation
	s.stream(w, r, t.turn, t)
}

// respPhase selects the state a response object is rendered in.
type respPhase int

const (
	respInProgress respPhase = iota // response.created / response.in_progress
	respFinal                       // completed or incomplete, with usage
	respFailed                      // failed after n content events
)

// status is the final status of the response.
func (t *responsesTurn) status() string {
	if t.finish == finishLength {
		return "incomplete"
	}
	return "completed"
}

// appendItem appends the output item after n content events; done selects its final form.
func (t *responsesTurn) appendItem(b []byte, n int, status string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, t.itemID)
	if t.compact {
		b = append(b, `,"type":"compaction","encrypted_content":`...)
		b = appendString(b, compactionContent(t.appendText(nil, t.contentEvents())))
		return append(b, '}')
	}
	if t.finish == finishTool {
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","arguments":`...)
		args := ""
		for i := 0; i < n; i++ {
			args += t.toolFragment(i)
		}
		b = appendString(b, args)
		b = append(b, `,"call_id":`...)
		b = appendString(b, t.callID)
		b = append(b, `,"name":`...)
		b = appendString(b, t.tool)
		b = t.appendNamespace(b)
		return append(b, '}')
	}
	b = append(b, `,"type":"message","status":"`...)
	b = append(b, status...)
	b = append(b, `","content":[`...)
	if status != "in_progress" {
		b = t.appendParts(b, n)
	}
	return append(b, `],"role":"assistant"}`...)
}

// appendNamespace appends the "namespace" of a call to a function of a namespace tool.
func (t *responsesTurn) appendNamespace(b []byte) []byte {
	if t.namespace == "" {
		return b
	}
	b = append(b, `,"namespace":`...)
	return appendString(b, t.namespace)
}

// appendSearchItem appends the web_search_call item of search i: in progress (as
// response.output_item.added shows it, the query not yet known) or completed.
func (t *responsesTurn) appendSearchItem(b []byte, i int, done bool) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, t.searchIDs[i])
	if !done {
		return append(b, `,"type":"web_search_call","status":"in_progress","action":{"type":"search"}}`...)
	}
	b = append(b, `,"type":"web_search_call","status":"completed","action":{"type":"search","query":"`...)
	b = t.appendQuery(b, i)
	b = append(b, `","queries":["`...)
	b = t.appendQuery(b, i)
	return append(b, `"]}}`...)
}

// appendSearchItems appends the completed web_search_call items, each followed by a comma.
func (t *responsesTurn) appendSearchItems(b []byte) []byte {
	for i := range t.searches {
		b = append(t.appendSearchItem(b, i, true), ',')
	}
	return b
}

// textThenRefusal reports an answer of text and then a refusal (refuse=after_text): its
// message has an output_text part, tokens 0 to refusalFrom-1, and a refusal part, the rest.
func (t *responsesTurn) textThenRefusal() bool { return t.refusal && t.refusalFrom > 0 }

// partOf is the content index of the part that content event i writes to.
func (t *responsesTurn) partOf(i int) int {
	if t.textThenRefusal() && i >= t.refusalFrom {
		return 1
	}
	return 0
}

// isRefusalPart reports whether content part ci is a refusal part.
func (t *responsesTurn) isRefusalPart(ci int) bool {
	return t.refusal && (!t.textThenRefusal() || ci == 1)
}

// partTokens is the range of tokens, from to to-1, that content part ci holds after n content
// events.
func (t *responsesTurn) partTokens(ci, n int) (from, to int) {
	switch {
	case !t.textThenRefusal():
		return 0, n
	case ci == 0:
		return 0, min(n, t.refusalFrom)
	default:
		return t.refusalFrom, n
	}
}

// appendPart appends content part ci as it is after n content events: the output_text part,
// or the refusal part of a refusal, holding its tokens among the first n.
func (t *responsesTurn) appendPart(b []byte, ci, n int) []byte {
	from, to := t.partTokens(ci, n)
	if t.isRefusalPart(ci) {
		b = append(b, `{"type":"refusal","refusal":"`...)
		b = t.appendTokens(b, from, to)
		return append(b, `"}`...)
	}
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	b = t.appendTokens(b, from, to)
	return append(b, `"}`...)
}

// appendParts appends the message's content parts after n content events: the one part, or
// the output_text part and, once its first token has come, the refusal part.
func (t *responsesTurn) appendParts(b []byte, n int) []byte {
	b = t.appendPart(b, 0, n)
	if t.textThenRefusal() && n > t.refusalFrom {
		b = append(b, ',')
		b = t.appendPart(b, 1, n)
	}
	return b
}

// appendResponse appends the response object in phase; n is the content events sent before a
// failure.
func (t *responsesTurn) appendResponse(b []byte, phase respPhase, n int) []byte {
	req := t.req
	status := "in_progress"
	switch phase {
	case respFinal:
		status = t.status()
	case respFailed:
		status = "failed"
	}
	b = append(b, `{"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":false,"error":`...)
	if phase == respFailed {
		_, code, msg := openAIInBand(t.fault.Status)
		b = append(b, `{"code":`...)
		b = appendString(b, code)
		b = append(b, `,"message":`...)
		b = appendString(b, msg)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if phase == respFinal && t.finish == finishLength {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	b = appendRaw(b, req.Instructions, "null")
	b = append(b, `,"max_output_tokens":`...)
	if req.MaxOutputTokens != nil {
		b = appendInt(b, *req.MaxOutputTokens)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, t.model)
	b = append(b, `,"output":[`...)
	switch phase {
	case respFinal:
		itemStatus := t.status()
		b = t.appendSearchItems(b)
		b = t.appendItem(b, t.contentEvents(), itemStatus)
	case respFailed:
		b = t.appendSearchItems(b)
		b = t.appendItem(b, n, "incomplete")
	}
	b = append(b, `],"parallel_tool_calls":`...)
	b = appendRaw(b, req.ParallelToolCalls, "true")
	b = append(b, `,"previous_response_id":`...)
	b = appendRaw(b, req.PreviousResponseID, "null")
	b = append(b, `,"reasoning":{"effort":null,"summary":null},"service_tier":"`...)
	b = append(b, servedTier(req.ServiceTier)...)
	b = append(b, `","store":`...)
	b = appendRaw(b, req.Store, "true")
	b = append(b, `,"temperature":`...)
	b = appendRaw(b, req.Temperature, "1.0")
	b = append(b, `,"text":`...)
	b = appendRaw(b, req.Text, `{"format":{"type":"text"}}`)
	b = append(b, `,"tool_choice":`...)
	b = appendRaw(b, req.ToolChoice, `"auto"`)
	b = append(b, `,"tools":`...)
	b = appendRaw(b, req.Tools, "[]")
	b = append(b, `,"top_p":`...)
	b = appendRaw(b, req.TopP, "1.0")
	b = append(b, `,"truncation":`...)
	b = appendRaw(b, req.Truncation, `"disabled"`)
	b = append(b, `,"usage":`...)
	if phase == respFinal {
		out := t.outputTokens()
		b = append(b, `{"input_tokens":`...)
		b = appendInt(b, t.input)
		b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
		b = appendInt(b, t.cacheRead)
		b = append(b, `},"output_tokens":`...)
		b = appendInt(b, out)
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
		b = appendInt(b, t.input+out)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"user":null,"metadata":`...)
	b = appendRaw(b, req.Metadata, "{}")
	return append(b, '}')
}

// event begins an event of type typ with its sequence number.
func (t *responsesTurn) event(o *sse, typ string) {
	o.start(typ)
	o.buf = append(o.buf, `{"type":"`...)
	o.buf = append(o.buf, typ...)
	o.buf = append(o.buf, `","sequence_number":`...)
	o.buf = appendInt(o.buf, t.seq)
	t.seq++
}

// itemRef appends "item_id","output_index" (and "content_index" ci for a message's part).
func (t *responsesTurn) itemRef(o *sse, ci int) {
	o.buf = append(o.buf, `,"item_id":`...)
	o.buf = appendString(o.buf, t.itemID)
	o.buf = append(o.buf, `,"output_index":`...)
	o.buf = appendInt(o.buf, t.searches)
	if t.finish != finishTool {
		o.buf = append(o.buf, `,"content_index":`...)
		o.buf = appendInt(o.buf, ci)
	}
}

func (t *responsesTurn) open(o *sse) {
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		t.event(o, typ)
		o.buf = append(o.buf, `,"response":`...)
		o.buf = t.appendResponse(o.buf, respInProgress, 0)
		o.buf = append(o.buf, '}')
		o.end()
	}
	for i := range t.searches {
		t.search(o, i)
	}
	t.event(o, "response.output_item.added")
	o.buf = append(o.buf, `,"output_index":`...)
	o.buf = appendInt(o.buf, t.searches)
	o.buf = append(o.buf, `,"item":`...)
	o.buf = t.appendItem(o.buf, 0, "in_progress")
	o.buf = append(o.buf, '}')
	o.end()
	if t.finish != finishTool && !t.compact {
		t.addPart(o, 0)
	}
}

// addPart writes the response.content_part.added of content part ci.
func (t *responsesTurn) addPart(o *sse, ci int) {
	t.event(o, "response.content_part.added")
	t.itemRef(o, ci)
	o.buf = append(o.buf, `,"part":`...)
	o.buf = t.appendPart(o.buf, ci, 0)
	o.buf = append(o.buf, '}')
	o.end()
}

// closePart writes the events that end content part ci after n content events: its
// response.output_text.done or response.refusal.done, and its response.content_part.done.
func (t *responsesTurn) closePart(o *sse, ci, n int) {
	from, to := t.partTokens(ci, n)
	if t.isRefusalPart(ci) {
		t.event(o, "response.refusal.done")
		t.itemRef(o, ci)
		o.buf = append(o.buf, `,"refusal":"`...)
		o.buf = t.appendTokens(o.buf, from, to)
		o.buf = append(o.buf, `"}`...)
	} else {
		t.event(o, "response.output_text.done")
		t.itemRef(o, ci)
		o.buf = append(o.buf, `,"text":"`...)
		o.buf = t.appendTokens(o.buf, from, to)
		o.buf = append(o.buf, `","logprobs":[]}`...)
	}
	o.end()
	t.event(o, "response.content_part.done")
	t.itemRef(o, ci)
	o.buf = append(o.buf, `,"part":`...)
	o.buf = t.appendPart(o.buf, ci, n)
	o.buf = append(o.buf, '}')
	o.end()
}

// search writes the events of web search i: its item added, in progress, searching,
// completed, and its item done.
func (t *responsesTurn) search(o *sse, i int) {
	item := func(typ string, done bool) {
		t.event(o, typ)
		o.buf = append(o.buf, `,"output_index":`...)
		o.buf = appendInt(o.buf, i)
		o.buf = append(o.buf, `,"item":`...)
		o.buf = t.appendSearchItem(o.buf, i, done)
		o.buf = append(o.buf, '}')
		o.end()
	}
	item("response.output_item.added", false)
	for _, typ := range [...]string{"response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"} {
		t.event(o, typ)
		o.buf = append(o.buf, `,"output_index":`...)
		o.buf = appendInt(o.buf, i)
		o.buf = append(o.buf, `,"item_id":`...)
		o.buf = appendString(o.buf, t.searchIDs[i])
		o.buf = append(o.buf, '}')
		o.end()
	}
	item("response.output_item.done", true)
}

func (t *responsesTurn) content(o *sse, i int) {
	if t.textThenRefusal() && i == t.refusalFrom && !t.compact {
		// The text is done; the refusal's part begins.
		t.closePart(o, 0, i)
		t.addPart(o, 1)
	}
	switch {
	case t.compact:
		return // the summary comes whole, in the item
	case t.noTextDeltas && t.finish != finishTool:
		return // the text comes whole, in the done events (deltas=false)
	case t.finish == finishTool:
		t.event(o, "response.function_call_arguments.delta")
		t.itemRef(o, 0)
		o.buf = append(o.buf, `,"delta":`...)
		o.buf = appendString(o.buf, t.toolFragment(i))
	case t.isRefusalPart(t.partOf(i)):
		t.event(o, "response.refusal.delta")
		t.itemRef(o, t.partOf(i))
		o.buf = append(o.buf, `,"delta":"`...)
		o.buf = t.appendToken(o.buf, i)
		o.buf = append(o.buf, '"')
	default:
		t.event(o, "response.output_text.delta")
		t.itemRef(o, t.partOf(i))
		o.buf = append(o.buf, `,"delta":"`...)
		o.buf = t.appendToken(o.buf, i)
		o.buf = append(o.buf, `","logprobs":[]`...)
	}
	if t.obfuscate {
		o.buf = append(o.buf, `,"obfuscation":`...)
		o.buf = appendObfuscation(o.buf, t.seed, i)
	}
	o.buf = append(o.buf, '}')
	o.end()
}

func (t *responsesTurn) close(o *sse) {
	n := t.contentEvents()
	itemStatus := t.status()
	switch {
	case t.compact:
	case t.finish == finishTool:
		t.event(o, "response.function_call_arguments.done")
		t.itemRef(o, 0)
		o.buf = append(o.buf, `,"name":`...)
		o.buf = appendString(o.buf, t.tool)
		o.buf = t.appendNamespace(o.buf)
		o.buf = append(o.buf, `,"arguments":`...)
		o.buf = appendString(o.buf, t.toolArgs())
		o.buf = append(o.buf, '}')
		o.end()
	default:
		t.closePart(o, t.partOf(max(n-1, 0)), n)
	}
	t.event(o, "response.output_item.done")
	o.buf = append(o.buf, `,"output_index":`...)
	o.buf = appendInt(o.buf, t.searches)
	o.buf = append(o.buf, `,"item":`...)
	o.buf = t.appendItem(o.buf, n, itemStatus)
	o.buf = append(o.buf, '}')
	o.end()
	if itemStatus == "incomplete" {
		t.event(o, "response.incomplete")
	} else {
		t.event(o, "response.completed")
	}
	o.buf = append(o.buf, `,"response":`...)
	o.buf = t.appendResponse(o.buf, respFinal, 0)
	o.buf = append(o.buf, '}')
	o.end()
}

func (t *responsesTurn) fail(o *sse, n int) {
	_, code, msg := openAIInBand(t.fault.Status)
	t.event(o, "error")
	o.buf = append(o.buf, `,"code":`...)
	o.buf = appendString(o.buf, code)
	o.buf = append(o.buf, `,"message":`...)
	o.buf = appendString(o.buf, msg)
	o.buf = append(o.buf, `,"param":null}`...)
	o.end()
	t.event(o, "response.failed")
	o.buf = append(o.buf, `,"response":`...)
	o.buf = t.appendResponse(o.buf, respFailed, n)
	o.buf = append(o.buf, '}')
	o.end()
}

// compactionContent is the encrypted_content of the compaction item that answers a
// compaction_trigger: the summary's text in base64, opaque to the client as OpenAI's is (the
// item of OpenAI's compaction: type compaction, id, encrypted_content; Codex's remote
// compaction asks for it with a compaction_trigger item at the end of the input and takes the
// one compaction item of the answer as the conversation's new start).
func compactionContent(summary []byte) string {
	return base64.StdEncoding.EncodeToString(summary)
}

// compactionText is the summary a compaction item sent back as input holds, counted as input
// as its text; content the simulator did not write counts as it is.
func compactionText(content string) string {
	if b, err := base64.StdEncoding.DecodeString(content); err == nil {
		return string(b)
	}
	return content
}
