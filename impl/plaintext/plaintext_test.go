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
