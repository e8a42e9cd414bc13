package web

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
)

// How the console writes money (docs/web.md, "Money on the pages"). Amounts are integer
// micro-dollars everywhere; a page writes them to the cent, as a person reads a price:
//
//   - a whole number of cents as it is, with thousands separators: "$1,234.50", "$0.00";
//   - any other amount of a cent or more rounded to the nearest cent (half away from zero):
//     "$0.012345" is "$0.01";
//   - an amount under a cent that is not zero as "< $0.01" (a negative one, such as a saving by
//     caching that cost more than it saved, as "−< $0.01"), never as "$0.00", which would say
//     nothing was spent;
//   - every amount that was rounded carries its exact value, to the micro-dollar, in the
//     title attribute of its element ("$0.000116"), shown when the pointer rests on it.
//
// Exact amounts stay where they are arithmetic to check rather than amounts to read: a
// request's "how this cost was made" lines (count × rate = cost, which must add up), an
// agent session's event log (a record of each call), an approval's arguments, and the CSV
// exports and statements.

// microsPerCent is a cent in micro-dollars.
const microsPerCent = 10_000

// moneyText writes micros to the cent, as the rules above say.
func moneyText(micros int64) string {
	neg := micros < 0
	abs := micros
	if neg {
		abs = -micros
	}
	if abs > 0 && abs < microsPerCent {
		if neg {
			return "−< $0.01"
		}
		return "< $0.01"
	}
	cents := (abs + microsPerCent/2) / microsPerCent
	s := "$" + thousands(cents/100) + "." + twoDigits(cents%100)
	if neg {
		return "−" + s
	}
	return s
}

// moneyRounded reports whether moneyText(micros) is not exactly micros.
func moneyRounded(micros int64) bool { return micros%microsPerCent != 0 }

// moneyExact writes micros exactly, to the micro-dollar ("$0.000116", "$1,234.500000").
func moneyExact(micros int64) string {
	sign, abs := "", micros
	if micros < 0 {
		sign, abs = "−", -micros
	}
	return fmt.Sprintf("%s$%s.%06d", sign, thousands(abs/1_000_000), abs%1_000_000)
}

// moneyHTML is the template function "money": micros to the cent in a span of class money,
// with the exact amount as its title when it was rounded.
func moneyHTML(micros int64) template.HTML {
	text := template.HTMLEscapeString(moneyText(micros))
	if !moneyRounded(micros) {
		return template.HTML(`<span class="money">` + text + `</span>`)
	}
	return template.HTML(`<span class="money" title="` + template.HTMLEscapeString(moneyExact(micros)) + `">` + text + `</span>`)
}

// thousands writes n (0 or more) with a comma every three digits.
func thousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func twoDigits(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
