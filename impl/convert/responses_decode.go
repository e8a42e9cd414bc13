package convert

import (
	"encoding/json"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// responsesFields decodes the modelled fields of a Responses request.
func (d *decoder) responsesFields(raw map[string]json.RawMessage) error {
	r := d.req
	var err error
	if v := raw["instructions"]; !isNull(v) {
		s, err := parseString(v, "instructions")
		if err != nil {
			return err
		}
		if s != "" {
			d.system = append(d.system, s)
		}
	}
	if v := raw["input"]; !isNull(v) {
		if err := d.responsesInput(v); err != nil {
			return err
		}
	}
	if v := raw["max_output_tokens"]; !isNull(v) {
		if r.MaxTokens, err = parseInt(v, "max_output_tokens"); err != nil {
			return err
		}
	}
	if err := d.sampling(raw); err != nil {
		return err
	}
	if v := raw["tools"]; !isNull(v) {
		if err := d.responsesTools(v); err != nil {
			return err
		}
	}
	if v := raw["tool_choice"]; !isNull(v) {
		if err := d.responsesToolChoice(v); err != nil {
			return err
		}
	}
	if r.ParallelToolCalls, err = optBoolPtr(raw["parallel_tool_calls"], "parallel_tool_calls"); err != nil {
		return err
	}
	if v := raw["text"]; !isNull(v) {
		if err := d.responsesText(v); err != nil {
			return err
		}
	}
	if v := raw["reasoning"]; !isNull(v) {
		if err := d.responsesReasoning(v); err != nil {
			return err
		}
	}
	if v := raw["stream"]; !isNull(v) {
		if r.Stream, err = parseBool(v, "stream"); err != nil {
			return err
		}
	}
	return nil
}

var (
	// Item bookkeeping that only the Responses API itself uses.
	responsesItemIgnored = setOf("type", "id", "status")
	responsesMessageKeys = setOf("role", "content")
	responsesCallKeys    = setOf("call_id", "name", "arguments")
	responsesOutputKeys  = setOf("call_id", "output")
	responsesTextKeys    = setOf("type", "text")
	responsesRefusalKeys = setOf("type", "refusal")
	responsesOutTextIgn  = setOf("annotations", "logprobs")
	responsesImageKeys   = setOf("type", "image_url", "detail")
	responsesFileKeys    = setOf("type", "file_data", "filename")
)

// responsesInput decodes input: a string (one user message) or an array of items.
func (d *decoder) responsesInput(raw json.RawMessage) error {
	if firstByte(raw) == '"' {
		s, err := parseString(raw, "input")
		if err != nil {
			return err
		}
		d.req.Messages = append(d.req.Messages, llm.Message{Role: llm.RoleUser, Path: "input",
			Parts: []llm.Part{{Kind: llm.PartText, Text: s, Path: "input"}}})
		return nil
	}
	items, err := parseArray(raw, "input")
	if err != nil {
		return typeError("input", "a string or an array of input items")
	}
	for i, e := range items {
		if err := d.responsesItem(idx("input", i), e); err != nil {
			return err
		}
	}
	return nil
}

// responsesItem decodes one input item.
func (d *decoder) responsesItem(p string, raw json.RawMessage) error {
	m, err := parseObject(raw, p)
	if err != nil {
		return err
	}
	kind, err := objectKind(m, p)
	if err != nil {
		return err
	}
	if kind == "" && !isNull(m.get("role")) {
		kind = "message"
	}
	switch kind {
	case "message":
		return d.responsesMessage(p, m)
	case "function_call":
		call := llm.ToolCall{Path: p}
		if call.ID, err = parseString(m.get("call_id"), p+".call_id"); err != nil {
			return err
		}
		if call.Name, err = parseString(m.get("name"), p+".name"); err != nil {
			return err
		}
		if call.Arguments, err = optString(m.get("arguments"), p+".arguments"); err != nil {
			return err
		}
		d.noteKeys(p, m, responsesCallKeys, responsesItemIgnored)
		// A call joins the assistant turn before it, if any.
		ms := d.req.Messages
		if n := len(ms); n > 0 && ms[n-1].Role == llm.RoleAssistant {
			ms[n-1].ToolCalls = append(ms[n-1].ToolCalls, call)
		} else {
			d.req.Messages = append(ms, llm.Message{Role: llm.RoleAssistant, Path: p, ToolCalls: []llm.ToolCall{call}})
		}
		return nil
	case "function_call_output":
		msg := llm.Message{Role: llm.RoleTool, Path: p}
		if msg.ToolCallID, err = parseString(m.get("call_id"), p+".call_id"); err != nil {
			return err
		}
		out := m.get("output")
		if firstByte(out) == '"' {
			s, _ := parseString(out, p+".output")
			msg.Parts = []llm.Part{{Kind: llm.PartText, Text: s, Path: p + ".output"}}
		} else if !isNull(out) {
			if msg.Parts, err = d.responsesParts(out, p+".output", "user", nil); err != nil {
				return err
			}
		}
		d.noteKeys(p, m, responsesOutputKeys, responsesItemIgnored)
		d.req.Messages = append(d.req.Messages, msg)
		return nil
	case "reasoning":
		d.note(p, ".reasoning", true, raw)
		return nil
	case "":
		return apierror.Invalid(p+".type", "Missing required parameter: '%s.type'.", p)
	default:
		// item_reference and the items of built-in tools have no equivalent elsewhere.
		d.note(p, "."+kind, false, raw)
		return nil
	}
}

// responsesMessage decodes a message item.
func (d *decoder) responsesMessage(p string, m jsonObject) error {
	role, err := parseString(m.get("role"), p+".role")
	if err != nil {
		return err
	}
	switch role {
	case "system", "developer", "user", "assistant":
	default:
		return apierror.Invalid(p+".role", "Invalid value: '%s'. Supported values are: 'user', 'assistant', 'system', and 'developer'.", role)
	}
	var parts []llm.Part
	var refusal string
	c := m.get("content")
	if firstByte(c) == '"' {
		s, _ := parseString(c, p+".content")
		parts = []llm.Part{{Kind: llm.PartText, Text: s, Path: p + ".content"}}
	} else if !isNull(c) {
		if parts, err = d.responsesParts(c, p+".content", role, &refusal); err != nil {
			return err
		}
	}
	d.noteKeys(p, m, responsesMessageKeys, responsesItemIgnored)
	switch role {
	case "system", "developer":
		for _, part := range parts {
			if part.Kind == llm.PartText {
				d.system = append(d.system, part.Text)
			} else {
				d.note(part.Path, "", false, nil)
			}
		}
	case "user":
		d.req.Messages = append(d.req.Messages, llm.Message{Role: llm.RoleUser, Parts: parts, Path: p})
	case "assistant":
		d.req.Messages = append(d.req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: parts, Refusal: refusal, Path: p})
	}
	return nil
}

// responsesParts decodes an array of content parts (of a message, or of a function call's
// output). An assistant's refusal parts are added to *refusal.
func (d *decoder) responsesParts(raw json.RawMessage, p, role string, refusal *string) ([]llm.Part, error) {
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
		switch kind {
		case "input_text", "output_text":
			text, err := parseString(m.get("text"), pp+".text")
			if err != nil {
				return nil, err
			}
			parts = append(parts, llm.Part{Kind: llm.PartText, Text: text, Path: pp})
			d.noteKeys(pp, m, responsesTextKeys, responsesOutTextIgn)
		case "input_image":
			if isNull(m.get("image_url")) { // a file_id image
				d.note(pp, ".file_id", false, e)
				continue
			}
			u, err := parseString(m.get("image_url"), pp+".image_url")
			if err != nil {
				return nil, err
			}
			detail, err := optString(m.get("detail"), pp+".detail")
			if err != nil {
				return nil, err
			}
			parts = append(parts, imagePart(u, detail, pp))
			d.noteKeys(pp, m, responsesImageKeys, nil)
		case "input_file":
			part, ok, err := d.responsesFile(m, pp, e)
			if err != nil {
				return nil, err
			}
			if ok {
				parts = append(parts, part)
			}
		case "refusal":
			if role != "assistant" || refusal == nil {
				d.note(pp, ".refusal", false, e)
				continue
			}
			// A refusal from an earlier turn, carried where the target has a place for it.
			text, err := parseString(m.get("refusal"), pp+".refusal")
			if err != nil {
				return nil, err
			}
			*refusal += text
			d.noteKeys(pp, m, responsesRefusalKeys, nil)
		case "":
			return nil, apierror.Invalid(pp+".type", "Missing required parameter: '%s.type'.", pp)
		default:
			d.note(pp, "."+kind, false, e) // input_audio, ...
		}
	}
	return parts, nil
}

// responsesFile decodes an input_file part; ok is false when it is not an inline document (a
// file_id of OpenAI's Files API or a file_url), which is noted. Inline data that is not a
// base64 data: URL is refused, as OpenAI refuses it (documentPart).
func (d *decoder) responsesFile(m jsonObject, pp string, raw json.RawMessage) (llm.Part, bool, error) {
	fileData, err := optString(m.get("file_data"), pp+".file_data")
	if err != nil {
		return llm.Part{}, false, err
	}
	filename, err := optString(m.get("filename"), pp+".filename")
	if err != nil {
		return llm.Part{}, false, err
	}
	if fileData == "" || !isNull(m.get("file_id")) || !isNull(m.get("file_url")) {
		d.note(pp, ".input_file", false, raw)
		return llm.Part{}, false, nil
	}
	part, err := documentPart(fileData, filename, pp, pp+".file_data")
	if err != nil {
		return llm.Part{}, false, err
	}
	d.noteKeys(pp, m, responsesFileKeys, nil)
	return part, true, nil
}

var responsesToolKeys = setOf("type", "name", "description", "parameters", "strict")

// responsesTools decodes tools: function tools (flat) are modelled; built-in tools are noted.
func (d *decoder) responsesTools(raw json.RawMessage) error {
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
			// Built-in and hosted tools, namespaces, custom tools: no other format can
			// express them, and leaving a tool out only narrows what the model may do (a
			// tool_choice forcing one is refused).
			d.note(p, "."+kind, true, e)
			continue
		}
		t, err := functionTool(m, p, "parameters")
		if err != nil {
			return err
		}
		if t.Strict == nil { // the Responses API defaults strict to true
			t.Strict = ptr(true)
		}
		d.noteKeys(p, m, responsesToolKeys, nil)
		d.req.Tools = append(d.req.Tools, t)
	}
	return nil
}

// responsesToolChoice decodes tool_choice: "none", "auto", "required" or {type:"function",
// name}; the other forms (allowed_tools, built-in tools, mcp, custom) are noted.
func (d *decoder) responsesToolChoice(raw json.RawMessage) error {
	return d.openAIToolChoice(raw, false)
}

var (
	responsesTextConfig    = setOf("format", "verbosity")
	responsesReasoningKeys = setOf("effort")
	responsesFormatKeys    = setOf("type", "name", "description", "schema", "strict")
)

// responsesText decodes text: {format, verbosity?}.
func (d *decoder) responsesText(raw json.RawMessage) error {
	m, err := parseObject(raw, "text")
	if err != nil {
		return err
	}
	d.noteKeys("text", m, responsesTextConfig, nil)
	if v := m.get("verbosity"); !isNull(v) {
		if d.req.Verbosity, err = parseString(v, "text.verbosity"); err != nil {
			return err
		}
	}
	if isNull(m.get("format")) {
		return nil
	}
	f, err := parseObject(m.get("format"), "text.format")
	if err != nil {
		return err
	}
	kind, err := objectKind(f, "text.format")
	if err != nil {
		return err
	}
	switch kind {
	case "text", "json_object":
		d.req.ResponseFormat = &llm.ResponseFormat{Type: kind}
	case "json_schema":
		rf, err := schemaFormat(f, "text.format")
		if err != nil {
			return err
		}
		d.noteKeys("text.format", f, responsesFormatKeys, nil)
		d.req.ResponseFormat = rf
	default:
		d.note("text.format", "."+kind, false, m.get("format"))
	}
	return nil
}

// responsesReasoning decodes reasoning: {effort?, summary?}. The effort is modelled; the
// summary (reasoning text the OpenAI chat and Messages formats do not return) is advisory.
func (d *decoder) responsesReasoning(raw json.RawMessage) error {
	m, err := parseObject(raw, "reasoning")
	if err != nil {
		return err
	}
	d.noteKeys("reasoning", m, responsesReasoningKeys, nil)
	if v := m.get("effort"); !isNull(v) {
		if d.req.ReasoningEffort, err = parseString(v, "reasoning.effort"); err != nil {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
