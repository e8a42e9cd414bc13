package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// messagesTemperatureMax is the highest temperature the Messages API accepts (OpenAI's range
// is 0 to 2; the scales are not rescaled, a value above 1 is refused).
const messagesTemperatureMax = 1.0

// messagesImageTypes are the media types the Messages API accepts for inline images.
var messagesImageTypes = setOf("image/jpeg", "image/png", "image/gif", "image/webp")

// messagesMaxTokens writes the required max_tokens.
func (w *writer) messagesMaxTokens(o *object) error {
	if w.req.MaxTokens <= 0 {
		// Reported after the other fields, so that a client's 400 comes first.
		w.fault = fmt.Errorf("convert: an anthropic-messages request needs max_tokens: fill Request.MaxTokens (e.g. from the model's output limit) before encoding")
		return nil
	}
	o.set("max_tokens", w.req.MaxTokens)
	return nil
}

// messagesSystem writes system as a string.
func (w *writer) messagesSystem(o *object) error {
	if w.req.System != "" {
		o.set("system", w.req.System)
	}
	return nil
}

// turn is one Messages turn being built.
type turn struct {
	role   string
	blocks []any
	// paths are the wire paths of the blocks' sources, one for each block ("" when unknown):
	// the tool call of a tool_use block, the tool message or item of a tool_result block.
	paths []string
}

// messagesMessages writes messages. Tool results become tool_result blocks of a user turn;
// adjacent turns of the same role are merged, since the API requires alternating roles; empty
// text is left out, since the API rejects empty text blocks.
func (w *writer) messagesMessages(o *object) error {
	var turns []turn
	// emptyUser is the param of an empty user message left out since the last message with
	// content ("" when none), and emptyLast says it was the last message: one that leaves the
	// conversation on the assistant's turn is refused below.
	emptyUser, emptyLast := "", false
	// prefillText is the path of the last text of an assistant turn, which ends the
	// conversation's text when the conversation ends on the assistant's turn (a prefill).
	prefillText := ""
	add := func(role string, blocks []any, paths ...string) {
		if len(blocks) == 0 {
			return
		}
		emptyUser = ""
		paths = append(paths, make([]string, len(blocks)-len(paths))...)
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			turns[n-1].paths = append(turns[n-1].paths, paths...)
			return
		}
		turns = append(turns, turn{role, blocks, paths})
	}
	for i, m := range w.req.Messages {
		switch m.Role {
		case llm.RoleUser:
			blocks, err := w.messagesBlocks(m.Parts)
			if err != nil {
				return err
			}
			if len(blocks) == 0 {
				// The Messages API takes no empty text: left out and named, unless that leaves
				// the conversation on the assistant's turn (below).
				w.drop(pathName(m.Path, "", "messages[]"))
				emptyUser, emptyLast = paramOf(m.Path)+".content", i == len(w.req.Messages)-1
			}
			add("user", blocks)
		case llm.RoleAssistant:
			texts, err := w.textOnly(m.Parts, "an assistant turn")
			if err != nil {
				return err
			}
			blocks, _ := w.messagesBlocks(texts)
			for _, p := range texts {
				if !blank(p.Text) {
					prefillText = p.Path
				}
			}
			if !blank(m.Refusal) {
				// Messages has no place for a refusal: its words are what the assistant said,
				// as a Messages client is answered a refusal (docs/inference.md).
				blocks = append(blocks, object{{"type", "text"}, {"text", m.Refusal}})
				prefillText = m.Path
			}
			paths := make([]string, len(blocks), len(blocks)+len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				input, ok := toolInput(c.Arguments)
				if !ok {
					param := "arguments"
					if c.Path != "" {
						param = c.Path + ".arguments"
						if w.src == llm.FormatChat {
							param = c.Path + ".function.arguments"
						}
					}
					return apierror.Invalid(param, "Invalid '%s': the arguments of a tool call must be a JSON object for this model, which is served through %s.", param, formatNames[w.dst])
				}
				blocks = append(blocks, object{{"type", "tool_use"}, {"id", toolUseID(w.callID(i, j, c.ID))}, {"name", c.Name}, {"input", input}})
				paths = append(paths, c.Path)
			}
			add("assistant", blocks, paths...)
		case llm.RoleTool:
			res := object{{"type", "tool_result"}, {"tool_use_id", toolUseID(w.resultID(i, m.ToolCallID))}}
			blocks, err := w.messagesBlocks(m.Parts)
			if err != nil {
				return err
			}
			switch {
			case len(blocks) == 0:
			case len(m.Parts) == 1 && m.Parts[0].Kind == llm.PartText:
				res.set("content", m.Parts[0].Text)
			default:
				res.set("content", blocks)
			}
			if m.IsError {
				res.set("is_error", true)
			}
			add("user", []any{res}, m.Path)
		default:
			return fmt.Errorf("convert: messages[%d] has unknown role %q", i, m.Role)
		}
	}
	if w.cross() {
		// The Messages API refuses a tool call without its result in the next turn, and a
		// result without its call in the turn before, which the other formats take.
		turns = w.pairToolResults(turns)
	}
	if n := len(turns); emptyUser != "" && (emptyLast || (n > 0 && turns[n-1].role == "assistant")) {
		// An empty user message that ends the conversation, or is followed only by empty ones
		// ([user "a", assistant "b", user "", assistant ""]): left out, the conversation would
		// end on the assistant's turn, which the Messages API continues as a prefill, another
		// request (trial h14 D9, and the review of its fix).
		which := "this user message"
		if emptyLast {
			which = "the last user message"
		}
		return apierror.Invalid(emptyUser, "Invalid '%s': %s is empty, and this model is served through %s, which refuses empty content (without it the conversation would end on the assistant's turn, which that API continues). Send the message's text.", emptyUser, which, formatNames[w.dst])
	}
	if n := len(turns); n > 0 && turns[n-1].role == "assistant" && w.cross() {
		// A Messages client's own prefill goes as it sent it.
		w.trimPrefill(turns[n-1].blocks, prefillText)
	}
	out := make([]any, 0, len(turns))
	for _, t := range turns {
		var content any = t.blocks
		if len(t.blocks) == 1 {
			if b, ok := t.blocks[0].(object); ok && len(b) == 2 && b[0].value == "text" {
				content = b[1].value // a lone text block as a string
			}
		}
		out = append(out, object{{"role", t.role}, {"content", content}})
	}
	o.set("messages", out)
	return nil
}

// trimPrefill trims the trailing whitespace of the text that ends blocks, the assistant turn
// that ends the conversation (a prefill, which the model continues): the Messages API refuses
// it ("final assistant content cannot end with trailing whitespace"), and chat and Responses
// clients, whose APIs take such turns, send them, a prefill like "The answer is " among them. What was trimmed is
// named as the text's path with " (trailing whitespace)" (path is that text's, "" when the
// request was not decoded).
func (w *writer) trimPrefill(blocks []any, path string) {
	last, ok := blocks[len(blocks)-1].(object)
	if !ok || len(last) != 2 || last[0].value != "text" {
		return // a tool call ends it
	}
	text, _ := last[1].value.(string)
	trimmed := strings.TrimRightFunc(text, unicode.IsSpace)
	if trimmed == text {
		return
	}
	blocks[len(blocks)-1] = object{{"type", "text"}, {"text", trimmed}}
	w.drop(pathName(path, "", "messages[].content") + " (trailing whitespace)")
}

// messagesBlocks writes text and image parts as content blocks. Text of whitespace alone is
// left out, as empty text is: the API refuses both ("text content blocks must contain
// non-whitespace text"), and an assistant turn of another format often opens its tool calls
// with "\n\n" (a Messages upstream answers so itself).
func (w *writer) messagesBlocks(parts []llm.Part) ([]any, error) {
	var out []any
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if !blank(p.Text) {
				out = append(out, object{{"type", "text"}, {"text", p.Text}})
			}
		case llm.PartImage:
			src, err := w.messagesImageSource(p)
			if err != nil {
				return nil, err
			}
			out = append(out, object{{"type", "image"}, {"source", src}})
		case llm.PartDocument:
			doc, err := w.messagesDocument(p)
			if err != nil {
				return nil, err
			}
			out = append(out, doc)
		}
	}
	return out, nil
}

// blank reports whether s is empty or whitespace alone.
func blank(s string) bool { return strings.TrimSpace(s) == "" }

// messagesDocument writes a document block. The Messages API reads a PDF as base64 data and
// plain text as text, and no other type: a text/plain document of another format is decoded
// from its base64 (it must be UTF-8), anything else is refused. It has no file name: one is
// dropped and named.
func (w *writer) messagesDocument(p llm.Part) (object, error) {
	if !w.cross() || p.MediaType == "application/pdf" {
		w.dropFilename(p)
		return object{{"type", "document"}, {"source", object{{"type", "base64"}, {"media_type", p.MediaType}, {"data", p.Data}}}}, nil
	}
	if p.MediaType != "text/plain" {
		return nil, w.refuse(paramOf(p.Path), fmt.Sprintf("A document of type %q (only application/pdf and text/plain are accepted)", p.MediaType))
	}
	text, err := base64.StdEncoding.DecodeString(p.Data)
	if err != nil || !utf8.Valid(text) {
		return nil, w.refuse(paramOf(p.Path), "A text/plain document that is not base64-encoded UTF-8")
	}
	w.dropFilename(p)
	return object{{"type", "document"}, {"source", object{{"type", "text"}, {"media_type", "text/plain"}, {"data", string(text)}}}}, nil
}

// dropFilename names the file name of a document the Messages API cannot carry.
func (w *writer) dropFilename(p llm.Part) {
	if p.Filename == "" {
		return
	}
	suffix := ".filename"
	if w.src == llm.FormatChat {
		suffix = ".file.filename"
	}
	w.drop(pathName(p.Path, suffix, "filename"))
}

// messagesImageSource writes an image's source: base64 data or a URL.
func (w *writer) messagesImageSource(p llm.Part) (object, error) {
	if w.cross() {
		w.dropDetail(p)
	}
	if p.ImageURL == "" {
		if w.cross() && !messagesImageTypes[p.MediaType] {
			return nil, w.refuse(paramOf(p.Path), fmt.Sprintf("An image of type %q (only image/jpeg, image/png, image/gif and image/webp are accepted)", p.MediaType))
		}
		return object{{"type", "base64"}, {"media_type", p.MediaType}, {"data", p.Data}}, nil
	}
	if w.cross() && strings.HasPrefix(p.ImageURL, "data:") {
		return nil, w.refuse(paramOf(p.Path), "An image data: URL that is not base64")
	}
	return object{{"type", "url"}, {"url", p.ImageURL}}, nil
}

// toolInput parses tool call arguments as the JSON object a tool_use block carries (empty
// arguments are the empty object).
func toolInput(args string) (json.RawMessage, bool) {
	t := strings.TrimSpace(args)
	if t == "" {
		return json.RawMessage("{}"), true
	}
	if t[0] != '{' || !json.Valid([]byte(t)) {
		return nil, false
	}
	var b bytes.Buffer
	if json.Compact(&b, []byte(t)) != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// toolUseID makes a tool call id acceptable to the Messages API (^[a-zA-Z0-9_-]+$). An id that
// is acceptable passes as it is; any other has each other character replaced with '_' and the
// first 64 bits of its SHA-256 appended in hex, so that two ids that differ stay different
// ("call:1" and "call/1" were both "call_1": trial h14 D3, an ambiguous conversation) and
// the same id always maps the same way, so calls and results still match.
func toolUseID(id string) string {
	ok := id != ""
	for i := 0; i < len(id) && ok; i++ {
		ok = idChar(id[i])
	}
	if ok {
		return id
	}
	b := make([]byte, 0, len(id)+len("toolu_")+1+16)
	if id == "" {
		b = append(b, "toolu"...)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; idChar(c) {
			b = append(b, c)
		} else {
			b = append(b, '_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	b = append(b, '_')
	return string(hex.AppendEncode(b, sum[:8]))
}

func idChar(c byte) bool {
	return c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// messagesTemperature writes temperature, refusing a value the Messages range cannot hold.
func (w *writer) messagesTemperature(o *object) error {
	t := w.req.Temperature
	if t == nil {
		return nil
	}
	if w.cross() && *t > messagesTemperatureMax {
		return w.refuse("temperature", fmt.Sprintf("A temperature of %g (above %g)", *t, messagesTemperatureMax))
	}
	o.set("temperature", t)
	return nil
}

// messagesTopP writes top_p. The Messages API takes temperature or top_p, not both ("cannot
// both be specified for this model", since the Claude 4.5 models): with a temperature, a top_p
// of 1 (nucleus sampling over everything, what the model does anyway) is dropped and named,
// and any other cannot be honoured.
func (w *writer) messagesTopP(o *object) error {
	p := w.req.TopP
	if p == nil {
		return nil
	}
	if w.cross() && w.req.Temperature != nil {
		if *p >= 1 {
			w.drop("top_p")
			return nil
		}
		return w.refuse("top_p", fmt.Sprintf("A top_p of %g together with a temperature (the API takes one of them)", *p))
	}
	o.set("top_p", p)
	return nil
}

// messagesStop writes stop_sequences, refusing a sequence of whitespace alone (or empty),
// which the API refuses: a chat client's stop "\n" cannot be honoured, and left out the
// answer would run past it.
func (w *writer) messagesStop(o *object) error {
	if len(w.req.Stop) == 0 {
		return nil
	}
	if w.cross() {
		for _, s := range w.req.Stop {
			if blank(s) {
				return w.refuse(w.srcName("stop"), fmt.Sprintf("A stop sequence of whitespace alone (%q)", s))
			}
		}
	}
	o.set("stop_sequences", w.req.Stop)
	return nil
}

// messagesChecks refuses what the Messages API cannot honour: more than one choice.
func (w *writer) messagesChecks(o *object) error {
	if !w.cross() {
		return nil
	}
	if w.req.N > 1 {
		return w.refuse("n", "More than one choice (n > 1)")
	}
	// Advisory: the Messages API's thinking is a token budget, not an effort level.
	if w.req.ReasoningEffort != "" {
		w.drop(w.srcName("reasoning_effort"))
	}
	if w.req.Verbosity != "" {
		w.drop(w.srcName("verbosity"))
	}
	return nil
}

// messagesOutputConfig writes a json_schema response format as Anthropic's structured outputs,
// output_config.format {"type": "json_schema", "schema": …}, which constrains the answer to
// the schema whether or not the client asked for OpenAI's strict mode
// (https://platform.claude.com/docs/en/build-with-claude/structured-outputs). The format's
// name has no place there, and its description is dropped and named. Any JSON (json_object),
// or a json_schema without a schema, cannot be honoured: the Messages API has no JSON mode.
func (w *writer) messagesOutputConfig(o *object) error {
	rf := w.req.ResponseFormat
	if rf == nil || rf.Type == "text" {
		return nil
	}
	param := w.srcName("response_format")
	if rf.Type != "json_schema" || len(rf.Schema) == 0 {
		what := fmt.Sprintf("A %s response format", rf.Type)
		if rf.Type == "json_schema" {
			what = "A json_schema response format without a schema"
		}
		return w.refuse(param, what)
	}
	if rf.Description != "" {
		if w.src == llm.FormatChat {
			param += ".json_schema"
		}
		w.drop(param + ".description")
	}
	o.set("output_config", object{{"format", object{{"type", "json_schema"}, {"schema", rf.Schema}}}})
	return nil
}

// messagesTools writes tools with input_schema. strict: true cannot be honoured without a beta
// feature and is dropped and named.
//
// A translated request is also given the tools its history calls and it does not offer
// (historyTools), which the Messages API requires of a request with tool calls in its
// messages.
func (w *writer) messagesTools(o *object) error {
	w.history = w.historyTools()
	if len(w.req.Tools) == 0 && len(w.history) == 0 {
		return nil
	}
	out := make([]any, 0, len(w.req.Tools)+len(w.history))
	for _, t := range w.req.Tools {
		to := object{{"name", t.Name}}
		if t.Description != "" {
			to.set("description", t.Description)
		}
		to.set("input_schema", schemaOrEmpty(t))
		if t.Strict != nil {
			if w.same {
				to.set("strict", *t.Strict)
			} else if *t.Strict {
				if w.src == llm.FormatChat {
					w.drop("tools[].function.strict")
				} else {
					w.drop("tools[].strict")
				}
			}
		}
		out = append(out, to)
	}
	for _, name := range w.history {
		out = append(out, object{{"name", name}, {"description", historyToolDescription}, {"input_schema", historyToolSchema}})
	}
	o.set("tools", out)
	return nil
}

// messagesToolChoice writes tool_choice, carrying parallel_tool_calls: false as
// disable_parallel_tool_use. A translated request that offers no tools, and is given those its
// history calls (messagesTools), is sent tool_choice none: the model may not call them.
func (w *writer) messagesToolChoice(o *object) error {
	if len(w.req.Tools) == 0 && len(w.history) > 0 {
		o.set("tool_choice", object{{"type", "none"}})
		return nil
	}
	if len(w.req.Tools) == 0 && !w.same {
		return nil
	}
	tc := w.req.ToolChoice
	disable := w.req.ParallelToolCalls != nil && !*w.req.ParallelToolCalls
	if tc == nil && !disable {
		return nil
	}
	mode := llm.ToolChoiceAuto
	if tc != nil {
		mode = tc.Mode
	}
	var out object
	switch mode {
	case llm.ToolChoiceNone:
		out = object{{"type", "none"}}
	case llm.ToolChoiceRequired:
		out = object{{"type", "any"}}
	case llm.ToolChoiceTool:
		out = object{{"type", "tool"}, {"name", tc.Name}}
	default:
		out = object{{"type", "auto"}}
	}
	if disable && mode != llm.ToolChoiceNone {
		out.set("disable_parallel_tool_use", true)
	}
	o.set("tool_choice", out)
	return nil
}
