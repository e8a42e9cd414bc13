package sim

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// vocabulary is the fixed word list replies are drawn from. Every word is lower-case ASCII
// letters, so it needs no JSON escaping and is one token.
var vocabulary = [...]string{
	"amber", "bridge", "cobalt", "delta", "ember", "falcon", "garnet", "harbor",
	"island", "jasper", "kernel", "lantern", "meadow", "nectar", "orbit", "pepper",
	"quartz", "river", "signal", "timber", "umbra", "velvet", "willow", "xenon",
	"yonder", "zephyr", "anchor", "basalt", "canyon", "dune", "echo", "fjord",
	"glacier", "horizon", "indigo", "juniper", "kestrel", "lagoon", "marble", "nimbus",
	"onyx", "prairie", "quiver", "ridge", "summit", "tundra", "upland", "vertex",
	"walnut", "yarrow", "zenith", "atlas", "beacon", "cinder", "drift", "fable",
	"grove", "haven", "ivory", "jetty", "knoll", "lumen", "mosaic", "north",
}

// hashText is 64-bit FNV-1a over the model id, a zero byte and the prompt.
func hashText(model, prompt string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(model); i++ {
		h ^= uint64(model[i])
		h *= prime
	}
	h *= prime // the zero separator
	for i := 0; i < len(prompt); i++ {
		h ^= uint64(prompt[i])
		h *= prime
	}
	return h
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// word returns the i-th word of the reply seeded by seed.
func word(seed uint64, i int) string {
	return vocabulary[mix(seed+uint64(i)*0x9e3779b97f4a7c15)%uint64(len(vocabulary))]
}

// appendToken appends the i-th token (the word, with a leading space after the first).
func appendToken(b []byte, seed uint64, i int) []byte {
	if i > 0 {
		b = append(b, ' ')
	}
	return append(b, word(seed, i)...)
}

// appendObfuscation appends the deterministic padding OpenAI puts on stream deltas: 1 to 16
// characters of base62 derived from seed and i, as a JSON string.
func appendObfuscation(b []byte, seed uint64, i int) []byte {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	x := mix(seed ^ (uint64(i+1) * 0xd6e8feb86659fd93))
	n := 1 + int(x%16)
	b = append(b, '"')
	for k := 0; k < n; k++ {
		x = mix(x)
		b = append(b, alphabet[x%62])
	}
	return append(b, '"')
}

// counter accumulates the characters of a request's conversation text and, once startHash
// has been called, the prompt-cache hash of the prompt read so far (see cache.go).
type counter struct {
	chars int

	hashing bool
	h       maphash.Hash
	// step is the distance between checkpoints in characters (stepChars on the OpenAI
	// routes, 0 on Messages); next is the characters at the next checkpoint.
	step, next int
	// points holds the hash at every checkpoint reached (OpenAI).
	points []uint64
	// blocks holds the content block boundaries (Messages).
	blocks []boundary
}

// add counts (and hashes) the text s.
func (c *counter) add(s string) {
	n := utf8.RuneCountInString(s)
	if c.hashing {
		c.hashText(s, n)
	}
	c.chars += n
}

// addRaw counts (and hashes) the JSON text b.
func (c *counter) addRaw(b json.RawMessage) {
	if c.hashing && c.step > 0 {
		c.add(string(b))
		return
	}
	if c.hashing {
		_, _ = c.h.Write(b)
	}
	c.chars += utf8.RuneCount(b)
}

// tokens is ceil(chars/4), at least 1.
func (c *counter) tokens() int {
	t := (c.chars + 3) / 4
	if t < 1 {
		t = 1
	}
	return t
}

// rawString decodes b as a JSON string; ok is false when it is not one.
func rawString(b json.RawMessage) (string, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether b is absent or JSON null.
func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || string(b) == "null"
}

// textPart is a content part or block; only its text matters to the simulator.
type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// contentText returns the text of a content value that is a string or an array of parts
// with a text field (text, input_text, output_text). Other parts contribute nothing.
func contentText(raw json.RawMessage) string {
	if s, ok := rawString(raw); ok {
		return s
	}
	var parts []textPart
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var sb strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(p.Text)
		}
	}
	return sb.String()
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }

// appendRaw appends the compacted JSON value raw, or def when raw is absent or invalid.
func appendRaw(b []byte, raw json.RawMessage, def string) []byte {
	if len(bytes.TrimSpace(raw)) == 0 {
		return append(b, def...)
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return append(b, def...)
	}
	return buf.Bytes()
}

// appendInt appends n in decimal.
func appendInt(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }
