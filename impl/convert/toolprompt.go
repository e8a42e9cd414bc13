package convert

import (
	"strings"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// AnthropicToolPromptTokens is the tool-use system prompt Anthropic adds to a request that
// offers tools: 346 tokens on the Claude 4 models with tool_choice auto or none, 313 with any
// or tool (Anthropic, *Pricing*, "Tool use system prompt token count"). The request does not
// carry it, and it is billed as input.
const AnthropicToolPromptTokens = 346

// anthropicSchemaTools are the input tokens Anthropic adds, beside the tool-use system prompt,
// for each of its schema-less client tools a Messages request may offer by type (a prefix of
// the type, dated after it): the definitions the provider writes in for a few dozen bytes of
// the request. The bash tool "adds 245 input tokens", the text editor 700, the computer use
// tool 735 for its definition and up to 499 of system prompt (Anthropic's *Bash tool*, *Text
// editor tool* and *Computer use tool* pages, their pricing sections).
var anthropicSchemaTools = []struct {
	prefix string
	tokens int
}{
	{"bash_", 245},
	{"text_editor_", 700},
	{"computer_", 735 + 499},
}

// AnthropicToolTokens is the input Anthropic adds to the request in v, of format f, for its
// tools, should an upstream of the Messages kind serve it: AnthropicToolPromptTokens when it
// offers any tool, and, for a Messages request, each schema-less client tool's definition
// (anthropicSchemaTools). A chat or Responses request is also counted what its translation adds
// to make its tool history valid for the Messages API (historyToolTokens: the declarations of
// the tools its calls name that it does not offer, with the tool-use system prompt when it
// offers none, and the error results of calls left without one). A request without tools or
// tool calls pays a look-up or two. The estimate counts a tool by its bytes, a few dozen for
// {"type":"bash_20250124","name":"bash"}, so without this a request that offers tools and asks
// for a short answer was billed beyond its reservation.
func AnthropicToolTokens(f llm.Format, v *jsonview.View) int {
	var tools [][]byte
	if raw, ok := v.Value("tools"); ok && !isNull(raw) {
		list, _ := scanArray(raw)
		for _, t := range list {
			tools = append(tools, t)
		}
	}
	if f != llm.FormatMessages {
		n := historyToolTokens(f, v, tools)
		if len(tools) > 0 {
			n += AnthropicToolPromptTokens
		}
		return n
	}
	if len(tools) == 0 {
		return 0
	}
	n := AnthropicToolPromptTokens
	for _, t := range tools {
		kind, _ := typeAndName(t)
		for _, s := range anthropicSchemaTools {
			if strings.HasPrefix(kind, s.prefix) {
				n += s.tokens
			}
		}
	}
	return n
}
