package store

import "testing"

// TestCleanText: U+0000 is dropped and invalid UTF-8 replaced, as PostgreSQL's text and jsonb
// need; other text is kept as it is.
func TestCleanText(t *testing.T) {
	if got := CleanText("a\x00b\xffc"); got != "ab\uFFFDc" {
		t.Errorf("CleanText = %q", got)
	}
	if got := CleanText("plain"); got != "plain" {
		t.Errorf("CleanText = %q", got)
	}
}
