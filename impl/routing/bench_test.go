package routing

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// codeRE is the regular expression LooksLikeCode replaced; the differential test holds the
// new test to its answers on texts within the window.
var codeRE = regexp.MustCompile("```|\\bfunc |\\bdef |\\bclass |\\bimport |\\breturn |#include|\\bfn |=>|\\bconst |\\bSELECT ")

// TestLooksLikeCodeAgreesWithTheRegexp: on texts no longer than two windows, LooksLikeCode
// answers as the regular expression it replaced, on hand-picked edges and on random texts
// built from the markers' pieces.
func TestLooksLikeCodeAgreesWithTheRegexp(t *testing.T) {
	texts := []string{"", "func main()", "xfunc a", "_def x", "a.def x", "é def x", "1class A",
		"``", "```", "=", "=>", "# include", "#include <x>", "SELECT * FROM t", "select * from t",
		"returns", "return x", "return", "fn(x)", "fn x", "const x", "constant x", "hello there"}
	pieces := []string{"func", "def", "class", "import", "return", "fn", "const", "SELECT", " ", "_", "x",
		"é", "#", "include", "`", "=", ">", "\n", ".", "1"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, text := range texts {
		if got, want := LooksLikeCode(text), codeRE.MatchString(text); got != want {
			t.Fatalf("LooksLikeCode(%q) = %v, the regexp says %v", text, got, want)
		}
		if LooksLikeCodeBytes([]byte(text)) != LooksLikeCode(text) {
			t.Fatalf("LooksLikeCodeBytes(%q) differs", text)
		}
	}
}

// TestLooksLikeCodeReadsBothEnds: a long text is judged by its two ends: code at either end is
// seen, code only in the middle is not.
func TestLooksLikeCodeReadsBothEnds(t *testing.T) {
	prose := strings.Repeat("lorem ipsum dolor ", 10_000)
	for name, c := range map[string]struct {
		text string
		want bool
	}{
		"head":   {"```go\n" + prose, true},
		"tail":   {prose + "\nfunc main() {}", true},
		"middle": {prose + "def f(): pass " + prose, false},
		"none":   {prose, false},
	} {
		if got := LooksLikeCode(c.text); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
		if got := LooksLikeCodeBytes([]byte(c.text)); got != c.want {
			t.Errorf("%s (bytes): %v, want %v", name, got, c.want)
		}
	}
}

// BenchmarkLooksLikeCode measures the code test on prose without code (the case that reads
// the most) of 400 KB and 30 MB, against the regular expression it replaced.
func BenchmarkLooksLikeCode(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"400KB", 400 << 10}, {"30MB", 30 << 20}} {
		text := strings.Repeat("lorem ipsum dolor sit amet the quick brown fox ", size.n/47+1)[:size.n]
		b.Run("bounded/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if LooksLikeCode(text) {
					b.Fatal("code")
				}
			}
		})
		b.Run("regexp/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if codeRE.MatchString(text) {
					b.Fatal("code")
				}
			}
		})
	}
}

// BenchmarkObserve measures the router's record of an answer, which runs on every request:
// accounts in turn, more of them than an expert's class keeps places for.
func BenchmarkObserve(b *testing.B) {
	r := NewRouter(nil)
	accounts := make([]uuid.UUID, 2*AccountsPerClass)
	for i := range accounts {
		accounts[i] = uuid.New()
	}
	f := Features{InputTokens: 200, OutputTokens: 100}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		r.Observe("p/first", accounts[i%len(accounts)], f, time.Duration(i%500)*time.Millisecond, false)
	}
}

// BenchmarkOrder measures the order of a fusion model's two experts, each with a full class of
// accounts' times to take the median of.
func BenchmarkOrder(b *testing.B) {
	r := NewRouter(nil)
	f := Features{InputTokens: 200, OutputTokens: 100}
	for i := range AccountsPerClass {
		r.Observe("p/first", uuid.New(), f, time.Duration(i)*100*time.Millisecond, false)
		r.Observe("p/second", uuid.New(), f, time.Duration(i)*150*time.Millisecond, false)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Order(twins, f)
	}
}
