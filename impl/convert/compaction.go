package convert

import (
	"strings"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// AsksForCompaction reports whether the request v of format f asks for Anthropic's server-side
// compaction: a Messages request whose context_management.edits hold an edit of a compact type
// (compact_20260112, and a later compact_<date> alike). Such a request may make a sampling step
// of its own that summarizes the conversation, whose output the provider bills beside the
// answer's, whatever max_tokens says (https://platform.claude.com/docs/en/build-with-claude/compaction,
// "Understanding usage"). Only the Messages format has the field; a request without it costs a
// look-up. A context_management the provider would refuse (edits not an array, say) asks for
// nothing: its request is not served.
func AsksForCompaction(f llm.Format, v *jsonview.View) bool {
	if f != llm.FormatMessages || v == nil {
		return false
	}
	cm, ok := v.Value("context_management")
	if !ok {
		return false
	}
	var edits []byte
	_ = scanTop(cm, func(key, value []byte) error {
		if string(key) == "edits" {
			edits = value // the last of duplicated members, as the provider reads them
		}
		return nil
	})
	items, _ := scanArray(edits)
	for _, edit := range items {
		if kind, _ := typeAndName(edit); strings.HasPrefix(kind, "compact_") {
			return true
		}
	}
	return false
}
