package convert

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// messagesFields decodes the modelled fields of an Anthropic Messages request.
func (d *decoder) messagesFields(raw map[string]json.RawMessage) error {
	r := d.req
	var err error
	if v := raw["system"]; !isNull(v) {
		if err := d.messagesSystem(v); err != nil {
			return err
		}
	}
	msgs := raw["messages"]
	if isNull(msgs) {
		return apierror.Invalid("messages", "messages: Field required")
	}
	arr, err := parseArray(msgs, "messages")
	if err != nil {
		return err
	}
	for i, m := range arr {
		if err := d.messagesMessage(i, m); err != nil {
			return err
		}
	}
	switch {
	case !isNull(raw["max_tokens"]):
		if r.MaxTokens, err = parseInt(raw["max_tokens"], "max_tokens"); err != nil {
			return err
		}
	case !d.boundOptional:
		return apierror.Invalid("max_tokens", "max_tokens: Field required")
	}
	if err := d.sampling(raw); err != nil {
		return err
	}
	if v := raw["stop_sequences"]; !isNull(v) {
		if r.Stop, err = parseStop(v, "stop_sequences"); err != nil {
			return err
		}
	}
	if v := raw["tools"]; !isNull(v) {
		if err := d.messagesTools(v); err != nil {
			return err
		}
	}
	if v := raw["tool_choice"]; !isNull(v) {
		if err := d.messagesToolChoice(v); err != nil {
			return err
		}
	}
	if v := raw["stream"]; !isNull(v) {
		if r.Stream, err = parseBool(v, "stream"); err != nil {
			return err
		}
	}
	return d.messagesOutputFormat(raw["output_format"], raw["output_config"])
}

var (
	messagesOutputConfigKeys = setOf("format")
	messagesFormatKeys       = setOf("type", "schema")
)

// messagesOutputFormat decodes the structured output a Messages request asks for, Anthropic's
// {"type": "json_schema", "schema": …} in the beta's output_format or else in
// output_config.format (as RequestedOutputType reads them), into a json_schema ResponseFormat
// named "response" (the OpenAI formats need a name; Anthropic's has none). The other members
// of output_config (effort) are advisory; a format of another type cannot be carried.
func (d *decoder) messagesOutputFormat(outputFormat, outputConfig json.RawMessage) error {
	format, param := outputFormat, "output_format"
	if !isNull(outputConfig) {
		oc, err := parseObject(outputConfig, "output_config")
		if err != nil {
			return err
		}
		d.noteKeys("output_config", oc, messagesOutputConfigKeys, nil)
		if isNull(format) {
			format, param = oc.get("format"), "output_config.format"
		}
	}
	if isNull(format) {
		return nil
	}
	m, err := parseObject(format, param)
	if err != nil {
		return err
	}
	kind, err := objectKind(m, param)
	if err != nil {
		return err
	}
	if kind != "json_schema" {
		d.note(param, "."+kind, false, format)
		return nil
	}
	schema, err := parseSchema(m.get("schema"), param+".schema")
	if err != nil {
		return err
	}
	d.noteKeys(param, m, messagesFormatKeys, nil)
	d.req.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: "response", Schema: schema}
	return nil
}

var messagesTextKeys = setOf("type", "text")

// messagesSystem decodes system: a string or an array of text blocks.
func (d *decoder) messagesSystem(raw json.RawMessage) error {
	return d.systemText(raw, "system")
}

// systemText decodes system text at param (the top-level system, or the content of a system
// message): a string or an array of text blocks, added to the request's system text.
func (d *decoder) systemText(raw json.RawMessage, param string) error {
	if firstByte(raw) == '"' {
		s, _ := parseString(raw, param)
		if s != "" {
			d.system = append(d.system, s)
		}
		return nil
	}
	arr, err := parseArray(raw, param)
	if err != nil {
		return typeError(param, "a string or an array of text blocks")
	}
	for i, e := range arr {
		p := idx(param, i)
		m, err := parseObject(e, p)
		if err != nil {
			return err
		}
		kind, err := objectKind(m, p)
		if err != nil {
			return err
		}
		if kind != "text" {
			return apierror.Invalid(p+".type", "%s: Input tag '%s' found using 'type' does not match the expected tag 'text'", param, kind)
		}
		text, err := parseString(m.get("text"), p+".text")
		if err != nil {
			return err
		}
		d.system = append(d.system, text)
		d.noteKeys(p, m, messagesTextKeys, nil)
	}
	return nil
}

var (
	messagesMessageKeys = setOf("role", "content")
	messagesImageKeys   = setOf("type", "source")
	messagesToolUseKeys = setOf("type", "id", "name", "input")
	messagesResultKeys  = setOf("type", "tool_use_id", "content", "is_error")
)

// messagesMessage decodes messages[i]. A user turn's tool_result blocks become RoleTool
// messages (in place, so the order of results and text is kept).
func (d *decoder) messagesMessage(i int, raw json.RawMessage) error {
	p := idx("messages", i)
	m, err := parseObject(raw, p)
	if err != nil {
		return err
	}
	role, err := parseString(m.get("role"), p+".role")
	if err != nil {
		return err
	}
	d.noteKeys(p, m, messagesMessageKeys, nil)
	switch role {
	case "user", "assistant":
	case "system":
		// Claude Code puts its environment notes in a system message inside messages, which
		// the Messages API takes as more system text; other formats get it with the system
		// prompt, where their own system messages go too.
		return d.systemText(m.get("content"), p+".content")
	default:
		return apierror.Invalid(p+".role", "messages.%d.role: Input should be 'user', 'assistant' or 'system'", i)
	}
	cp := p + ".content"
	c := m.get("content")
	if firstByte(c) == '"' {
		s, _ := parseString(c, cp)
		msg := llm.Message{Role: llm.Role(role), Path: p}
		if s != "" || role == "user" {
			msg.Parts = []llm.Part{{Kind: llm.PartText, Text: s, Path: cp}}
		}
		d.req.Messages = append(d.req.Messages, msg)
		return nil
	}
	blocks, err := parseArray(c, cp)
	if err != nil {
		return typeError(cp, "a string or an array of content blocks")
	}
	cur := llm.Message{Role: llm.Role(role), Path: p}
	flush := func() {
		if len(cur.Parts) > 0 || len(cur.ToolCalls) > 0 {
			d.req.Messages = append(d.req.Messages, cur)
		}
		cur = llm.Message{Role: llm.Role(role), Path: p}
	}
	for j, e := range blocks {
		bp := idx(cp, j)
		b, err := parseObject(e, bp)
		if err != nil {
			return err
		}
		kind, err := objectKind(b, bp)
		if err != nil {
			return err
		}
		switch {
		case kind == "text":
			text, err := parseString(b.get("text"), bp+".text")
			if err != nil {
				return err
			}
			cur.Parts = append(cur.Parts, llm.Part{Kind: llm.PartText, Text: text, Path: bp})
			d.noteKeys(bp, b, messagesTextKeys, nil)
		case kind == "image":
			part, ok, err := d.messagesImage(b, bp, e)
			if err != nil {
				return err
			}
			if ok {
				cur.Parts = append(cur.Parts, part)
			}
		case kind == "document" && role == "user":
			part, ok, err := d.messagesDocument(b, bp, e)
			if err != nil {
				return err
			}
			if ok {
				cur.Parts = append(cur.Parts, part)
			}
		case kind == "tool_use" && role == "assistant":
			call := llm.ToolCall{Path: bp}
			if call.ID, err = parseString(b.get("id"), bp+".id"); err != nil {
				return err
			}
			if call.Name, err = parseString(b.get("name"), bp+".name"); err != nil {
				return err
			}
			in := b.get("input")
			if isNull(in) {
				call.Arguments = "{}"
			} else if firstByte(in) != '{' {
				return typeError(bp+".input", "an object")
			} else {
				var buf bytes.Buffer
				if err := json.Compact(&buf, in); err != nil {
					return typeError(bp+".input", "an object")
				}
				call.Arguments = buf.String()
			}
			cur.ToolCalls = append(cur.ToolCalls, call)
			d.noteKeys(bp, b, messagesToolUseKeys, nil)
		case kind == "tool_result" && role == "user":
			flush()
			res, err := d.messagesToolResult(b, bp)
			if err != nil {
				return err
			}
			d.req.Messages = append(d.req.Messages, res)
		case (kind == "thinking" || kind == "redacted_thinking") && role == "assistant":
			d.note(bp, "."+kind, true, e)
		case kind == "":
			return apierror.Invalid(bp+".type", "Missing required parameter: '%s.type'.", bp)
		default:
			d.note(bp, "."+kind, false, e) // search_result, server tool blocks, ...
		}
	}
	if len(cur.Parts) > 0 || len(cur.ToolCalls) > 0 || len(blocks) == 0 {
		d.req.Messages = append(d.req.Messages, cur)
	}
	return nil
}

var messagesSourceKeys = setOf("type", "media_type", "data", "url")

// messagesImage decodes an image block; ok is false when its source (a file id) is not
// modelled, which is noted.
func (d *decoder) messagesImage(b jsonObject, bp string, raw json.RawMessage) (llm.Part, bool, error) {
	src, sp, kind, err := messagesSource(b, bp)
	if err != nil {
		return llm.Part{}, false, err
	}
	part := llm.Part{Kind: llm.PartImage, Path: bp}
	switch kind {
	case "base64":
		if err := readBase64Source(src, sp, &part); err != nil {
			return part, false, err
		}
	case "url":
		if part.ImageURL, err = parseString(src.get("url"), sp+".url"); err != nil {
			return part, false, err
		}
	default:
		d.note(bp, ".source."+kind, false, raw)
		return part, false, nil
	}
	d.noteKeys(bp, b, messagesImageKeys, nil)
	d.noteKeys(sp, src, messagesSourceKeys, nil)
	return part, true, nil
}

var (
	messagesDocumentKeys = setOf("type", "source", "title", "context", "citations")
	// messagesDocumentOwn are what a document block says that no other format can: each is
	// noted on its own, as not advisory.
	messagesDocumentOwn = []string{"title", "context", "citations"}
	messagesDocSource   = setOf("type", "media_type", "data")
)

// messagesDocument decodes a document block of a user turn; ok is false when its source is
// not inline base64 data (a URL, a file id, plain text or content blocks), which is noted.
func (d *decoder) messagesDocument(b jsonObject, bp string, raw json.RawMessage) (llm.Part, bool, error) {
	src, sp, kind, err := messagesSource(b, bp)
	if err != nil {
		return llm.Part{}, false, err
	}
	if kind != "base64" {
		d.note(bp, ".document", false, raw)
		return llm.Part{}, false, nil
	}
	part := llm.Part{Kind: llm.PartDocument, Path: bp}
	if err := readBase64Source(src, sp, &part); err != nil {
		return part, false, err
	}
	for _, k := range messagesDocumentOwn {
		if v := b.get(k); !isNull(v) {
			d.note(bp+"."+k, "", false, v)
		}
	}
	d.noteKeys(bp, b, messagesDocumentKeys, nil)
	d.noteKeys(sp, src, messagesDocSource, nil)
	return part, true, nil
}

// messagesSource reads the source object of the image or document block b at bp: the object,
// its path and its type.
func messagesSource(b jsonObject, bp string) (src jsonObject, sp, kind string, err error) {
	sp = bp + ".source"
	if src, err = parseObject(b.get("source"), sp); err != nil {
		return nil, sp, "", err
	}
	kind, err = objectKind(src, sp)
	return src, sp, kind, err
}

// readBase64Source reads a base64 source's media type, in its normal form (normalMediaType:
// "image/PNG" is image/png, which Anthropic requires and a data: URL's reading gives), and data
// (the source src at sp) into part.
func readBase64Source(src jsonObject, sp string, part *llm.Part) (err error) {
	if part.MediaType, err = parseString(src.get("media_type"), sp+".media_type"); err != nil {
		return err
	}
	part.MediaType = normalMediaType(part.MediaType)
	part.Data, err = parseString(src.get("data"), sp+".data")
	return err
}

// messagesToolResult decodes a tool_result block into a RoleTool message.
func (d *decoder) messagesToolResult(b jsonObject, bp string) (llm.Message, error) {
	msg := llm.Message{Role: llm.RoleTool, Path: bp}
	var err error
	if msg.ToolCallID, err = parseString(b.get("tool_use_id"), bp+".tool_use_id"); err != nil {
		return msg, err
	}
	if v := b.get("is_error"); !isNull(v) {
		if msg.IsError, err = parseBool(v, bp+".is_error"); err != nil {
			return msg, err
		}
	}
	d.noteKeys(bp, b, messagesResultKeys, nil)
	cp := bp + ".content"
	c := b.get("content")
	if isNull(c) {
		return msg, nil
	}
	if firstByte(c) == '"' {
		s, _ := parseString(c, cp)
		msg.Parts = []llm.Part{{Kind: llm.PartText, Text: s, Path: cp}}
		return msg, nil
	}
	blocks, err := parseArray(c, cp)
	if err != nil {
		return msg, typeError(cp, "a string or an array of content blocks")
	}
	for j, e := range blocks {
		ip := idx(cp, j)
		ib, err := parseObject(e, ip)
		if err != nil {
			return msg, err
		}
		kind, err := objectKind(ib, ip)
		if err != nil {
			return msg, err
		}
		switch kind {
		case "text":
			text, err := parseString(ib.get("text"), ip+".text")
			if err != nil {
				return msg, err
			}
			msg.Parts = append(msg.Parts, llm.Part{Kind: llm.PartText, Text: text, Path: ip})
			d.noteKeys(ip, ib, messagesTextKeys, nil)
		case "image", "document":
			read := d.messagesImage
			if kind == "document" {
				read = d.messagesDocument
			}
			part, ok, err := read(ib, ip, e)
			if err != nil {
				return msg, err
			}
			if ok {
				msg.Parts = append(msg.Parts, part)
			}
		default:
			d.note(ip, "."+kind, false, e)
		}
	}
	return msg, nil
}

var messagesToolKeys = setOf("name", "description", "input_schema", "strict", "type")

// messagesTools decodes tools: client tools (no type, or type "custom") are modelled; server
// tools (a versioned type such as web_search_20250305) are noted.
func (d *decoder) messagesTools(raw json.RawMessage) error {
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
		if kind != "" && kind != "custom" {
			// Server tools and versioned client tools (computer use, text editor, ...): no
			// other format can express them, and leaving a tool out only narrows what the
			// model may do (a tool_choice forcing one is refused).
			d.note(p, "."+kind, true, e)
			continue
		}
		t, err := functionTool(m, p, "input_schema")
		if err != nil {
			return err
		}
		d.noteKeys(p, m, messagesToolKeys, nil)
		d.req.Tools = append(d.req.Tools, t)
	}
	return nil
}

// messagesToolChoice decodes tool_choice {type: auto|any|none|tool, name?,
// disable_parallel_tool_use?}.
func (d *decoder) messagesToolChoice(raw json.RawMessage) error {
	m, err := parseObject(raw, "tool_choice")
	if err != nil {
		return err
	}
	kind, err := objectKind(m, "tool_choice")
	if err != nil {
		return err
	}
	tc := &llm.ToolChoice{}
	switch kind {
	case "auto":
		tc.Mode = llm.ToolChoiceAuto
	case "any":
		tc.Mode = llm.ToolChoiceRequired
	case "none":
		tc.Mode = llm.ToolChoiceNone
	case "tool":
		tc.Mode = llm.ToolChoiceTool
		if tc.Name, err = parseString(m.get("name"), "tool_choice.name"); err != nil {
			return err
		}
	default:
		return apierror.Invalid("tool_choice.type", "tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", kind)
	}
	d.req.ToolChoice = tc
	if v := m.get("disable_parallel_tool_use"); !isNull(v) {
		dis, err := parseBool(v, "tool_choice.disable_parallel_tool_use")
		if err != nil {
			return err
		}
		d.req.ParallelToolCalls = ptr(!dis)
	}
	d.noteKeys("tool_choice", m, setOf("type", "name", "disable_parallel_tool_use"), nil)
	return nil
}
