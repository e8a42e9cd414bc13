package plaintext

import "testing"

// TestVisible: printable text, in any script, is kept as it is; what would drive a terminal,
// reorder or hide text, or is not UTF-8, is written as its \u escape; newlines only when asked.
func TestVisible(t *testing.T) {
	for _, c := range []struct {
		in   string
		keep bool
		want string
	}{
		{"ci key", false, "ci key"},
		{"日本語 émoji 👩‍💻", false, `日本語 émoji 👩\u200d💻`},
		{"x\x1b]0;owned\x07\x1b[2J", false, `x\u001b]0;owned\u0007\u001b[2J`},
		{"ci \u202e", false, `ci \u202e`},
		{"a\u2067b\u2069", false, `a\u2067b\u2069`},
		{"a\u0085b\u00a0c", false, `a\u0085b\u00a0c`},
		{"a\xffb", false, `a\ufffdb`},
		{"one\ntwo", false, `one\u000atwo`},
		{"one\ntwo", true, "one\ntwo"},
		{"\U0001D11E \U000E0001", false, "\U0001D11E \\udb40\\udc01"},
	} {
		if got := Visible(c.in, c.keep); got != c.want {
			t.Errorf("Visible(%q, %v) = %q, want %q", c.in, c.keep, got, c.want)
		}
	}
}

// TestHidden: the first control character, bidirectional formatting character or byte that is
// not UTF-8 is found; printable text of any script, and zero-width joiners, are not.
func TestHidden(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  rune
		found bool
	}{
		{"Claude Code", 0, false},
		{"clаude — 日本語 👩‍💻", 0, false},
		{"a\u202eb", 0x202E, true},
		{"a\u2066b", 0x2066, true},
		{"a\u200fb", 0x200F, true},
		{"a\x00b", 0, true},
		{"\x1b[31m", 0x1B, true},
		{"a\u0085b", 0x85, true},
		{"a\xffb", 0xFFFD, true},
		// Format characters make names that show alike differ (the review of e3fc0f7):
		// zero-width space and joiner between letters, byte-order mark, soft hyphen, a tag.
		{"acme\u200b", 0x200B, true},
		{"ac\u200dme", 0x200D, true},
		{"\ufeffacme", 0xFEFF, true},
		{"ac\u00adme", 0xAD, true},
		{"acme\U000E0041", 0xE0041, true},
		{"\u200d👩", 0x200D, true},
		// Emoji sequences stay (the review of the Cf rule): a flag with its variation
		// selector, a heart on fire, a skin tone before a joiner.
		{"🏳️‍🌈 team", 0, false},
		{"❤️‍🔥", 0, false},
		{"👩🏽‍💻", 0, false},
		// Default-ignorable characters that are not format characters are refused too.
		{"ac\u034Fme", 0x034F, true},
		{"acme\uFE0F", 0xFE0F, true},
		{"ac\u180Bme", 0x180B, true},
		{"\u3164acme", 0x3164, true},
	} {
		r, found := Hidden(c.in)
		if found != c.found || r != c.want {
			t.Errorf("Hidden(%q) = %U, %v; want %U, %v", c.in, r, found, c.want, c.found)
		}
	}
	// U+FFFD written as itself is text, not a bad byte.
	if _, found := Hidden("a\uFFFDb"); found {
		t.Error("an encoded U+FFFD is taken for a bad byte")
	}
}
