package sim

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// stringValue writes a string: one that matches the schema's pattern when it has one the
// generator can satisfy, else a value of its format when it names a known one, else one to
// three vocabulary words, lengthened or cut to fit minLength and maxLength.
func (g *generator) stringValue(fs *jsonObject) {
	minL, _ := intKeyword(fs, "minLength", genMaxLength)
	maxL, hasMax := intKeyword(fs, "maxLength", genMaxLength)
	if p := fs.str("pattern"); p != "" {
		if s, ok := g.patternString(p, minL, maxL, hasMax); ok {
			g.f.str(s)
			return
		}
	}
	if s, ok := g.formatted(fs.str("format")); ok && fitsLength(s, minL, maxL, hasMax) {
		g.f.str(s)
		return
	}
	g.f.words(g.sentence(minL, maxL, hasMax))
}

// fitsLength reports whether s has between minL and maxL (when hasMax) code points.
func fitsLength(s string, minL, maxL int, hasMax bool) bool {
	n := utf8.RuneCountInString(s)
	return n >= minL && (!hasMax || n <= maxL)
}

// sentence returns one to three words, more while their text (joined by single spaces) is
// shorter than minL, and, while it is longer than maxL, fewer (as long as minL stays met) and
// then the last one cut short.
func (g *generator) sentence(minL, maxL int, hasMax bool) []string {
	ws := make([]string, 1+g.below(3))
	n := -1
	for i := range ws {
		ws[i] = g.word()
		n += 1 + len(ws[i])
	}
	for n < minL {
		w := g.word()
		ws = append(ws, w)
		n += 1 + len(w)
	}
	if !hasMax {
		return ws
	}
	if maxL == 0 {
		return nil
	}
	for n > maxL && len(ws) > 1 && n-1-len(ws[len(ws)-1]) >= minL {
		n -= 1 + len(ws[len(ws)-1])
		ws = ws[:len(ws)-1]
	}
	if n > maxL {
		last := ws[len(ws)-1]
		ws[len(ws)-1] = last[:max(len(last)-(n-maxL), 0)]
	}
	return ws
}

// formatted returns a value of a JSON Schema format, or false for a format it does not know.
func (g *generator) formatted(format string) (string, bool) {
	if format == "" {
		return "", false
	}
	x := g.next()
	date := fmt.Sprintf("%04d-%02d-%02d", 2020+x%6, 1+(x>>8)%12, 1+(x>>16)%28)
	clock := fmt.Sprintf("%02d:%02d:%02d", (x>>24)%24, (x>>32)%60, (x>>40)%60)
	w := vocabulary[(x>>48)%uint64(len(vocabulary))]
	switch format {
	case "date":
		return date, true
	case "date-time":
		return date + "T" + clock + "Z", true
	case "time":
		return clock + "Z", true
	case "email", "idn-email":
		return w + "@example.com", true
	case "hostname", "idn-hostname":
		return w + ".example.com", true
	case "uri", "iri", "uri-reference", "iri-reference", "url":
		return "https://example.com/" + w, true
	case "uri-template":
		return "https://example.com/" + w + "/{id}", true
	case "uuid":
		return g.uuid(), true
	case "ipv4":
		return fmt.Sprintf("192.0.2.%d", 1+x%254), true
	case "ipv6":
		return fmt.Sprintf("2001:db8::%x", 1+x%0xfffe), true
	case "duration":
		return fmt.Sprintf("P%dD", 1+x%30), true
	case "json-pointer":
		return "/" + w, true
	case "relative-json-pointer":
		return "0/" + w, true
	case "regex":
		return "^" + w + "$", true
	}
	return "", false
}

// uuid returns a version 4 UUID drawn from the generator's sequence.
func (g *generator) uuid() string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	a, c := g.next(), g.next()
	for i := 0; i < 32; i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b.WriteByte('-')
		}
		src := &a
		if i >= 16 {
			src = &c
		}
		d := *src & 15
		*src >>= 4
		switch i {
		case 12:
			d = 4
		case 16:
			d = 8 | d&3
		}
		b.WriteByte(hex[d])
	}
	return b.String()
}
