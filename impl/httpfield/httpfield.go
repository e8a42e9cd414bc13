// Package httpfield holds the HTTP/1.1 field syntax that impl/h1server (request heads) and
// impl/upstreamconn (response heads) both check by hand on their lean paths, with the rules
// net/http applies: tokens, the bytes a field value may hold, and Content-Length.
package httpfield

import "golang.org/x/net/http/httpguts"

// IsToken reports whether b is a non-empty RFC 9110 token, the rule net/http applies to
// methods and field names.
func IsToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tokenTable[c] {
			return false
		}
	}
	return true
}

var tokenTable = func() (t [256]bool) {
	for c := 0; c < 128; c++ {
		t[c] = httpguts.IsTokenRune(rune(c))
	}
	return t
}()

// ValidValueByte reports whether c may appear in a field value or a reason phrase: anything
// but a control character other than the tab.
func ValidValueByte(c byte) bool {
	return c >= ' ' && c != 0x7f || c == '\t'
}

// ParseContentLength parses a Content-Length value as net/http does (strconv.ParseUint with 63
// bits), refusing anything longer than 18 digits rather than checking for overflow: the callers
// leave those to net/http.
func ParseContentLength(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
