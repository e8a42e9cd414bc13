package apikey

import (
	"errors"
	"hash/crc32"
	"math/big"
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
		_, err := Parse(key)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse(%q) err = %v, want ErrMalformed", name, key, err)
		}
		// A key of the right form with a character changed is told apart, for a clearer
		// message to its sender; anything else is not.
		if typo := strings.HasSuffix(name, "typo"); errors.Is(err, ErrChecksum) != typo {
			t.Errorf("%s: Parse(%q) err = %v: ErrChecksum %v, want %v", name, key, err, !typo, typo)
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

// TestChecksumMatchesBigIntEncoding: the integer checksum writes the same digits as the
// arbitrary-precision base62 encoder that key bodies use, including CRCs that need all six.
func TestChecksumMatchesBigIntEncoding(t *testing.T) {
	for i := range 2000 {
		g, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		body := g.Plain[len(Prefix) : len(Prefix)+bodyLen]
		if i%2 == 1 {
			body = strings.Repeat(string(alphabet[i%62]), bodyLen)
		}
		want := encode(new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(body)))), checksumLen)
		if got := checksum(body); got != want {
			t.Fatalf("checksum(%q) = %q, want %q", body, got, want)
		}
	}
}

// Parse runs on every authenticated request; it must not allocate.
func TestParseAllocatesNothing(t *testing.T) {
	g, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(g.Plain) }); n != 0 {
		t.Fatalf("Parse allocates %v times per call", n)
	}
}
