package convert

import (
	"fmt"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// Tool names as each format's API takes them, letters, digits, '_' and '-' alone, of a
// length that differs:
//
//   - OpenAI (chat completions and Responses): at most 64 characters. The openai-go SDK's
//     FunctionDefinitionParam.Name says "Must be a-z, A-Z, 0-9, or contain underscores and
//     dashes, with a maximum length of 64", and the API answers other names "Invalid
//     'tools[0].function.name': string does not match pattern. Expected a string that matches
//     the pattern '^[a-zA-Z0-9_-]+$'." or "string too long. Expected a string with maximum
//     length 64" (and names the place of a call in the history the same way:
//     'messages[9].tool_calls[0].function.name').
//   - Anthropic (Messages): at most 128 characters. Its answer is "tools.0.custom.name: String
//     should match pattern '^[a-zA-Z0-9_-]{1,128}$'" (modelcontextprotocol/modelcontextprotocol
//     #1345, jedisct1/openapi-mcp#9); its tool-use documentation gave ^[a-zA-Z0-9_-]{1,64}$
//     before the limit was raised.
//
// A dotted name (an MCP tool's files.read), one with a space or a slash, or a long one reaches
// an upstream of the client's own format as sent, and is answered there. Translated, the name
// cannot be changed and changed back (a stream's answer is encoded without the client's
// request), so checkToolNames refuses it before any upstream is called, naming the tool and
// the pattern: the exchange then tries an upstream of another format, and the client gets the
// 400 when none can take it.

// Longest tool names each format's API takes.
const (
	openAIToolNameLimit    = 64
	anthropicToolNameLimit = 128
)

// toolNameLimit is the longest tool name the API of format f takes.
func toolNameLimit(f llm.Format) int {
	if f == llm.FormatMessages {
		return anthropicToolNameLimit
	}
	return openAIToolNameLimit
}

// toolNamePattern is the pattern of the tool names the API of format f takes, as it says it.
func toolNamePattern(f llm.Format) string {
	if f == llm.FormatMessages {
		return "^[a-zA-Z0-9_-]{1,128}$"
	}
	return "^[a-zA-Z0-9_-]{1,64}$"
}

// validToolName reports whether name is 1 to limit bytes of letters, digits, '_' and '-'.
func validToolName(name string, limit int) bool {
	if name == "" || len(name) > limit {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !idChar(name[i]) {
			return false
		}
	}
	return true
}

// checkToolNames refuses a translated request that names a tool the target's API refuses: an
// offered tool, the tool a call of the conversation calls, the tool the tool choice forces.
// The 400 names the place in the client's request, the name and the pattern.
func (w *writer) checkToolNames() error {
	limit := toolNameLimit(w.dst)
	for i, t := range w.req.Tools {
		if !validToolName(t.Name, limit) {
			return w.badToolName(w.toolParam(i, t.Name), t.Name)
		}
	}
	for _, m := range w.req.Messages {
		for _, c := range m.ToolCalls {
			if validToolName(c.Name, limit) {
				continue
			}
			param := "messages"
			switch {
			case c.Path == "":
			case w.src == llm.FormatChat:
				param = c.Path + ".function.name"
			default:
				param = c.Path + ".name"
			}
			return w.badToolName(param, c.Name)
		}
	}
	if tc := w.req.ToolChoice; tc != nil && tc.Mode == llm.ToolChoiceTool && !validToolName(tc.Name, limit) {
		param := "tool_choice.name"
		if w.src == llm.FormatChat {
			param = "tool_choice.function.name"
		}
		return w.badToolName(param, tc.Name)
	}
	return nil
}

// badToolName is the 400 for a tool name the target's API refuses, at param. When the API of
// the client's own format takes the name (a Messages tool of 65 to 128 characters), the
// message says so.
func (w *writer) badToolName(param, name string) error {
	elsewhere := ""
	if validToolName(name, toolNameLimit(w.src)) {
		elsewhere = fmt.Sprintf(", or use a model served through %s, which takes it", formatNames[w.src])
	}
	return apierror.Invalid(param, "Invalid '%s': the tool name %q does not match %s, the pattern of the tool names of %s, through which this model is served. Rename the tool (letters, digits, '_' and '-', at most %d characters)%s.",
		param, name, toolNamePattern(w.dst), formatNames[w.dst], toolNameLimit(w.dst), elsewhere)
}

// toolParam is the client's wire name of the name of the i-th tool of the neutral form, which
// is named name: tools the neutral form does not hold (hosted and custom tools) are counted in
// the client's index, found in its tools array (only on this error's path).
func (w *writer) toolParam(i int, name string) string {
	suffix := ".name"
	if w.src == llm.FormatChat {
		suffix = ".function.name"
	}
	items, _ := scanArray(w.req.Raw["tools"])
	for j, it := range items {
		if offeredName(w.src, it) == name {
			return idx("tools", j) + suffix
		}
	}
	return idx("tools", i) + suffix
}
