package sim

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// patternString returns a string that matches pattern (read as Go's regexp reads it, which
// covers the common ECMA-262 patterns of JSON Schema) and has between minL and maxL (when
// hasMax) code points. It builds candidates from the pattern's syntax tree, repeating each
// star, plus and counted repetition a little more on every try, and keeps the first that the
// compiled pattern matches and whose length fits; failing the length, the first that matches.
// It reports false for a pattern it cannot parse (lookarounds, backreferences) or satisfy.
func (g *generator) patternString(pattern string, minL, maxL int, hasMax bool) (string, bool) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", false
	}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	first, found := "", false
	for _, extra := range repeatTries {
		var b strings.Builder
		if !g.regexAppend(&b, tree, extra) || b.Len() > genMaxLength {
			break
		}
		s := b.String()
		if !re.MatchString(s) {
			continue
		}
		if fitsLength(s, minL, maxL, hasMax) {
			return s, true
		}
		if !found {
			first, found = s, true
		}
		if hasMax && utf8.RuneCountInString(s) > maxL {
			break // more repetition only lengthens it
		}
	}
	return first, found
}

// repeatTries are the numbers of extra repetitions patternString tries, in order.
var repeatTries = [...]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 20, 24, 32, 48, 64, 96, 128}

// regexAppend appends a string matched by re, each repetition taken extra more times than its
// minimum (within its maximum). It reports false when re matches nothing or the string grows
// beyond genMaxLength.
func (g *generator) regexAppend(b *strings.Builder, re *syntax.Regexp, extra int) bool {
	if b.Len() > genMaxLength {
		return false // nested repetitions: give up on this many repeats
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		r, ok := g.classRune(re.Rune)
		if !ok {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte(niceRunes[g.below(26)])
	case syntax.OpCapture:
		return g.regexAppend(b, re.Sub[0], extra)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, -1
		case syntax.OpPlus:
			lo, hi = 1, -1
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		n := lo + extra
		if hi >= 0 && n > hi {
			n = hi
		}
		for i := 0; i < n; i++ {
			if !g.regexAppend(b, re.Sub[0], extra) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !g.regexAppend(b, sub, extra) {
				return false
			}
		}
	case syntax.OpAlternate:
		return g.regexAppend(b, re.Sub[g.below(len(re.Sub))], extra)
	}
	// OpEmptyMatch and the zero-width assertions (^ $ \A \z \b \B) add nothing.
	return true
}

// niceRunes are the characters a character class is preferably satisfied with.
const niceRunes = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_."

// classRune picks a rune of the character class given as lo-hi range pairs: one of niceRunes
// when the class has some, else its first printable ASCII rune, else its first valid rune.
func (g *generator) classRune(ranges []rune) (rune, bool) {
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	var nice []rune
	for _, r := range niceRunes {
		if in(r) {
			nice = append(nice, r)
		}
	}
	if len(nice) > 0 {
		return nice[g.below(len(nice))], true
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		if r := max(ranges[i], '!'); r <= ranges[i+1] && r < 0x7f {
			return r, true
		}
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r < ranges[i]+0x1000; r++ {
			if utf8.ValidRune(r) {
				return r, true
			}
		}
	}
	return 0, false
}
