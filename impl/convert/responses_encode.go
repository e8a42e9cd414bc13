package convert

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tollgate/tollgate/impl/llm"
)

// responsesInput writes instructions (the system text) and input (the turns as items).
func (w *writer) responsesInput(o *object) error {
	if s := w.req.System; s != "" {
		o.set("instructions", s)
	}
	items := make([]any, 0, len(w.req.Messages))
	for i, m := range w.req.Messages {
		switch m.Role {
		case llm.RoleUser:
			items = append(items, object{{"type", "message"}, {"role", "user"}, {"content", responsesParts(m.Parts)}})
		case llm.RoleAssistant:
			texts, err := w.textOnly(m.Parts, "an assistant turn")
			if err != nil {
				return err
			}
			if len(texts) > 0 || m.Refusal != "" || (len(m.ToolCalls) == 0 && !w.cross()) {
				content := make([]any, 0, len(texts)+1)
				for _, p := range texts {
					content = append(content, object{{"type", "output_text"}, {"text", p.Text}})
				}
				if m.Refusal != "" {
					// After the text, as the API answers a message of both.
					content = append(content, object{{"type", "refusal"}, {"refusal", m.Refusal}})
				}
				items = append(items, object{{"type", "message"}, {"role", "assistant"}, {"content", content}})
			}
			for j, c := range m.ToolCalls {
				items = append(items, object{{"type", "function_call"}, {"call_id", w.callID(i, j, c.ID)}, {"name", c.Name}, {"arguments", c.Arguments}})
			}
		case llm.RoleTool:
			w.dropIsError(m)
			var output any = textOf(m.Parts)
			if len(m.Parts) > 1 || (len(m.Parts) == 1 && m.Parts[0].Kind != llm.PartText) {
				output = responsesParts(m.Parts)
			}
			items = append(items, object{{"type", "function_call_output"}, {"call_id", w.resultID(i, m.ToolCallID)}, {"output", output}})
		default:
			return fmt.Errorf("convert: messages[%d] has unknown role %q", i, m.Role)
		}
	}
	o.set("input", items)
	return nil
}

// responsesParts writes input content parts.
func responsesParts(parts []llm.Part) []any {
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		if p.Kind == llm.PartImage {
			detail := p.Detail
			if detail == "" {
				detail = "auto"
			}
			out = append(out, object{{"type", "input_image"}, {"image_url", imageURL(p)}, {"detail", detail}})
			continue
		}
		if p.Kind == llm.PartDocument {
			out = append(out, object{{"type", "input_file"}, {"file_data", documentDataURL(p)}, {"filename", documentFilename(p)}})
			continue
		}
		out = append(out, object{{"type", "input_text"}, {"text", p.Text}})
	}
	return out
}

// responsesMaxTokens writes max_output_tokens.
func (w *writer) responsesMaxTokens(o *object) error {
	if w.req.MaxTokens > 0 {
		o.set("max_output_tokens", w.req.MaxTokens)
	}
	return nil
}

// responsesChecks refuses what the Responses API cannot honour: stop sequences and more than
// one choice.
func (w *writer) responsesChecks(o *object) error {
	if !w.cross() {
		return nil
	}
	if len(w.req.Stop) > 0 {
		return w.refuse(w.srcName("stop"), "Stop sequences")
	}
	if w.req.N > 1 {
		return w.refuse("n", "More than one choice (n > 1)")
	}
	return nil
}

// responsesTools writes tools as flat function tools. strict is always written: the API
// defaults it to true, and a tool from a format where it defaults to false must stay lenient.
func (w *writer) responsesTools(o *object) error {
	if len(w.req.Tools) == 0 {
		return nil
	}
	out := make([]any, 0, len(w.req.Tools))
	for _, t := range w.req.Tools {
		to := object{{"type", "function"}, {"name", t.Name}}
		if t.Description != "" {
			to.set("description", t.Description)
		}
		to.set("parameters", schemaOrEmpty(t))
		strict := t.Strict != nil && *t.Strict
		to.set("strict", strict)
		out = append(out, to)
	}
	o.set("tools", out)
	return nil
}

// responsesToolChoice writes tool_choice.
func (w *writer) responsesToolChoice(o *object) error {
	if !w.toolChoiceNeeded() {
		return nil
	}
	tc := w.req.ToolChoice
	if tc.Mode == llm.ToolChoiceTool {
		o.set("tool_choice", object{{"type", "function"}, {"name", tc.Name}})
	} else {
		o.set("tool_choice", string(tc.Mode))
	}
	return nil
}

// responsesReasoning writes reasoning.effort (chat reasoning_effort), keeping the client's
// other reasoning options (its summary) when it speaks the same format.
func (w *writer) responsesReasoning(o *object) error {
	reasoning := object{}
	if w.req.ReasoningEffort != "" {
		reasoning.set("effort", w.req.ReasoningEffort)
	}
	w.keepOwnMembers(&reasoning, "reasoning", "effort")
	if len(reasoning) > 0 {
		o.set("reasoning", reasoning)
	}
	return nil
}

// responsesText writes text.format and text.verbosity (keeping the client's other text options
// when it speaks the same format).
func (w *writer) responsesText(o *object) error {
	rf := w.req.ResponseFormat
	text := object{}
	if rf != nil {
		f := object{{"type", rf.Type}}
		if rf.Type == "json_schema" {
			f = append(f, schemaObject(rf)...)
		}
		text.set("format", f)
	}
	if w.req.Verbosity != "" {
		text.set("verbosity", w.req.Verbosity)
	}
	w.keepOwnMembers(&text, "text", "format", "verbosity")
	if len(text) > 0 {
		o.set("text", text)
	}
	return nil
}

// keepOwnMembers adds to obj, when the request speaks the target's format, the members of its
// own object field that the neutral form does not hold (all but modelled), as sent, in name
// order: a reasoning summary, a text option the gateway does not know.
func (w *writer) keepOwnMembers(obj *object, field string, modelled ...string) {
	if !w.same {
		return
	}
	var m map[string]json.RawMessage
	if raw := w.req.Raw[field]; raw == nil || json.Unmarshal(raw, &m) != nil {
		return
	}
	for _, k := range sortedKeys(m) {
		if !slices.Contains(modelled, k) {
			obj.set(k, m[k])
		}
	}
}
