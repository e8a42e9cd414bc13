package convert

import (
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestUnmodelledOutput: what a complete answer carries that the neutral answer does not, and
// that the provider bills as output, counts by its length as sent: a chat answer's reasoning
// under DeepSeek's name (message.reasoning_content) or vLLM's and OpenRouter's
// (message.reasoning), or in OpenRouter's message.reasoning_details (its summary and text
// entries, not its encrypted one), once when several are sent; the summary and reasoning text of Responses
// reasoning items, and the input, code, arguments, commands and diff the model wrote in custom
// tool, code interpreter, MCP, shell and apply_patch calls (not the tools' outputs); the thinking of Messages thinking blocks. Text, an encrypted reasoning or a
// redacted thinking block, a usage's reasoning_tokens and what is not an answer count nothing.
func TestUnmodelledOutput(t *testing.T) {
	for _, c := range []struct {
		name string
		f    llm.Format
		body string
		want int
	}{
		{"deepseek", llm.FormatChat, `{"choices":[{"index":0,"message":{"role":"assistant","content":"9.8","reasoning_content":"Compare the decimals"}}]}`, len("Compare the decimals")},
		{"vllm", llm.FormatChat, `{"choices":[{"index":0,"message":{"role":"assistant","content":"9.8","reasoning":"Line one\nline two"}}]}`, len(`Line one\nline two`)},
		{"both names", llm.FormatChat, `{"choices":[{"message":{"reasoning":"Same","reasoning_content":"Same"}}]}`, len("Same")},
		{"openrouter details", llm.FormatChat, `{"choices":[{"message":{"content":"9.8","reasoning_details":[` +
			`{"type":"reasoning.summary","summary":"Compared","format":"openai-responses-v1","index":0},` +
			`{"type":"reasoning.text","text":"the decimals","signature":null,"index":1},` +
			`{"type":"reasoning.encrypted","data":"gAAAAB","index":2}]}}]}`, len("Compared") + len("the decimals")},
		{"openrouter both", llm.FormatChat, `{"choices":[{"message":{"reasoning":"Same text","reasoning_details":[{"type":"reasoning.text","text":"Same text"}]}}]}`, len("Same text")},
		{"null reasoning", llm.FormatChat, `{"choices":[{"message":{"content":"the reasoning is sound","reasoning":null}}],"usage":{"completion_tokens_details":{"reasoning_tokens":9}}}`, 0},
		{"summary and text", llm.FormatResponses, `{"status":"completed","output":[` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"First"},{"type":"summary_text","text":"Second"}],"content":[{"type":"reasoning_text","text":"Raw"}]},` +
			`{"type":"reasoning","summary":[],"encrypted_content":"gAAAAB"},` +
			`{"type":"message","content":[{"type":"output_text","text":"Answer"}]}]}`, len("First") + len("Second") + len("Raw")},
		{"tool items", llm.FormatResponses, `{"status":"completed","output":[` +
			`{"type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":"*** Begin Patch"},` +
			`{"type":"code_interpreter_call","id":"ci_1","code":"print(1 + 1)","outputs":[{"type":"logs","logs":"2"}],"container_id":"cntr_1"},` +
			`{"type":"mcp_call","id":"mcp_1","server_label":"docs","name":"search","arguments":"{\"q\":\"go\"}","output":"many results"},` +
			`{"type":"shell_call","call_id":"call_2","action":{"commands":["ls -l","pwd"],"timeout_ms":1000}},` +
			`{"type":"apply_patch_call","call_id":"call_4","status":"completed","operation":{"type":"update_file","path":"main.go","diff":"@@ -1 +1 @@"}},` +
			`{"type":"function_call","call_id":"call_3","name":"f","arguments":"{}"},` +
			`{"type":"message","content":[{"type":"output_text","text":"a custom_tool_call"}]}]}`,
			len("*** Begin Patch") + len("print(1 + 1)") + len(`{\"q\":\"go\"}`) + len("ls -l") + len("pwd") + len("@@ -1 +1 @@")},
		{"null code", llm.FormatResponses, `{"status":"completed","output":[{"type":"code_interpreter_call","id":"ci_1","code":null}]}`, 0},
		{"thinking", llm.FormatMessages, `{"type":"message","content":[` +
			`{"type":"thinking","thinking":"Let me see","signature":"c2ln"},{"type":"redacted_thinking","data":"ZW5jcnlwdGVk"},` +
			`{"type":"text","text":"Seen"},{"type":"thinking","thinking":"Again"}]}`, len("Let me see") + len("Again")},
		{"server tools", llm.FormatMessages, `{"type":"message","content":[` +
			`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go"}},` +
			`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://a.example"}]},` +
			`{"type":"text","text":"Found"}]}`, len(`{"query":"go"}`)},
		{"text only", llm.FormatMessages, `{"type":"message","content":[{"type":"text","text":"no \"thinking\" here"}]}`, 0},
		{"not an answer", llm.FormatChat, `"reasoning`, 0},
	} {
		if n := UnmodelledOutput(c.f, []byte(c.body)); n != c.want {
			t.Errorf("%s: %d characters of unmodelled output, want %d", c.name, n, c.want)
		}
	}
}

// TestChatChoicesOutput: every choice of a chat answer counts, each as an answer of one choice
// is: its text (a string or text parts, else its refusal) and tool arguments as decoded, its
// reasoning as sent (the longer of the two names). An answer that cannot be read counts
// nothing.
func TestChatChoicesOutput(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"three choices", `{"choices":[` +
			`{"index":0,"message":{"role":"assistant","content":"First","reasoning_content":"Think \"twice\""}},` +
			`{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}},` +
			`{"index":2,"message":{"role":"assistant","content":null,"refusal":"No","reasoning":"Why","reasoning_content":"Why"}},` +
			`{"index":3,"message":{"role":"assistant","content":[{"type":"text","text":"Parts"}]}}]}`,
			len("First") + len(`Think \"twice\"`) + len(`{"a":1}`) + len("No") + len("Why") + len("Parts")},
		{"one choice", `{"choices":[{"index":0,"message":{"content":"Only"}}]}`, len("Only")},
		{"not an answer", `{"choices":`, 0},
	} {
		if n := ChatChoicesOutput([]byte(c.body)); n != c.want {
			t.Errorf("%s: %d characters of output, want %d", c.name, n, c.want)
		}
	}
}

// TestWholeItemOutput: a Responses stream's response.output_item.done counts what the model
// wrote in an item that no delta carries (a local shell or computer call's action as sent, a
// web search's query, url and pattern, an image generation's revised prompt), and nothing for
// an item whose deltas were counted (a function call, a message, a shell call) or for the
// tools' results (the search's sources, the image).
func TestWholeItemOutput(t *testing.T) {
	for _, c := range []struct {
		name, data string
		want       int
	}{
		{"local shell", `{"type":"response.output_item.done","item":{"type":"local_shell_call","action":{"type":"exec","command":["ls"]}}}`, len(`{"type":"exec","command":["ls"]}`)},
		{"computer", `{"type":"response.output_item.done","item":{"type":"computer_call","action":{"type":"keypress","keys":["ENTER"]}}}`, len(`{"type":"keypress","keys":["ENTER"]}`)},
		{"computer actions", `{"item":{"type":"computer_call","actions":[{"type":"wait"}]}}`, len(`[{"type":"wait"}]`)},
		{"web search", `{"item":{"type":"web_search_call","action":{"type":"search","query":"go","sources":[{"type":"url","url":"https://a.example"}]}}}`, len("go")},
		{"find", `{"item":{"type":"web_search_call","action":{"type":"find","url":"https://b.example","pattern":"x"}}}`, len("https://b.example") + len("x")},
		{"image", `{"item":{"type":"image_generation_call","revised_prompt":"a cat","result":"iVBOR"}}`, len("a cat")},
		{"image without a revised prompt", `{"item":{"type":"image_generation_call","result":"iVBOR"}}`, 0},
		{"function call", `{"item":{"type":"function_call","arguments":"{\"computer_call\":1}"}}`, 0},
		{"message", `{"item":{"type":"message","content":[{"type":"output_text","text":"web_search_call"}]}}`, 0},
		{"not an item", `{"item":"local_shell_call"}`, 0},
	} {
		if n := WholeItemOutput([]byte(c.data)); n != c.want {
			t.Errorf("%s: %d characters, want %d", c.name, n, c.want)
		}
	}
}
