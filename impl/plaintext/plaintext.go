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

// Hidden returns the first rune of s that would hide or reorder what is shown around it where
// a tenant's name is shown as it is (a key's name beside its prefix, an OAuth client's name on
// the consent page), or make two names that show alike differ: a control character (C0, DEL,
// C1), a format character (Unicode's category Cf: the bidirectional marks, embeddings,
// overrides and isolates, zero-width spaces and joiners, the byte-order mark, the soft hyphen,
// tag characters) or another default-ignorable one (the combining grapheme joiner, variation
// selectors, Hangul fillers, ...), but for the joiners and variation selectors of an emoji
// sequence (👩🏽‍💻), or utf8.RuneError for bytes that are not UTF-8; found is false when s has
// none. Names are refused with such a rune rather than escaped.
func Hidden(s string) (r rune, found bool) {
	prev := rune(0)
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return r, true
			}
		}
		if unicode.IsControl(r) || isBidiControl(r) {
			return r, true
		}
		if (unicode.Is(unicode.Cf, r) || isDefaultIgnorable(r)) && !inEmoji(r, prev, s[i+utf8.RuneLen(r):]) {
			return r, true
		}
		prev = r
	}
	return 0, false
}

// The characters that take part in an emoji sequence, which shows as one picture (👩🏽‍💻,
// 🏳️‍🌈, ❤️‍🔥).
const (
	zeroWidthJoiner         = 0x200D // joins two emoji into one
	emojiPresentation       = 0xFE0F // variation selector 16: the emoji form of a symbol
	emojiModifierFitzpatric = 0x1F3FB
)

// inEmoji reports whether r, an invisible character after prev and before rest, is part of an
// emoji sequence: a variation selector 16 after a symbol, or a zero-width joiner between an
// emoji (a symbol, which may end with a skin-tone modifier or a variation selector 16) and a
// symbol. Elsewhere such a character only hides, or makes two names that show alike differ.
func inEmoji(r, prev rune, rest string) bool {
	emojiEnd := unicode.Is(unicode.So, prev) || prev == emojiPresentation || (prev >= emojiModifierFitzpatric && prev <= emojiModifierFitzpatric+4)
	switch r {
	case emojiPresentation:
		return unicode.Is(unicode.So, prev)
	case zeroWidthJoiner:
		next, _ := utf8.DecodeRuneInString(rest)
		return emojiEnd && unicode.Is(unicode.So, next)
	}
	return false
}

// isDefaultIgnorable reports whether r is one of Unicode's default-ignorable code points that
// are not format characters (category Cf, tested apart): they show as nothing (the combining
// grapheme joiner, the Hangul fillers, variation selectors, the Mongolian free variation
// selectors, ...), so that "acme" and "acme" with one of them read alike.
func isDefaultIgnorable(r rune) bool {
	switch {
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5, r == 0x3164, r == 0xFFA0:
		return true
	case r >= 0x180B && r <= 0x180F, r >= 0xFE00 && r <= 0xFE0F, r >= 0xFFF0 && r <= 0xFFF8,
		r >= 0xE0100 && r <= 0xE01EF, r >= 0x1D173 && r <= 0x1D17A:
		return true
	}
	return false
}

// isBidiControl reports whether r is one of Unicode's bidirectional formatting characters
// (marks, embeddings, overrides and isolates).
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

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
