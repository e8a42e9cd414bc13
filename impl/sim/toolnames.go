package sim

import "strconv"

// The tool names each API takes, and its words for the others, so that a gateway that sends a
// name its upstream refuses fails its tests as it would fail in production:
//
//   - OpenAI (chat completions, Responses): letters, digits, '_' and '-', at most 64 characters
//     (the openai-go SDK's FunctionDefinitionParam.Name). The API answers "Invalid
//     'tools[1].function.name': string does not match pattern. Expected a string that matches
//     the pattern '^[a-zA-Z0-9_-]+$'." (code invalid_value; hackers365/xiaozhi-esp32-server-golang
//     #268, for a call of the history 'messages[9].tool_calls[0].function.name', mcp-use/mcp-use
//     #90; on the Responses route 'tools[16].name', justrach/codegraff#930) and "Invalid
//     'tools[0].function.name': string too long. Expected a string with maximum length 64, but
//     got a string with length 81 instead." (code string_above_max_length,
//     ravitemer/mcphub.nvim#243).
//   - Anthropic (Messages): ^[a-zA-Z0-9_-]{1,128}$, answered "tools.16.custom.name: String
//     should match pattern '^[a-zA-Z0-9_-]{1,128}$'" (modelcontextprotocol/modelcontextprotocol
//     #1345).

// Longest tool names the APIs take.
const (
	openAIToolNameLimit    = 64
	anthropicToolNameLimit = 128
)

// toolNameChars reports whether name is made of letters, digits, '_' and '-' alone, and not
// empty.
func toolNameChars(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' && c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// openAIToolNameRefusal is the OpenAI API's refusal of the tool name at param (its message and
// code), or "" when it takes it.
func openAIToolNameRefusal(param, name string) (msg, code string) {
	if !toolNameChars(name) {
		return "Invalid '" + param + "': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", "invalid_value"
	}
	if len(name) > openAIToolNameLimit {
		return "Invalid '" + param + "': string too long. Expected a string with maximum length " + strconv.Itoa(openAIToolNameLimit) +
			", but got a string with length " + strconv.Itoa(len(name)) + " instead.", "string_above_max_length"
	}
	return "", ""
}

// anthropicToolNameRefusal is the Messages API's refusal of the name of the i-th tool, or ""
// when it takes it.
func anthropicToolNameRefusal(i int, name string) string {
	if toolNameChars(name) && len(name) <= anthropicToolNameLimit {
		return ""
	}
	return "tools." + strconv.Itoa(i) + ".custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"
}
