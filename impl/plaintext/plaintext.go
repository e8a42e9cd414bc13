// Package plaintext writes text a tenant wrote so that it shows as itself wherever the gateway
// shows it to someone else: an approver's page, the audit log, a label beside a key's prefix,
// the operator's terminal. Every rune that does not show itself (C0 and C1 controls such as
// ESC, which start terminal escape sequences; bidirectional overrides and isolates, which
// reorder what is around them; zero-width and other format characters; spaces other than
// ' '; bytes that are not UTF-8) is written as its JSON \u escape. Escaped JSON is the same
// JSON, so a JSON document stays one.
package plaintext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Visible returns s with every rune that is neither printable nor, when keepNewlines, a
// newline written as a \u escape (a surrogate pair beyond the Basic Multilingual Plane).
func Visible(s string, keepNewlines bool) string {
	if shows(s, keepNewlines) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' && keepNewlines, r != utf8.RuneError && unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", hi, lo)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// shows reports whether every rune of s shows itself (the common case, copied as it is).
func shows(s string, keepNewlines bool) bool {
	for _, r := range s {
		if !(r == '\n' && keepNewlines) && (r == utf8.RuneError || !unicode.IsPrint(r)) {
			return false
		}
	}
	return true
}
