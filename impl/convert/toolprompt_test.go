package convert

import (
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestAnthropicToolTokens: a request that offers tools, in any format, counts Anthropic's
// tool-use system prompt once; a Messages request counts each of Anthropic's schema-less
// client tools' definitions beside it, however the type is escaped; an empty, null or absent
// tools member counts nothing.
func TestAnthropicToolTokens(t *testing.T) {
	for _, c := range []struct {
		f    llm.Format
		body string
		want int
	}{
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[]}`, 0},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[]}`, 0},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":null}`, 0},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, 346},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"bash_20250124","name":"bash"}]}`, 346 + 245},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"text\u005feditor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer"}]}`, 346 + 700 + 735 + 499},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 346},
		{llm.FormatChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"bash_x"}}]}`, 346},
		{llm.FormatResponses, `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, 346},
		{llm.FormatResponses, `{"model":"m","input":"hi"}`, 0},
	} {
		v, err := ReadRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := AnthropicToolTokens(c.f, v); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.f, c.body, got, c.want)
		}
	}
}
