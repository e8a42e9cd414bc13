package convert

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/impl/llm"
)

// chatStopLimit is the most stop sequences the chat completions API accepts.
const chatStopLimit = 4

// chatMessages writes messages: the system text first, then the turns.
func (w *writer) chatMessages(o *object) error {
	var out []any
	var moved []llm.Part // images of the tool results since the last message that was no tool result
	if s := w.req.System; s != "" {
		out = append(out, object{{"role", "system"}, {"content", s}})
	}
	for i, m := range w.req.Messages {
		switch m.Role {
		case llm.RoleUser:
			out = append(out, object{{"role", "user"}, {"content", chatContent(m.Parts)}})
		case llm.RoleAssistant:
			texts, err := w.textOnly(m.Parts, "an assistant turn")
			if err != nil {
				return err
			}
			if len(texts) == 0 && len(m.ToolCalls) == 0 && m.Refusal == "" && w.cross() {
				continue // nothing left (e.g. only thinking blocks); the API rejects an empty turn
			}
			mo := object{{"role", "assistant"}}
			if len(texts) == 0 {
				mo.set("content", nil)
			} else {
				mo.set("content", chatContent(texts))
			}
			if m.Refusal != "" {
				mo.set("refusal", m.Refusal)
			}
			if len(m.ToolCalls) > 0 {
				calls := make([]any, 0, len(m.ToolCalls))
				for j, c := range m.ToolCalls {
					calls = append(calls, object{{"id", w.callID(i, j, c.ID)}, {"type", "function"},
						{"function", object{{"name", c.Name}, {"arguments", c.Arguments}}}})
				}
				mo.set("tool_calls", calls)
			}
			out = append(out, mo)
		case llm.RoleTool:
			texts, images, err := w.toolResultParts(m.Parts)
			if err != nil {
				return err
			}
			w.dropIsError(m)
			out = append(out, object{{"role", "tool"}, {"tool_call_id", w.resultID(i, m.ToolCallID)}, {"content", chatContent(texts)}})
			moved = append(moved, images...)
			if next := i + 1; len(moved) > 0 && (next == len(w.req.Messages) || w.req.Messages[next].Role != llm.RoleTool) {
				out = append(out, object{{"role", "user"}, {"content", chatContent(moved)}})
				moved = nil
			}
		default:
			return fmt.Errorf("convert: messages[%d] has unknown role %q", i, m.Role)
		}
	}
	o.set("messages", out)
	return nil
}

// textOnly returns the text parts, refusing any other part of a message (where) when
// translating, with a 400 naming it in its param and its message (the Messages envelope has
// no param).
func (w *writer) textOnly(parts []llm.Part, where string) ([]llm.Part, error) {
	texts := parts[:0:0]
	for _, p := range parts {
		if p.Kind == llm.PartText {
			texts = append(texts, p)
		} else if w.cross() {
			what := "An image in "
			if p.Kind == llm.PartDocument {
				what = "A document in "
			}
			return nil, w.refuse(paramOf(p.Path), what+where+" (`"+paramOf(p.Path)+"`)")
		}
	}
	return texts, nil
}

// toolResultParts splits a tool result's parts for a chat tool message, which holds text
// alone: the text parts, and, translating, the images, which go in a user message after the
// tool messages of the turn (named "<path> (moved to a user message)"); a document is refused
// with a 400 naming it, as textOnly does.
func (w *writer) toolResultParts(parts []llm.Part) (texts, images []llm.Part, err error) {
	rest := parts[:0:0]
	for _, p := range parts {
		if p.Kind == llm.PartImage && w.cross() {
			images = append(images, p)
			w.drop(pathName(p.Path, " (moved to a user message)", "messages[].content (moved to a user message)"))
			continue
		}
		rest = append(rest, p)
	}
	texts, err = w.textOnly(rest, "a tool result")
	return texts, images, err
}

// chatContent is a message's content: a string for one text part (or none), else parts.
func chatContent(parts []llm.Part) any {
	if len(parts) == 0 {
		return ""
	}
	if len(parts) == 1 && parts[0].Kind == llm.PartText {
		return parts[0].Text
	}
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		if p.Kind == llm.PartImage {
			img := object{{"url", imageURL(p)}}
			if p.Detail != "" {
				img.set("detail", p.Detail)
			}
			out = append(out, object{{"type", "image_url"}, {"image_url", img}})
			continue
		}
		if p.Kind == llm.PartDocument {
			out = append(out, object{{"type", "file"}, {"file", object{{"file_data", documentDataURL(p)}, {"filename", documentFilename(p)}}}})
			continue
		}
		out = append(out, object{{"type", "text"}, {"text", p.Text}})
	}
	return out
}

// chatMaxTokens writes max_completion_tokens (or max_tokens, when that is what the client of
// the same format sent).
func (w *writer) chatMaxTokens(o *object) error {
	if w.req.MaxTokens <= 0 {
		return nil
	}
	key := "max_completion_tokens"
	if w.same && w.req.Raw["max_tokens"] != nil && w.req.Raw["max_completion_tokens"] == nil {
		key = "max_tokens"
	}
	o.set(key, w.req.MaxTokens)
	return nil
}

// chatN writes n.
func (w *writer) chatN(o *object) error {
	if w.req.N > 1 || (w.same && w.req.N > 0) {
		o.set("n", w.req.N)
	}
	return nil
}

// chatStop writes stop, refusing more sequences than the API accepts.
func (w *writer) chatStop(o *object) error {
	if len(w.req.Stop) == 0 {
		return nil
	}
	if w.cross() && len(w.req.Stop) > chatStopLimit {
		return w.refuse(w.srcName("stop"), fmt.Sprintf("More than %d stop sequences", chatStopLimit))
	}
	o.set("stop", w.req.Stop)
	return nil
}

// chatTools writes tools as function tools.
func (w *writer) chatTools(o *object) error {
	if len(w.req.Tools) == 0 {
		return nil
	}
	out := make([]any, 0, len(w.req.Tools))
	for _, t := range w.req.Tools {
		fn := object{{"name", t.Name}}
		if t.Description != "" {
			fn.set("description", t.Description)
		}
		if len(t.Parameters) > 0 {
			fn.set("parameters", t.Parameters)
		}
		if t.Strict != nil {
			fn.set("strict", *t.Strict)
		}
		out = append(out, object{{"type", "function"}, {"function", fn}})
	}
	o.set("tools", out)
	return nil
}

// chatToolChoice writes tool_choice.
func (w *writer) chatToolChoice(o *object) error {
	if !w.toolChoiceNeeded() {
		return nil
	}
	tc := w.req.ToolChoice
	if tc.Mode == llm.ToolChoiceTool {
		o.set("tool_choice", object{{"type", "function"}, {"function", object{{"name", tc.Name}}}})
	} else {
		o.set("tool_choice", string(tc.Mode))
	}
	return nil
}

// chatResponseFormat writes response_format.
func (w *writer) chatResponseFormat(o *object) error {
	rf := w.req.ResponseFormat
	if rf == nil {
		return nil
	}
	if rf.Type != "json_schema" {
		o.set("response_format", object{{"type", rf.Type}})
		return nil
	}
	o.set("response_format", object{{"type", "json_schema"}, {"json_schema", schemaObject(rf)}})
	return nil
}

// chatReasoningEffort writes reasoning_effort (Responses reasoning.effort).
func (w *writer) chatReasoningEffort(o *object) error {
	if w.req.ReasoningEffort != "" {
		o.set("reasoning_effort", w.req.ReasoningEffort)
	}
	return nil
}

// chatVerbosity writes verbosity (Responses text.verbosity).
func (w *writer) chatVerbosity(o *object) error {
	if w.req.Verbosity != "" {
		o.set("verbosity", w.req.Verbosity)
	}
	return nil
}

// schemaObject is the {name, description?, schema?, strict?} of a json_schema format.
func schemaObject(rf *llm.ResponseFormat) object {
	js := object{{"name", rf.Name}}
	if rf.Description != "" {
		js.set("description", rf.Description)
	}
	if len(rf.Schema) > 0 {
		js.set("schema", rf.Schema)
	}
	if rf.Strict != nil {
		js.set("strict", *rf.Strict)
	}
	return js
}

// chatStream writes stream and, when streaming, stream_options with include_usage (the
// gateway meters every answer, whatever the client asked; the client's other stream options
// are kept when it speaks the same format).
func (w *writer) chatStream(o *object) error {
	raw := w.req.Raw["stream_options"]
	if !w.req.Stream {
		if w.same {
			if v := w.req.Raw["stream"]; v != nil {
				o.set("stream", v)
			}
			if raw != nil {
				o.set("stream_options", raw)
			}
		}
		return nil
	}
	o.set("stream", true)
	so := object{{"include_usage", true}}
	if w.same && !isNull(raw) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			for _, k := range sortedKeys(m) {
				if k != "include_usage" {
					so.set(k, m[k])
				}
			}
		}
	}
	o.set("stream_options", so)
	return nil
}
