package agent

import (
	"bytes"
	"strings"
)

// What a session stores comes partly from outside (the caller's messages, the model's text and
// tool arguments, tool results read from a tenant's dataset), and PostgreSQL refuses U+0000 in
// text and jsonb alike. A step whose model call was billed and whose events then failed to
// commit on such a character would be run again, each run's call unbilled (a retry keeps the
// turn's request id, so that a crash is never billed twice): the character is dropped before
// anything is written, as impl/store does for usage records.

// storable returns s without U+0000 and with invalid UTF-8 replaced by U+FFFD: text PostgreSQL
// stores.
func storable(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// storableJSON returns the JSON document b without the \u0000 escapes in its strings, which
// jsonb refuses (encoding/json writes U+0000 as one); b itself when it has none.
func storableJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(b):
			if i+5 < len(b) && string(b[i+1:i+6]) == "u0000" {
				i += 5
				continue
			}
			out = append(out, c, b[i+1])
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}
