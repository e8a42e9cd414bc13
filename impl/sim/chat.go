package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// chatRequest is the part of a chat completions request the simulator reads.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	// PromptCacheKey partitions the prompt cache; PromptCacheRetention "24h" extends the
	// lifetime of the cached prefixes.
	PromptCacheKey       string `json:"prompt_cache_key"`
	PromptCacheRetention string `json:"prompt_cache_retention"`
	// ServiceTier "flex" or "priority" is the tier the answer says it was served on.
	ServiceTier string `json:"service_tier"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// streamOptions is stream_options of the OpenAI routes.
type streamOptions struct {
	IncludeUsage       bool  `json:"include_usage"`
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// chatTurn is a planned chat completions reply.
type chatTurn struct {
	*turn
	id           string
	callID       string
	includeUsage bool
	obfuscate    bool
	head         []byte // every chunk's fields up to "choices":[
	// choices is n: a non-streamed answer has that many identical choices, and its usage
	// counts the output of all of them, as OpenAI's does. A stream always has one.
	choices int
	// tier is the service tier the answer says it was served on (servedTier).
	tier string
}

func (s *Simulator) serveChat(w http.ResponseWriter, r *http.Request, body []byte) {
	var req chatRequest
	decodeErr := json.Unmarshal(body, &req)
	s.record(RouteChat, r, req.Model, body)
	if !s.authorized(w, r, RouteChat) {
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
	switch {
	case req.Model == "":
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "you must provide a model parameter", "", "")
		return
	case req.Messages == nil:
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
		return
	case len(req.Messages) == 0:
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", "empty_array")
		return
	}
	for i, m := range req.Messages {
		if m.Role != "user" && hasImagePart(m.Content) {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid 'messages["+strconv.Itoa(i)+"]'. Image URLs are only allowed for messages with role 'user', but this message with role '"+m.Role+"' contains an image URL.",
				"messages["+strconv.Itoa(i)+"]", "invalid_value")
			return
		}
	}
	if msg, param, code := chatToolRefusal(&req); msg != "" {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", msg, param, code)
		return
	}
	in := planInput{}
	for _, p := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if p.v != nil && *p.v < 1 {
			s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
				"Invalid '"+p.name+"': integer below minimum value. Expected a value >= 1, but got "+strconv.Itoa(*p.v)+" instead.", p.name, "integer_below_min_value")
			return
		}
	}
	switch {
	case req.MaxCompletionTokens != nil:
		in.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		in.maxTokens = *req.MaxTokens
	}

	var c counter
	if len(body) >= stepChars { // a shorter body cannot reach a cache checkpoint
		c.startHash(s.cacheSeed, stepChars, len(body), string(RouteChat), req.Model, account(r, RouteChat), req.PromptCacheKey)
		for _, t := range req.Tools {
			c.mark(t.Type)
			c.mark(t.Function.Name)
			c.mark(t.Function.Description)
			c.markRaw(t.Function.Parameters)
		}
		c.markRaw(req.ResponseFormat)
	}
	var sc scriptScan
	for i, m := range req.Messages {
		c.mark(m.Role)
		text := contentText(m.Content)
		c.add(text)
		for _, tc := range m.ToolCalls {
			c.mark("tool_call")
			c.add(tc.Function.Name)
			c.add(tc.Function.Arguments)
		}
		switch m.Role {
		case "user":
			in.prompt = text
			in.endsWithUser = i == len(req.Messages)-1
			sc.user(text)
		case "tool", "function":
			sc.result(text)
		}
	}
	if in.script = sc.script(); in.script != nil && in.script.err != nil {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", in.script.errorMessage(), "messages", "invalid_sim_script")
		return
	}
	if s, ok := rawString(req.Stop); ok {
		in.stops = []string{s}
	} else if !isNull(req.Stop) {
		_ = json.Unmarshal(req.Stop, &in.stops)
	}
	for _, t := range req.Tools {
		if t.Type == "function" || t.Type == "" {
			in.tools = append(in.tools, toolDef{name: t.Function.Name, schema: t.Function.Parameters})
		}
	}
	if choice, ok := rawString(req.ToolChoice); ok {
		in.choiceNone = choice == "none"
		in.anyTool = choice == "required"
	} else if !isNull(req.ToolChoice) {
		var tc struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(req.ToolChoice, &tc) == nil && tc.Type == "function" {
			in.forced = tc.Function.Name
		}
	}
	in.format = chatOutputFormat(req.ResponseFormat)

	if req.N != nil && (*req.N < 1 || *req.N > 128) {
		s.writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error",
			"Invalid 'n': expected a value between 1 and 128, but got "+strconv.Itoa(*req.N)+" instead.", "n", "invalid_value")
		return
	}
	t := &chatTurn{turn: s.plan(RouteChat, req.Model, req.Stream, c.tokens(), in), choices: 1, tier: servedTier(req.ServiceTier)}
	if req.N != nil && !req.Stream {
		t.choices = *req.N
	}
	status := func(st int) { s.openAIStatus(w, st, req.Model) }
	if s.preFault(w, r, t.turn, status) {
		return
	}
	s.cacheOpenAI(t.turn, c.points, openAIRetentionOf(req.PromptCacheRetention))
	t.id = s.newID("chatcmpl-", 29, false)
	if t.finish == finishTool {
		t.callID = s.newID("call_", 24, false)
	}
	if !req.Stream {
		if !t.wait(r.Context()) {
			return
		}
		s.writeBody(w, t.turn, t.body())
		return
	}
	t.includeUsage = opts.IncludeUsage
	t.obfuscate = opts.IncludeObfuscation == nil || *opts.IncludeObfuscation
	t.head = t.appendHead(make([]byte, 0, 256))
	s.stream(w, r, t.turn, t)
}

// finishReason is the chat finish_reason of the turn.
func (t *chatTurn) finishReason() string {
	switch t.finish {
	case finishLength:
		return "length"
	case finishTool:
		return "tool_calls"
	default:
		return "stop"
	}
}

// appendUsage appends the usage object: prompt_tokens counts every input token, the
// cached_tokens read from the prompt cache included.
func (t *chatTurn) appendUsage(b []byte) []byte {
	out := t.outputTokens() * max(t.choices, 1)
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, t.input)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, out)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, t.input+out)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, t.cacheRead)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return b
}

// body is the non-streaming chat.completion object.
func (t *chatTurn) body() []byte {
	b := make([]byte, 0, 768)
	b = append(b, `{"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, t.model)
	b = append(b, `,"choices":[`...)
	for i := range max(t.choices, 1) {
		if i > 0 {
			b = append(b, `"},`...)
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"message":{"role":"assistant","content":`...)
		if t.finish == finishTool {
			b = append(b, `null,"tool_calls":[{"id":`...)
			b = appendString(b, t.callID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = appendString(b, t.tool)
			b = append(b, `,"arguments":`...)
			b = appendString(b, t.toolArgs())
			b = append(b, `}}]`...)
		} else if t.refusal {
			// As OpenAI answers a refusal: content null (or the text before it), refusal its
			// words, finish_reason stop.
			if t.refusalFrom > 0 {
				b = append(b, '"')
				b = t.appendText(b, t.refusalFrom)
				b = append(b, `","refusal":"`...)
			} else {
				b = append(b, `null,"refusal":"`...)
			}
			for i := t.refusalFrom; i < t.words; i++ {
				b = t.appendToken(b, i)
			}
			b = append(b, '"')
		} else {
			b = append(b, '"')
			b = t.appendText(b, t.words)
			b = append(b, '"')
		}
		if !t.refusal {
			b = append(b, `,"refusal":null`...)
		}
		b = append(b, `,"annotations":[]},"logprobs":null,"finish_reason":"`...)
		b = append(b, t.finishReason()...)
	}
	b = append(b, `"}],"usage":`...)
	b = t.appendUsage(b)
	b = append(b, `,"service_tier":"`...)
	b = append(b, t.tier...)
	b = append(b, `","system_fingerprint":null}`...)
	return append(b, '\n')
}

// appendHead appends the fields every chunk starts with.
func (t *chatTurn) appendHead(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, t.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(b, `,"model":`...)
	b = appendString(b, t.model)
	b = append(b, `,"service_tier":"`...)
	b = append(b, t.tier...)
	return append(b, `","system_fingerprint":null,"choices":[`...)
}

// servedTier is the service tier an OpenAI answer says a request asking for asked was served
// on: flex and priority as asked, priority for fast (OpenAI's name for it since 2026-07-30,
// whose answers say "priority" for either), the default tier otherwise (OpenAI answers
// "default" for "auto" on a project without Scale Tier).
func servedTier(asked string) string {
	switch asked {
	case "flex", "priority":
		return asked
	case "fast":
		return "priority"
	}
	return "default"
}

// startChunk begins a chunk with one choice whose delta follows.
func (t *chatTurn) startChunk(o *sse) {
	o.start("")
	o.buf = append(o.buf, t.head...)
	o.buf = append(o.buf, `{"index":0,"delta":`...)
}

// endChunk finishes a chunk begun by startChunk.
func (t *chatTurn) endChunk(o *sse, finishReason string, obfuscate int) {
	o.buf = append(o.buf, `,"logprobs":null,"finish_reason":`...)
	o.buf = appendNullable(o.buf, finishReason)
	o.buf = append(o.buf, "}]"...)
	if t.includeUsage {
		o.buf = append(o.buf, `,"usage":null`...)
	}
	if obfuscate >= 0 && t.obfuscate {
		o.buf = append(o.buf, `,"obfuscation":`...)
		o.buf = appendObfuscation(o.buf, t.seed, obfuscate)
	}
	o.buf = append(o.buf, '}')
	o.end()
}

func (t *chatTurn) open(o *sse) {
	t.startChunk(o)
	if t.finish == finishTool {
		o.buf = append(o.buf, `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":`...)
		o.buf = appendString(o.buf, t.callID)
		o.buf = append(o.buf, `,"type":"function","function":{"name":`...)
		o.buf = appendString(o.buf, t.tool)
		o.buf = append(o.buf, `,"arguments":""}}],"refusal":null}`...)
	} else if t.refusal && t.refusalFrom == 0 {
		o.buf = append(o.buf, `{"role":"assistant","content":null,"refusal":""}`...)
	} else {
		o.buf = append(o.buf, `{"role":"assistant","content":"","refusal":null}`...)
	}
	t.endChunk(o, "", -1)
}

func (t *chatTurn) content(o *sse, i int) {
	t.startChunk(o)
	if t.finish == finishTool {
		o.buf = append(o.buf, `{"tool_calls":[{"index":0,"function":{"arguments":`...)
		o.buf = appendString(o.buf, t.toolFragment(i))
		o.buf = append(o.buf, `}}]}`...)
	} else {
		if t.refusal && i >= t.refusalFrom {
			o.buf = append(o.buf, `{"refusal":"`...)
		} else {
			o.buf = append(o.buf, `{"content":"`...)
		}
		o.buf = t.appendToken(o.buf, i)
		o.buf = append(o.buf, `"}`...)
	}
	t.endChunk(o, "", i)
}

func (t *chatTurn) close(o *sse) {
	t.startChunk(o)
	o.buf = append(o.buf, "{}"...)
	t.endChunk(o, t.finishReason(), -1)
	if t.includeUsage {
		o.start("")
		o.buf = append(o.buf, t.head[:len(t.head)-1]...) // up to "choices":
		o.buf = append(o.buf, `[],"usage":`...)
		o.buf = t.appendUsage(o.buf)
		o.buf = append(o.buf, '}')
		o.end()
	}
	o.start("")
	o.buf = append(o.buf, "[DONE]"...)
	o.end()
}

func (t *chatTurn) fail(o *sse, _ int) {
	typ, code, msg := openAIInBand(t.fault.Status)
	o.start("")
	o.buf = appendOpenAIError(o.buf, typ, msg, "", code)
	o.end()
}

// hasImagePart reports whether a chat message's content is an array holding an image_url
// part, which the API takes in a user message alone.
func hasImagePart(content json.RawMessage) bool {
	var parts []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(content, &parts) != nil {
		return false
	}
	for _, p := range parts {
		if p.Type == "image_url" {
			return true
		}
	}
	return false
}

// chatToolRefusal is the chat completions API's refusal of a request's tools and tool history
// (its message, param and code), "" when it takes them: a function name it does not take (of a
// tool, or of a call in the history: toolnames.go), and a tool result whose tool_call_id an
// earlier one has ("Invalid parameter: Duplicate value for 'tool_call_id' of 'call_…' in
// messages[7] and messages[8].", param messages.[8].tool_call_id and no code,
// agno-agi/agno#5116).
func chatToolRefusal(req *chatRequest) (msg, param, code string) {
	for i, t := range req.Tools {
		if t.Type != "function" && t.Type != "" {
			continue
		}
		param = "tools[" + strconv.Itoa(i) + "].function.name"
		if msg, code = openAIToolNameRefusal(param, t.Function.Name); msg != "" {
			return msg, param, code
		}
	}
	var answered map[string]int // the message of each tool_call_id answered so far
	for i, m := range req.Messages {
		for j, c := range m.ToolCalls {
			param = "messages[" + strconv.Itoa(i) + "].tool_calls[" + strconv.Itoa(j) + "].function.name"
			if msg, code = openAIToolNameRefusal(param, c.Function.Name); msg != "" {
				return msg, param, code
			}
		}
		if m.Role != "tool" {
			continue
		}
		if first, ok := answered[m.ToolCallID]; ok {
			return "Invalid parameter: Duplicate value for 'tool_call_id' of '" + m.ToolCallID + "' in messages[" + strconv.Itoa(first) +
				"] and messages[" + strconv.Itoa(i) + "].", "messages.[" + strconv.Itoa(i) + "].tool_call_id", ""
		}
		if answered == nil {
			answered = map[string]int{}
		}
		answered[m.ToolCallID] = i
	}
	return "", "", ""
}
