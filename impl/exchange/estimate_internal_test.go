package exchange

import (
	"strings"
	"testing"
)

// TestSizeEstimateCountsEachEscapeAsAToken: a request known by its size alone whose text is
// \uXXXX escapes is estimated at least one token an escaped code point, what a provider counts
// for text made to be dense (a CJK character, an accented letter alone, is a token or more of
// o200k_base and of Anthropic's tokenizer), and a surrogate pair (twelve bytes, one emoji) at
// least one as well. Before, each escape counted as one byte at three bytes a token: 1,000
// escaped characters were estimated at 367 tokens.
func TestSizeEstimateCountsEachEscapeAsAToken(t *testing.T) {
	for _, c := range []struct {
		name       string
		escape     string
		codePoints int
	}{
		{"CJK", `\u4e00`, 1000},
		{"accented", `\u00e9`, 1000},
		{"surrogate pairs", `\ud83d\ude00`, 500},
	} {
		text := strings.Repeat(c.escape, c.codePoints)
		body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + text + `"}]}`)
		if got := EstimateBySize(body); got < c.codePoints {
			t.Errorf("%s: %d escaped code points estimated at %d tokens", c.name, c.codePoints, got)
		}
	}
	// Plain text keeps its estimate: three bytes a token and the fixed 16.
	if got, want := EstimateBySize([]byte(strings.Repeat("a", 300))), 116; got != want {
		t.Errorf("300 bytes without escapes estimated at %d, want %d", got, want)
	}
}
