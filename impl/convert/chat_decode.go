package convert

import (
	"encoding/json"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// chatFields decodes the modelled fields of a chat completions request.
func (d *decoder) chatFields(raw map[string]json.RawMessage) error {
	r := d.req
	msgs := raw["messages"]
	if isNull(msgs) {
		return apierror.Invalid("messages", "Missing required parameter: 'messages'.")
	}
	arr, err := parseArray(msgs, "messages")
	if err != nil {
		return err
	}
	if len(arr) == 0 {
		return apierror.Invalid("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.")
	}
	for i, m := range arr {
		if err := d.chatMessage(i, m); err != nil {
			return err
		}
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} { // the latter wins
		if v := raw[k]; !isNull(v) {
			if r.MaxTokens, err = parseInt(v, k); err != nil {
				return err
			}
		}
	}
	if err := d.sampling(raw); err != nil {
		return err
	}
	if v := raw["stop"]; !isNull(v) {
		if r.Stop, err = parseStop(v, "stop"); err != nil {
			return err
		}
	}
	if v := raw["tools"]; !isNull(v) {
		if err := d.chatTools(v); err != nil {
			return err
		}
	}
	if v := raw["tool_choice"]; !isNull(v) {
		if err := d.chatToolChoice(v); err != nil {
			return err
		}
	}
	if r.ParallelToolCalls, err = optBoolPtr(raw["parallel_tool_calls"], "parallel_tool_calls"); err != nil {
		return err
	}
	if v := raw["response_format"]; !isNull(v) {
		if err := d.chatResponseFormat(v); err != nil {
			return err
		}
	}
	if v := raw["reasoning_effort"]; !isNull(v) {
		if r.ReasoningEffort, err = parseString(v, "reasoning_effort"); err != nil {
			return err
		}
	}
	if v := raw["verbosity"]; !isNull(v) {
		if r.Verbosity, err = parseString(v, "verbosity"); err != nil {
			return err
		}
	}
	if v := raw["n"]; !isNull(v) {
		if r.N, err = parseInt(v, "n"); err != nil {
			return err
		}
	}
	if v := raw["stream"]; !isNull(v) {
		if r.Stream, err = parseBool(v, "stream"); err != nil {
			return err
		}
	}
	if v := raw["stream_options"]; !isNull(v) {
		so, err := parseObject(v, "stream_options")
		if err != nil {
			return err
		}
		if u := so.get("include_usage"); !isNull(u) {
			if r.IncludeUsage, err = parseBool(u, "stream_options.include_usage"); err != nil {
				return err
			}
		}
	}
	return nil
}

// sampling decodes temperature and top_p, which have the same name and shape in every format.
func (d *decoder) sampling(raw map[string]json.RawMessage) error {
	var err error
	if v := raw["temperature"]; !isNull(v) {
		if d.req.Temperature, err = parseFloat(v, "temperature"); err != nil {
			return err
		}
	}
	if v := raw["top_p"]; !isNull(v) {
		if d.req.TopP, err = parseFloat(v, "top_p"); err != nil {
			return err
		}
	}
	return nil
}

var (
	chatMessageKeys = setOf("role", "content", "tool_calls", "tool_call_id")
	chatNotedKeys   = setOf("audio", "function_call") // noted on their own, as not advisory
	chatTextKeys    = setOf("type", "text")
	chatImageKeys   = setOf("type", "image_url")
	chatImageURL    = setOf("url", "detail")
	chatFileKeys    = setOf("type", "file")
	chatFileData    = setOf("file_data", "filename")
	chatToolCall    = setOf("id", "function")
	chatToolCallIgn = setOf("type", "index")
	chatFunction    = setOf("name", "arguments")
)

// chatAssistantKeys are an assistant message's keys: chatMessageKeys and its refusal;
// chatRefusalKeys are a refusal part's.
var (
	chatAssistantKeys = setOf("role", "content", "tool_calls", "tool_call_id", "refusal")
	chatRefusalKeys   = setOf("type", "refusal")
)

// chatMessage decodes messages[i].
func (d *decoder) chatMessage(i int, raw json.RawMessage) error {
	p := idx("messages", i)
	m, err := parseObject(raw, p)
	if err != nil {
		return err
	}
	if isNull(m.get("role")) {
		return apierror.Invalid(p+".role", "Missing required parameter: '%s.role'.", p)
	}
	role, err := parseString(m.get("role"), p+".role")
	if err != nil {
		return err
	}
	msg := llm.Message{Path: p}
	switch role {
	case "system", "developer":
		parts, err := d.chatContent(m.get("content"), p+".content", role, nil)
		if err != nil {
			return err
		}
		for _, part := range parts {
			d.system = append(d.system, part.Text)
		}
		d.noteKeys(p, m, chatMessageKeys, nil)
		return nil
	case "user":
		msg.Role = llm.RoleUser
	case "assistant":
		msg.Role = llm.RoleAssistant
		if v := m.get("refusal"); !isNull(v) {
			// The model's refusal in an earlier turn, carried where the target has a place for
			// it (chat message.refusal, a Responses refusal part; text for Messages).
			if msg.Refusal, err = parseString(v, p+".refusal"); err != nil {
				return err
			}
		}
		if v := m.get("tool_calls"); !isNull(v) {
			calls, err := parseArray(v, p+".tool_calls")
			if err != nil {
				return err
			}
			for j, c := range calls {
				if err := d.chatToolCall(&msg, idx(p+".tool_calls", j), c); err != nil {
					return err
				}
			}
		}
		for _, k := range []string{"audio", "function_call"} {
			if v := m.get(k); !isNull(v) {
				// A reference to an earlier audio answer, or a legacy function call: the turn
				// would lose content without it.
				d.note(p+"."+k, "", false, v)
			}
		}
	case "tool":
		msg.Role = llm.RoleTool
		if isNull(m.get("tool_call_id")) {
			return apierror.Invalid(p+".tool_call_id", "Missing required parameter: '%s.tool_call_id'.", p)
		}
		if msg.ToolCallID, err = parseString(m.get("tool_call_id"), p+".tool_call_id"); err != nil {
			return err
		}
	case "function":
		d.note(p, "", false, raw) // the legacy function-result role
		return nil
	default:
		return apierror.Invalid(p+".role", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function' and 'developer'.", role)
	}
	parts, err := d.chatContent(m.get("content"), p+".content", role, &msg.Refusal)
	if err != nil {
		return err
	}
	msg.Parts = parts
	known := chatMessageKeys
	if msg.Role == llm.RoleAssistant {
		known = chatAssistantKeys
	}
	d.noteKeys(p, m, known, chatNotedKeys)
	d.req.Messages = append(d.req.Messages, msg)
	return nil
}

// chatContent decodes a message's content: null, a string, or an array of parts. An empty
// string from an assistant gives no part (it is how an assistant turn says "tool calls only").
// An assistant's refusal parts are added to *refusal.
func (d *decoder) chatContent(raw json.RawMessage, p, role string, refusal *string) ([]llm.Part, error) {
	if isNull(raw) {
		return nil, nil
	}
	if firstByte(raw) == '"' {
		s, err := parseString(raw, p)
		if err != nil {
			return nil, err
		}
		if s == "" && role == "assistant" {
			return nil, nil
		}
		return []llm.Part{{Kind: llm.PartText, Text: s, Path: p}}, nil
	}
	arr, err := parseArray(raw, p)
	if err != nil {
		return nil, typeError(p, "a string or an array of content parts")
	}
	var parts []llm.Part
	for j, e := range arr {
		pp := idx(p, j)
		m, err := parseObject(e, pp)
		if err != nil {
			return nil, err
		}
		kind, err := objectKind(m, pp)
		if err != nil {
			return nil, err
		}
		switch {
		case kind == "text":
			text, err := parseString(m.get("text"), pp+".text")
			if err != nil {
				return nil, err
			}
			parts = append(parts, llm.Part{Kind: llm.PartText, Text: text, Path: pp})
			d.noteKeys(pp, m, chatTextKeys, nil)
		case kind == "image_url" && role != "system" && role != "developer":
			part, err := d.chatImage(m.get("image_url"), pp)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
			d.noteKeys(pp, m, chatImageKeys, nil)
		case kind == "file" && role == "user":
			part, ok, err := d.chatFile(m, pp, e)
			if err != nil {
				return nil, err
			}
			if ok {
				parts = append(parts, part)
			}
		case kind == "refusal" && role == "assistant" && refusal != nil:
			text, err := parseString(m.get("refusal"), pp+".refusal")
			if err != nil {
				return nil, err
			}
			*refusal += text // a refusal from an earlier turn
			d.noteKeys(pp, m, chatRefusalKeys, nil)
		case kind == "":
			return nil, apierror.Invalid(pp+".type", "Missing required parameter: '%s.type'.", pp)
		default:
			d.note(pp, "."+kind, false, e) // input_audio, ...
		}
	}
	return parts, nil
}

// chatImage decodes an image_url part's payload: {url, detail?} (a bare URL string is
// accepted too).
func (d *decoder) chatImage(raw json.RawMessage, pp string) (llm.Part, error) {
	p := pp + ".image_url"
	if firstByte(raw) == '"' {
		u, err := parseString(raw, p)
		return imagePart(u, "", pp), err
	}
	m, err := parseObject(raw, p)
	if err != nil {
		return llm.Part{}, err
	}
	if isNull(m.get("url")) {
		return llm.Part{}, apierror.Invalid(p+".url", "Missing required parameter: '%s.url'.", p)
	}
	u, err := parseString(m.get("url"), p+".url")
	if err != nil {
		return llm.Part{}, err
	}
	detail, err := optString(m.get("detail"), p+".detail")
	if err != nil {
		return llm.Part{}, err
	}
	d.noteKeys(p, m, chatImageURL, nil)
	return imagePart(u, detail, pp), nil
}

// chatFile decodes a file part of a user turn; ok is false when it is not an inline document
// (a file_id of OpenAI's Files API, which no other provider can read), which is noted. Inline
// data that is not a base64 data: URL is refused, as OpenAI refuses it (documentPart).
func (d *decoder) chatFile(m jsonObject, pp string, raw json.RawMessage) (llm.Part, bool, error) {
	fp := pp + ".file"
	f, err := parseObject(m.get("file"), fp)
	if err != nil {
		return llm.Part{}, false, err
	}
	fileData, err := optString(f.get("file_data"), fp+".file_data")
	if err != nil {
		return llm.Part{}, false, err
	}
	filename, err := optString(f.get("filename"), fp+".filename")
	if err != nil {
		return llm.Part{}, false, err
	}
	if fileData == "" || !isNull(f.get("file_id")) {
		d.note(pp, ".file", false, raw)
		return llm.Part{}, false, nil
	}
	part, err := documentPart(fileData, filename, pp, fp+".file_data")
	if err != nil {
		return llm.Part{}, false, err
	}
	d.noteKeys(pp, m, chatFileKeys, nil)
	d.noteKeys(fp, f, chatFileData, nil)
	return part, true, nil
}

// chatToolCall decodes one entry of an assistant turn's tool_calls.
func (d *decoder) chatToolCall(msg *llm.Message, p string, raw json.RawMessage) error {
	m, err := parseObject(raw, p)
	if err != nil {
		return err
	}
	kind, err := objectKind(m, p)
	if err != nil {
		return err
	}
	if kind != "" && kind != "function" {
		d.note(p, "."+kind, false, raw) // a custom tool call
		return nil
	}
	call := llm.ToolCall{Path: p}
	if call.ID, err = optString(m.get("id"), p+".id"); err != nil {
		return err
	}
	fn, err := parseObject(m.get("function"), p+".function")
	if err != nil {
		return err
	}
	if call.Name, err = parseString(fn.get("name"), p+".function.name"); err != nil {
		return err
	}
	if call.Arguments, err = optString(fn.get("arguments"), p+".function.arguments"); err != nil {
		return err
	}
	d.noteKeys(p, m, chatToolCall, chatToolCallIgn)
	d.noteKeys(p+".function", fn, chatFunction, nil)
	msg.ToolCalls = append(msg.ToolCalls, call)
	return nil
}

var (
	chatToolKeys     = setOf("type", "function")
	chatFunctionKeys = setOf("name", "description", "parameters", "strict")
)

// chatTools decodes tools: function tools are modelled; other types (custom) are noted.
func (d *decoder) chatTools(raw json.RawMessage) error {
	arr, err := parseArray(raw, "tools")
	if err != nil {
		return err
	}
	for i, e := range arr {
		p := idx("tools", i)
		m, err := parseObject(e, p)
		if err != nil {
			return err
		}
		kind, err := objectKind(m, p)
		if err != nil {
			return err
		}
		if kind != "function" {
			// Custom tools: no other format can express them, and leaving a tool out only
			// narrows what the model may do (a tool_choice forcing one is refused).
			d.note(p, "."+kind, true, e)
			continue
		}
		fn, err := parseObject(m.get("function"), p+".function")
		if err != nil {
			return err
		}
		t, err := functionTool(fn, p+".function", "parameters")
		if err != nil {
			return err
		}
		d.noteKeys(p, m, chatToolKeys, nil)
		d.noteKeys(p+".function", fn, chatFunctionKeys, nil)
		d.req.Tools = append(d.req.Tools, t)
	}
	return nil
}

// functionTool decodes the name, description, schema (under schemaKey) and strict of a
// function tool object.
func functionTool(m jsonObject, p, schemaKey string) (llm.Tool, error) {
	var t llm.Tool
	var err error
	if isNull(m.get("name")) {
		return t, apierror.Invalid(p+".name", "Missing required parameter: '%s.name'.", p)
	}
	if t.Name, err = parseString(m.get("name"), p+".name"); err != nil {
		return t, err
	}
	if t.Description, err = optString(m.get("description"), p+".description"); err != nil {
		return t, err
	}
	if t.Parameters, err = parseSchema(m.get(schemaKey), p+"."+schemaKey); err != nil {
		return t, err
	}
	if t.Strict, err = optBoolPtr(m.get("strict"), p+".strict"); err != nil {
		return t, err
	}
	return t, nil
}

// chatToolChoice decodes tool_choice: "none", "auto", "required" or {type:"function",
// function:{name}}; other forms (allowed_tools, custom) are noted.
func (d *decoder) chatToolChoice(raw json.RawMessage) error {
	return d.openAIToolChoice(raw, true)
}

// openAIToolChoice decodes the tool choice of both OpenAI formats: "none", "auto", "required",
// or an object naming a function, under "function" (chat completions, nested) or at the top
// (Responses).
func (d *decoder) openAIToolChoice(raw json.RawMessage, nested bool) error {
	if firstByte(raw) == '"' {
		s, _ := parseString(raw, "tool_choice")
		mode, ok := map[string]llm.ToolChoiceMode{"none": llm.ToolChoiceNone, "auto": llm.ToolChoiceAuto, "required": llm.ToolChoiceRequired}[s]
		if !ok {
			return apierror.Invalid("tool_choice", "Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s)
		}
		d.req.ToolChoice = &llm.ToolChoice{Mode: mode}
		return nil
	}
	m, err := parseObject(raw, "tool_choice")
	if err != nil {
		return typeError("tool_choice", "a string or an object")
	}
	kind, err := objectKind(m, "tool_choice")
	if err != nil {
		return err
	}
	if kind != "function" {
		d.note("tool_choice", "."+kind, false, raw)
		return nil
	}
	holder, path := m, "tool_choice.name"
	if nested {
		if holder, err = parseObject(m.get("function"), "tool_choice.function"); err != nil {
			return err
		}
		path = "tool_choice.function.name"
	}
	name, err := parseString(holder.get("name"), path)
	if err != nil {
		return err
	}
	d.req.ToolChoice = &llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: name}
	return nil
}

var chatSchemaKeys = setOf("name", "description", "schema", "strict")

// chatResponseFormat decodes response_format.
func (d *decoder) chatResponseFormat(raw json.RawMessage) error {
	m, err := parseObject(raw, "response_format")
	if err != nil {
		return err
	}
	kind, err := objectKind(m, "response_format")
	if err != nil {
		return err
	}
	switch kind {
	case "text", "json_object":
		d.req.ResponseFormat = &llm.ResponseFormat{Type: kind}
	case "json_schema":
		js, err := parseObject(m.get("json_schema"), "response_format.json_schema")
		if err != nil {
			return err
		}
		rf, err := schemaFormat(js, "response_format.json_schema")
		if err != nil {
			return err
		}
		d.noteKeys("response_format.json_schema", js, chatSchemaKeys, nil)
		d.req.ResponseFormat = rf
	default:
		d.note("response_format", "."+kind, false, raw)
	}
	return nil
}

// schemaFormat decodes the name, description, schema and strict of a json_schema format.
func schemaFormat(m jsonObject, p string) (*llm.ResponseFormat, error) {
	rf := &llm.ResponseFormat{Type: "json_schema"}
	var err error
	if rf.Name, err = optString(m.get("name"), p+".name"); err != nil {
		return nil, err
	}
	if rf.Description, err = optString(m.get("description"), p+".description"); err != nil {
		return nil, err
	}
	if rf.Schema, err = parseSchema(m.get("schema"), p+".schema"); err != nil {
		return nil, err
	}
	if rf.Strict, err = optBoolPtr(m.get("strict"), p+".strict"); err != nil {
		return nil, err
	}
	return rf, nil
}
