package convert

import (
	"strings"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// AsksForCompaction reports whether the request v of format f asks for server-side
// compaction, which may make a sampling step of its own that summarizes the conversation,
// whose output the provider bills beside the answer's whatever the request's output bound says:
//
//   - Anthropic's, a Messages request whose context_management.edits hold an edit of a compact
//     type (compact_20260112, and a later compact_<date> alike;
//     https://platform.claude.com/docs/en/build-with-claude/compaction, "Understanding usage");
//   - OpenAI's, a Responses request whose context_management array holds an entry of type
//     compaction (with its compact_threshold; developers.openai.com/api/docs/guides/compaction,
//     "Server-side compaction": past the threshold the server runs a compaction pass and emits
//     an encrypted compaction item before the answer).
//
// Only those formats have the field; a request without it costs a look-up. A
// context_management the provider would refuse (edits, or OpenAI's entries, not an array, say)
// asks for nothing: its request is not served.
func AsksForCompaction(f llm.Format, v *jsonview.View) bool {
	if v == nil || (f != llm.FormatMessages && f != llm.FormatResponses) {
		return false
	}
	cm, ok := v.Value("context_management")
	if !ok {
		return false
	}
	if f == llm.FormatResponses {
		return hasEntryOfType(cm, func(kind string) bool { return kind == "compaction" })
	}
	var edits []byte
	_ = scanTop(cm, func(key, value []byte) error {
		if string(key) == "edits" {
			edits = value // the last of duplicated members, as the provider reads them
		}
		return nil
	})
	return hasEntryOfType(edits, func(kind string) bool { return strings.HasPrefix(kind, "compact_") })
}

// hasEntryOfType reports whether the JSON array list holds an object whose type is one match
// accepts.
func hasEntryOfType(list []byte, match func(kind string) bool) bool {
	items, _ := scanArray(list)
	for _, item := range items {
		if kind, _ := typeAndName(item); match(kind) {
			return true
		}
	}
	return false
}
