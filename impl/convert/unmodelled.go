package convert

import (
	"bytes"
	"encoding/json"

	"github.com/tollgate/tollgate/impl/llm"
)

// UnmodelledOutput is how many characters of output the complete upstream answer body, of
// format f, carries that DecodeResponse's neutral answer does not: the thinking of a Messages
// answer's thinking blocks and the input of its server tool calls (messagesBlocksLen); the output items of a Responses answer that are neither messages
// nor function calls (unmodelledItemsLen); and the reasoning of a chat answer's first choice, which compatible servers add
// beside the content (DeepSeek's message.reasoning_content, api-docs.deepseek.com, "Reasoning
// Model (deepseek-reasoner)"; vLLM's and OpenRouter's message.reasoning, docs.vllm.ai,
// "Reasoning Outputs"; OpenRouter's message.reasoning_details, ReasoningDetailsLen), the
// longest when several are sent (the same text under several names).
// The provider bills that output, so an answer whose upstream reported no output count is
// billed it, estimated from its length, as a stream cut short is
// (streamconv.UnmodelledOutput). Each string counts as sent, escapes included, as the
// stream's deltas do. A body that holds none of it, or that cannot be read, has none: a body
// without the member names is not scanned.
func UnmodelledOutput(f llm.Format, body []byte) int {
	switch f {
	case llm.FormatChat:
		if !bytes.Contains(body, []byte(`"reasoning`)) {
			return 0
		}
		choices, _ := scanArray(memberValue(body, "choices"))
		if len(choices) == 0 {
			return 0
		}
		return chatReasoningLen(choices[0])
	case llm.FormatResponses:
		if !hasUnmodelledItems(body) {
			return 0
		}
		return unmodelledItemsLen(memberValue(body, "output"))
	case llm.FormatMessages:
		if !bytes.Contains(body, []byte(`"thinking"`)) && !bytes.Contains(body, []byte(`"server_tool_use"`)) {
			return 0
		}
		return messagesBlocksLen(memberValue(body, "content"))
	}
	return 0
}

// ChatChoicesOutput is how many characters of output all the choices of a complete chat
// answer body carry, each counted as an answer of one choice is (its text and tool arguments
// as DecodeResponse reads them, its reasoning as UnmodelledOutput does): what an answer to a
// request for several choices (n) is billed by when its upstream reported no output count, the
// provider billing every choice's output (platform.openai.com/docs/api-reference/chat/create,
// n: "you will be charged based on the number of generated tokens across all of the choices").
// DecodeResponse and UnmodelledOutput read the first choice only. A body that cannot be read
// has none.
func ChatChoicesOutput(body []byte) int {
	var w struct {
		Choices []chatChoiceWire `json:"choices"`
	}
	if json.Unmarshal(body, &w) != nil {
		return 0
	}
	n := 0
	for i := range w.Choices {
		n += len(w.Choices[i].text())
		if r := w.Choices[i].Message.Refusal; r != nil {
			n += len(*r)
		}
		for _, tc := range w.Choices[i].Message.ToolCalls {
			n += len(tc.Function.Arguments)
		}
	}
	if bytes.Contains(body, []byte(`"reasoning`)) {
		choices, _ := scanArray(memberValue(body, "choices"))
		for _, c := range choices {
			n += chatReasoningLen(c)
		}
	}
	return n
}

// chatReasoningLen is the length of the reasoning of a chat answer's choice, which compatible
// servers add beside the content, as sent: its message's reasoning_content, reasoning or
// reasoning_details (ReasoningDetailsLen), the longest when several are sent (OpenRouter sends
// the same text as reasoning and in reasoning_details).
func chatReasoningLen(choice []byte) int {
	msg := memberValue(choice, "message")
	return max(stringLen(memberValue(msg, "reasoning_content")), stringLen(memberValue(msg, "reasoning")),
		ReasoningDetailsLen(memberValue(msg, "reasoning_details")))
}

// ReasoningDetailsLen is the length of the reasoning text, as sent, of the JSON array v, an
// OpenRouter chat message's or delta's reasoning_details (openrouter.ai/docs, "Reasoning
// Tokens", the reasoning_details array: objects of type reasoning.text, with the text, and
// reasoning.summary, with the summary; reasoning.encrypted, with the data): the text of each
// reasoning.text and the summary of each reasoning.summary. An encrypted entry's data is not
// counted: it is ciphertext whose length the provider relates to no token count, as a
// Messages redacted_thinking block's data and a Responses reasoning item's encrypted_content
// are not; it accompanies a summary or text of the same reasoning, which is counted, or stands
// for reasoning the provider hides, which the upstream's usage bills and no length can.
func ReasoningDetailsLen(v []byte) int {
	details, _ := scanArray(v)
	n := 0
	for _, d := range details {
		switch kind, _ := typeAndName(d); kind {
		case "reasoning.text":
			n += stringLen(memberValue(d, "text"))
		case "reasoning.summary":
			n += stringLen(memberValue(d, "summary"))
		}
	}
	return n
}

// unmodelledItemMarks are the type names of the Responses output items whose output the
// neutral answer does not hold (unmodelledItemsLen): a body without any of them is not scanned.
var unmodelledItemMarks = append([][]byte{
	[]byte(`"reasoning"`), []byte(`"custom_tool_call"`), []byte(`"code_interpreter_call"`),
	[]byte(`"mcp_call"`), []byte(`"shell_call"`), []byte(`"apply_patch_call"`),
}, wholeItemMarks...)

// wholeItemMarks are the type names of the Responses output items that WholeItemOutput counts:
// an item without any of them is not scanned.
var wholeItemMarks = [][]byte{
	[]byte(`"local_shell_call"`), []byte(`"computer_call"`), []byte(`"web_search_call"`),
	[]byte(`"image_generation_call"`),
}

// hasUnmodelledItems reports whether a Responses answer body holds the type name of an item
// unmodelledItemsLen counts.
func hasUnmodelledItems(body []byte) bool { return hasMark(body, unmodelledItemMarks) }

// unmodelledItemsLen is the length of what the model wrote in the items of a Responses
// answer's output that are neither messages nor function calls, the output a stream of the
// same answer carries in deltas other than the text, refusal and arguments deltas
// (streamconv.UnmodelledOutput), item for item (platform.openai.com/docs/api-reference/responses,
// "The response object", output): a reasoning item's summary parts (summary_text, streamed as
// response.reasoning_summary_text.delta) and content parts (reasoning_text, which servers
// that show the raw reasoning send, vLLM among them; response.reasoning_text.delta); a
// custom_tool_call's input (response.custom_tool_call_input.delta); a
// code_interpreter_call's code (response.code_interpreter_call_code.delta); an mcp_call's
// arguments (response.mcp_call_arguments.delta); a shell_call's action.commands
// (response.shell_call_command.delta); an apply_patch_call's operation.diff
// (response.apply_patch_call_operation_diff.delta); and what the model wrote in the items a
// stream carries whole, in no delta (wholeItemLen: a local_shell_call's or computer_call's
// action, a web_search_call's query, url and pattern, an image_generation_call's
// revised_prompt). A tool's results (a code interpreter's outputs, an MCP server's output, a
// shell's output, a search's sources, an image) are the tool's, not the model's: not counted.
func unmodelledItemsLen(output []byte) int {
	items, _ := scanArray(output)
	n := 0
	for _, item := range items {
		kind, _ := typeAndName(item)
		switch kind {
		case "reasoning":
			n += reasoningItemLen(item)
		case "custom_tool_call":
			n += stringLen(memberValue(item, "input"))
		case "code_interpreter_call":
			n += stringLen(memberValue(item, "code"))
		case "mcp_call":
			n += stringLen(memberValue(item, "arguments"))
		case "shell_call":
			n += stringsLen(memberValue(memberValue(item, "action"), "commands"))
		case "apply_patch_call":
			n += stringLen(memberValue(memberValue(item, "operation"), "diff"))
		default:
			n += wholeItemLen(kind, item)
		}
	}
	return n
}

// WholeItemOutput is how many characters of output the model wrote in the Responses output
// item of the stream event data (a response.output_item.added's or .done's item), for the items a stream
// carries whole there and in no delta (wholeItemLen); 0 for any other item, whose output the
// deltas carry, and for an event without any of their type names, which is not scanned. A
// stream cut before the upstream reported its usage is billed it, estimated from its length, as
// an answer without an output count is (UnmodelledOutput).
func WholeItemOutput(data []byte) int {
	if !hasMark(data, wholeItemMarks) {
		return 0
	}
	item := memberValue(data, "item")
	kind, _ := typeAndName(item)
	return wholeItemLen(kind, item)
}

// wholeItemLen is the length of what the model wrote in a Responses output item of type kind
// that no stream delta carries, after the Responses API reference's output items
// (platform.openai.com/docs/api-reference/responses, "The response object", output) and its
// streaming events (platform.openai.com/docs/api-reference/responses-streaming: these items
// have progress events and response.output_item.added and .done, no delta): a
// local_shell_call's action (its command array, env, working_directory, as sent) and a
// computer_call's action (its type, coordinates, the text typed, the keys pressed; actions,
// when it sends several), each object counted as sent; a web_search_call's action's query (or
// queries), url and pattern, not its sources, which are the search's; an
// image_generation_call's revised_prompt, when it has one, not its result, the image, which
// the image model bills. Any other item has none here.
func wholeItemLen(kind string, item []byte) int {
	switch kind {
	case "local_shell_call":
		return objectLen(memberValue(item, "action"))
	case "computer_call":
		return objectLen(memberValue(item, "action")) + arrayLen(memberValue(item, "actions"))
	case "web_search_call":
		action := memberValue(item, "action")
		return stringLen(memberValue(action, "query")) + stringsLen(memberValue(action, "queries")) +
			stringLen(memberValue(action, "url")) + stringLen(memberValue(action, "pattern"))
	case "image_generation_call":
		return stringLen(memberValue(item, "revised_prompt"))
	}
	return 0
}

// hasMark reports whether data holds one of marks.
func hasMark(data []byte, marks [][]byte) bool {
	for _, mark := range marks {
		if bytes.Contains(data, mark) {
			return true
		}
	}
	return false
}

// objectLen is the length in bytes of the JSON object v as sent, or 0 when v is absent or not
// an object.
func objectLen(v []byte) int {
	if len(v) < 2 || v[0] != '{' {
		return 0
	}
	return len(v)
}

// arrayLen is the length in bytes of the JSON array v as sent, or 0 when v is absent or not an
// array.
func arrayLen(v []byte) int {
	if len(v) < 2 || v[0] != '[' {
		return 0
	}
	return len(v)
}

// reasoningItemLen is the length of the text of a Responses reasoning item: its summary parts'
// and its content parts'.
func reasoningItemLen(item []byte) int {
	n := 0
	for _, parts := range [][]byte{memberValue(item, "summary"), memberValue(item, "content")} {
		list, _ := scanArray(parts)
		for _, part := range list {
			n += stringLen(memberValue(part, "text"))
		}
	}
	return n
}

// stringsLen is the length of the strings of the JSON array v as sent (stringLen each), or 0
// when v is not an array.
func stringsLen(v []byte) int {
	list, _ := scanArray(v)
	n := 0
	for _, s := range list {
		n += stringLen(s)
	}
	return n
}

// messagesBlocksLen is the length of the thinking of the thinking blocks of a Messages
// answer's content (a redacted_thinking block's data is encrypted, and its length says
// nothing of the tokens: it is not counted, as a stream's is not), and of the input of its
// server_tool_use blocks as sent (a web search's query, the code a code execution runs, which
// the model writes; not the tools' results blocks), as a stream's input_json_delta to such a
// block is counted (streamconv.UnmodelledCounter).
func messagesBlocksLen(content []byte) int {
	blocks, _ := scanArray(content)
	n := 0
	for _, block := range blocks {
		switch kind, _ := typeAndName(block); kind {
		case "thinking":
			n += stringLen(memberValue(block, "thinking"))
		case "server_tool_use":
			n += objectLen(memberValue(block, "input"))
		}
	}
	return n
}

// stringLen is the length in bytes of the JSON string value v as sent (escapes included), or
// 0 when v is absent or not a string.
func stringLen(v []byte) int {
	if len(v) < 2 || v[0] != '"' {
		return 0
	}
	return len(v) - 2
}
