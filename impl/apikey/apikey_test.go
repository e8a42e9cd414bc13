package apikey

import (
	"strings"
	"testing"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		g, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Plain) != Len || !strings.HasPrefix(g.Plain, Prefix) {
			t.Fatalf("bad shape %q", g.Plain)
		}
		if seen[g.Plain] {
			t.Fatal("duplicate key")
		}
		seen[g.Plain] = true
		h, err := Parse(g.Plain)
		if err != nil || h != g.Hash {
			t.Fatalf("Parse(%q) = %x, %v; want %x", g.Plain, h, err, g.Hash)
		}
		if g.DisplayPrefix != g.Plain[:DisplayLen] {
			t.Fatalf("display prefix %q", g.DisplayPrefix)
		}
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	g, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
		return string(b)
	}
	cases := map[string]string{
		"empty":         "",
		"wrong prefix":  "sk_" + g.Plain[3:],
		"truncated":     g.Plain[:Len-1],
		"too long":      g.Plain + "0",
		"body typo":     flip(g.Plain, len(Prefix)+5),
		"checksum typo": flip(g.Plain, Len-1),
		"non-base62":    g.Plain[:10] + "-" + g.Plain[11:],
		"upper-cased":   strings.ToUpper(g.Plain),
	}
	for name, key := range cases {
		if _, err := Parse(key); err != ErrMalformed {
			t.Errorf("%s: Parse(%q) err = %v, want ErrMalformed", name, key, err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	g, _ := Generate()
	for b.Loop() {
		if _, err := Parse(g.Plain); err != nil {
			b.Fatal(err)
		}
	}
}
