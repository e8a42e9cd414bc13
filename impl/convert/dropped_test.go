package convert

import (
	"slices"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestDecodedAnswersNameWhatTheyDrop: each upstream format's complete answer names, once each,
// the parts the neutral answer has no place for, as paths in its own format: a chat
// message's reasoning_content (DeepSeek's and vLLM's reasoning text) and an annotation other
// than url_citation; a Responses reasoning item, a hosted tool's call item and a content part
// of a type not read; a Messages thinking block, a server tool's blocks and a citation other
// than a web page's. What is carried (text, tool calls, web citations) is not named.
func TestDecodedAnswersNameWhatTheyDrop(t *testing.T) {
	for _, c := range []struct {
		f    llm.Format
		body string
		want []string
	}{
		{llm.FormatChat, `{"id":"c1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"thought","annotations":[{"type":"url_citation","url_citation":{"url":"https://a.example","title":"A","start_index":0,"end_index":2}},{"type":"file_citation"},{"type":"file_citation"}]},"finish_reason":"stop"}]}`,
			[]string{"choices[].message.annotations[].file_citation", "choices[].message.reasoning_content"}},
		{llm.FormatChat, `{"id":"c2","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, nil},
		{llm.FormatResponses, `{"id":"r1","model":"m","status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"web_search_call","status":"completed"},{"type":"message","content":[{"type":"output_text","text":"hi","annotations":[{"type":"file_citation"}]},{"type":"output_audio"}]},{"type":"reasoning","summary":[]}]}`,
			[]string{"output[].reasoning", "output[].web_search_call", "output[].content[].annotations[].file_citation", "output[].content[].output_audio"}},
		{llm.FormatMessages, `{"id":"m1","type":"message","model":"m","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"hi","citations":[{"type":"page_location","cited_text":"hi"},{"type":"web_search_result_location","url":"https://a.example","title":"A"}]},{"type":"tool_use","id":"toolu_1","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`,
			[]string{"content[].thinking", "content[].redacted_thinking", "content[].server_tool_use", "content[].web_search_tool_result", "content[].citations[].page_location"}},
	} {
		r, err := DecodeResponse(c.f, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.f, err)
		}
		if !slices.Equal(r.Dropped, c.want) {
			t.Errorf("%s %s: Dropped %q, want %q", c.f, r.ID, r.Dropped, c.want)
		}
	}
}
