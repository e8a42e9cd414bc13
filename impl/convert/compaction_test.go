package convert

import (
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestAsksForCompaction: a Messages request asks for server-side compaction when an edit of
// its context_management is of a compact type, whichever its place among the edits and however
// its name is escaped; a Responses request when an entry of its context_management array is of
// type compaction (OpenAI's); another edit (clearing tool results), an entry of the other
// provider's type, a chat request's field of the same name or a malformed one asks for nothing.
func TestAsksForCompaction(t *testing.T) {
	for _, c := range []struct {
		f    llm.Format
		body string
		want bool
	}{
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"compact_20260112"}]}}`, true},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"clear_tool_uses_20250919"},{"trigger":{"type":"input_tokens","value":50000},"type":"compact_20260112"}]}}`, true},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"compact\u005f20260112"}]}}`, true},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"compact_20270301"}]}}`, true},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`, false},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":[{"type":"compact_20260112"}]},"context_management":{"edits":[]}}`, false},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":{"edits":{"type":"compact_20260112"}}}`, false},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"context_management":null}`, false},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"compact_20260112"}]}`, false},
		{llm.FormatResponses, `{"model":"m","input":"hi","context_management":[{"type":"compaction","compact_threshold":200000}]}`, true},
		{llm.FormatResponses, `{"model":"m","input":"hi","context_management":[{"type":"compaction"}]}`, true},
		{llm.FormatResponses, `{"model":"m","input":"hi","context_management":{"type":"compaction"}}`, false},
		{llm.FormatResponses, `{"model":"m","input":"hi","context_management":[{"type":"compact_20260112"}]}`, false},
		{llm.FormatResponses, `{"model":"m","input":"compaction"}`, false},
		{llm.FormatChat, `{"model":"m","messages":[],"context_management":[{"type":"compaction"}]}`, false},
	} {
		v, err := ReadRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := AsksForCompaction(c.f, v); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.f, c.body, got, c.want)
		}
	}
}
