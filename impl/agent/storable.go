package agent

import "bytes"

// What a session stores comes partly from outside (the caller's messages, the model's text and
// tool arguments, tool results read from a tenant's dataset), and PostgreSQL refuses U+0000 in
// text and jsonb alike. A step whose model call was billed and whose events then failed to
// commit on such a character would be run again, each run's call unbilled (a retry keeps the
// turn's request id, so that a crash is never billed twice): the character is dropped before
// anything is written (store.CleanText for text, as for usage records; storableJSON for jsonb).

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
