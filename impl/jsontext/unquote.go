package jsontext

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnquoted appends the text of s, the contents of a JSON string between its quotes, as
// encoding/json decodes it: escapes resolved, surrogate pairs joined, and a lone surrogate or
// each byte of invalid UTF-8 replaced by U+FFFD. It reports false when s is not valid string
// content (a bad escape, a control character or an unescaped quote); dst then holds what was
// decoded up to there.
func AppendUnquoted(dst, s []byte) ([]byte, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return dst, false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				dst = append(dst, s[i+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := Hex4(s[i+2:])
				if r < 0 {
					return dst, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if len(s) >= i+2 && s[i] == '\\' && s[i+1] == 'u' {
						if r2 := Hex4(s[i+2:]); r2 >= 0 {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								dst = utf8.AppendRune(dst, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return dst, false
			}
			i += 2
		case c < 0x20 || c == '"':
			return dst, false
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

// Hex4 is the value of the four hexadecimal digits s starts with (a \u escape's), or -1.
func Hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
