package dataset

import (
	"strings"
	"unicode/utf8"
)

// maxSQLLen bounds the text of one query.
const maxSQLLen = 64 << 10

// checkSelect is the first of the two checks that a query is one SELECT or WITH statement (the
// second is DuckDB's own parser: see runQuery). It scans the text the way DuckDB's lexer does
// (standard and E” strings, quoted identifiers, dollar-quoted strings, line comments and
// nested block comments) and refuses a ';' that is followed by anything but blanks and
// comments, text that does not end where it should (an open string or comment), and a first
// keyword other than SELECT or WITH. It returns the statement without its trailing
// semicolon and comments, ready to be wrapped as a subquery.
func checkSelect(sql string) (string, *Error) {
	if len(sql) > maxSQLLen {
		return "", userErr(CodeRefused, "the query is longer than %d bytes", maxSQLLen)
	}
	if !utf8.ValidString(sql) || strings.ContainsRune(sql, 0) {
		return "", userErr(CodeRefused, "the query is not valid text")
	}
	first := ""   // the first keyword
	end := 0      // the end of the last significant token
	semi := false // a statement-ending ';' has been seen
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(sql)
			}
			continue
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			depth := 0
			for {
				switch {
				case i >= len(sql):
					return "", userErr(CodeRefused, "the query has an unterminated comment")
				case strings.HasPrefix(sql[i:], "/*"):
					depth++
					i += 2
				case strings.HasPrefix(sql[i:], "*/"):
					depth--
					i += 2
				default:
					i++
				}
				if depth == 0 {
					break
				}
			}
			continue
		}
		// A significant token.
		if c == ';' {
			semi = true
			i++
			continue // not part of the statement
		}
		if semi {
			return "", userErr(CodeRefused, "only one statement is allowed")
		}
		switch {
		case c == '\'':
			j, ok := scanQuoted(sql, i, '\'', isEscapeString(sql, i))
			if !ok {
				return "", userErr(CodeRefused, "the query has an unterminated string")
			}
			i = j
		case c == '"':
			j, ok := scanQuoted(sql, i, '"', false)
			if !ok {
				return "", userErr(CodeRefused, "the query has an unterminated quoted identifier")
			}
			i = j
		case c == '$':
			j, ok := scanDollar(sql, i)
			if !ok {
				return "", userErr(CodeRefused, "the query has an unterminated dollar-quoted string")
			}
			i = j
		case isIdentStart(c):
			j := i
			for j < len(sql) && isIdentPart(sql[j]) {
				j++
			}
			if first == "" {
				first = strings.ToUpper(sql[i:j])
			}
			i = j
		default:
			if first == "" && c != '(' {
				first = string(c)
			}
			i++
		}
		end = i
	}
	switch first {
	case "SELECT", "WITH":
		return sql[:end], nil
	case "":
		return "", userErr(CodeRefused, "the query is empty")
	}
	return "", userErr(CodeRefused, "only a SELECT or WITH query is allowed, not %s", first)
}

// isEscapeString reports whether the quote at i opens an E” string, in which a backslash
// escapes the next character.
func isEscapeString(sql string, i int) bool {
	return i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i == 1 || !isIdentPart(sql[i-2]))
}

// scanQuoted returns the index just after the string or quoted identifier that opens at i,
// where a doubled quote stands for itself.
func scanQuoted(sql string, i int, q byte, backslash bool) (int, bool) {
	for i++; i < len(sql); i++ {
		switch sql[i] {
		case '\\':
			if backslash {
				i++
			}
		case q:
			if i+1 < len(sql) && sql[i+1] == q {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return 0, false
}

// scanDollar returns the index just after the dollar-quoted string ($tag$...$tag$) that opens
// at i, or after a lone '$' (a parameter such as $1, which fails later).
func scanDollar(sql string, i int) (int, bool) {
	j := i + 1
	for j < len(sql) && (isIdentStart(sql[j]) || j > i+1 && sql[j] >= '0' && sql[j] <= '9') {
		j++
	}
	if j >= len(sql) || sql[j] != '$' {
		return i + 1, true
	}
	tag := sql[i : j+1]
	k := strings.Index(sql[j+1:], tag)
	if k < 0 {
		return 0, false
	}
	return j + 1 + k + len(tag), true
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' || c == '$' }
