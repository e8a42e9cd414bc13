package dataset

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The load filter is a small predicate language parsed here and turned into SQL from the parse
// tree, so that nothing the caller wrote is pasted into a statement:
//
//	expr       = or
//	or         = and { "OR" and }
//	and        = unary { "AND" unary }
//	unary      = "NOT" unary | "(" expr ")" | comparison
//	comparison = column ( op literal
//	                    | [ "NOT" ] "LIKE" string
//	                    | [ "NOT" ] "IN" "(" literal { "," literal } ")"
//	                    | "IS" [ "NOT" ] "NULL" )
//	op         = "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	column     = identifier | '"' quoted identifier '"'
//	literal    = string | number | "TRUE" | "FALSE"
//	string     = "'" { character | "''" } "'"
//	number     = [ "-" ] digits [ "." digits ] [ ( "e" | "E" ) [ "+" | "-" ] digits ]
//
// Keywords are case-insensitive. Every column must be one of the dataset's columns.

// Limits of the filter language.
const (
	maxFilterLen   = 4096
	maxFilterDepth = 32
	maxInItems     = 1000
)

// node is a parsed filter expression.
type node interface {
	sql(b *strings.Builder)
}

type (
	boolNode struct {
		op   string // "AND" or "OR"
		l, r node
	}
	notNode     struct{ x node }
	compareNode struct {
		col string
		op  string
		lit literal
	}
	likeNode struct {
		col string
		not bool
		pat string
	}
	inNode struct {
		col  string
		not  bool
		lits []literal
	}
	nullNode struct {
		col string
		not bool
	}
)

// literal is a parsed constant: a string, a number (kept as its canonical text) or a boolean.
type literal struct {
	kind byte // 's', 'n' or 'b'
	s    string
}

func (l literal) sql(b *strings.Builder) {
	switch l.kind {
	case 's':
		b.WriteString(quoteString(l.s))
	default:
		b.WriteString(l.s)
	}
}

func (n boolNode) sql(b *strings.Builder) {
	b.WriteByte('(')
	n.l.sql(b)
	b.WriteString(") " + n.op + " (")
	n.r.sql(b)
	b.WriteByte(')')
}

func (n notNode) sql(b *strings.Builder) {
	b.WriteString("NOT (")
	n.x.sql(b)
	b.WriteByte(')')
}

func (n compareNode) sql(b *strings.Builder) {
	b.WriteString(quoteIdent(n.col) + " " + n.op + " ")
	n.lit.sql(b)
}

func (n likeNode) sql(b *strings.Builder) {
	b.WriteString(quoteIdent(n.col))
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" LIKE " + quoteString(n.pat))
}

func (n inNode) sql(b *strings.Builder) {
	b.WriteString(quoteIdent(n.col))
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, l := range n.lits {
		if i > 0 {
			b.WriteString(", ")
		}
		l.sql(b)
	}
	b.WriteByte(')')
}

func (n nullNode) sql(b *strings.Builder) {
	b.WriteString(quoteIdent(n.col) + " IS ")
	if n.not {
		b.WriteString("NOT ")
	}
	b.WriteString("NULL")
}

// quoteIdent quotes a column or table name as a DuckDB identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteString quotes s as a DuckDB string literal (standard SQL: only the quote is special).
func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// token is one lexical token of the filter language.
type token struct {
	kind byte // 'i' identifier or keyword, 'q' quoted identifier, 's' string, 'n' number, 'p' punctuation, 0 end
	text string
	pos  int
}

func lexFilter(src string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			start := i
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, fmt.Errorf("unterminated %c at offset %d", c, start)
				}
				if src[i] == c {
					if i+1 < len(src) && src[i+1] == c {
						b.WriteByte(c)
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			kind := byte('s')
			if c == '"' {
				kind = 'q'
				if b.Len() == 0 {
					return nil, fmt.Errorf("empty column name at offset %d", start)
				}
			}
			toks = append(toks, token{kind: kind, text: b.String(), pos: start})
		case c >= '0' && c <= '9' || c == '-' || c == '.':
			start := i
			if c == '-' {
				i++
			}
			for i < len(src) && (src[i] >= '0' && src[i] <= '9' || src[i] == '.' ||
				src[i] == 'e' || src[i] == 'E' ||
				(src[i] == '+' || src[i] == '-') && (src[i-1] == 'e' || src[i-1] == 'E')) {
				i++
			}
			toks = append(toks, token{kind: 'n', text: src[start:i], pos: start})
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			start := i
			for i < len(src) && (src[i] == '_' || src[i] >= 'A' && src[i] <= 'Z' || src[i] >= 'a' && src[i] <= 'z' || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			toks = append(toks, token{kind: 'i', text: src[start:i], pos: start})
		default:
			start := i
			for _, op := range []string{"<=", ">=", "!=", "<>", "=", "<", ">", "(", ")", ","} {
				if strings.HasPrefix(src[i:], op) {
					toks = append(toks, token{kind: 'p', text: op, pos: start})
					i += len(op)
					break
				}
			}
			if i == start {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, fmt.Errorf("unexpected %q at offset %d", r, i)
			}
		}
	}
	return append(toks, token{pos: len(src)}), nil
}

// filterParser is a recursive-descent parser over the tokens of one filter.
type filterParser struct {
	toks    []token
	i       int
	depth   int
	columns map[string]string // lower-case name -> the dataset's spelling
}

// parseFilter parses src into a tree whose columns are all in columns (keyed by lower-case
// name, valued by the dataset's spelling, which the tree uses).
func parseFilter(src string, columns map[string]string) (node, error) {
	if len(src) > maxFilterLen {
		return nil, fmt.Errorf("longer than %d bytes", maxFilterLen)
	}
	if !utf8.ValidString(src) || strings.ContainsRune(src, 0) {
		return nil, fmt.Errorf("not valid text")
	}
	toks, err := lexFilter(src)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks, columns: columns}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != 0 {
		return nil, fmt.Errorf("unexpected %q at offset %d", t.text, t.pos)
	}
	return n, nil
}

func (p *filterParser) peek() token { return p.toks[p.i] }
func (p *filterParser) next() token { t := p.toks[p.i]; p.i++; return t }

// keyword reports whether the next token is the keyword kw, consuming it if so.
func (p *filterParser) keyword(kw string) bool {
	if t := p.peek(); t.kind == 'i' && strings.EqualFold(t.text, kw) {
		p.i++
		return true
	}
	return false
}

func (p *filterParser) punct(s string) bool {
	if t := p.peek(); t.kind == 'p' && t.text == s {
		p.i++
		return true
	}
	return false
}

func (p *filterParser) errorf(format string, args ...any) error {
	t := p.peek()
	where := fmt.Sprintf("at offset %d", t.pos)
	if t.kind == 0 {
		where = "at the end"
	}
	return fmt.Errorf(format+" "+where, args...)
}

func (p *filterParser) expr() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxFilterDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxFilterDepth)
	}
	return p.binary("OR", p.and)
}

func (p *filterParser) and() (node, error) { return p.binary("AND", p.unary) }

func (p *filterParser) binary(op string, operand func() (node, error)) (node, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for p.keyword(op) {
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = boolNode{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *filterParser) unary() (node, error) {
	if p.keyword("NOT") {
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxFilterDepth {
			return nil, fmt.Errorf("nested deeper than %d", maxFilterDepth)
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notNode{x: x}, nil
	}
	if p.punct("(") {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.punct(")") {
			return nil, p.errorf("expected ')'")
		}
		return x, nil
	}
	return p.comparison()
}

func (p *filterParser) column() (string, error) {
	t := p.peek()
	if t.kind != 'i' && t.kind != 'q' {
		return "", p.errorf("expected a column name")
	}
	if t.kind == 'i' {
		switch strings.ToUpper(t.text) {
		case "AND", "OR", "NOT", "LIKE", "IN", "IS", "NULL", "TRUE", "FALSE":
			return "", p.errorf("expected a column name, not %s,", strings.ToUpper(t.text))
		}
	}
	name, ok := p.columns[strings.ToLower(t.text)]
	if !ok {
		return "", fmt.Errorf("unknown column %q at offset %d", t.text, t.pos)
	}
	p.i++
	return name, nil
}

func (p *filterParser) comparison() (node, error) {
	col, err := p.column()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == 'p' {
		switch t.text {
		case "=", "!=", "<>", "<", "<=", ">", ">=":
			p.i++
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			op := t.text
			if op == "!=" {
				op = "<>"
			}
			return compareNode{col: col, op: op, lit: lit}, nil
		}
	}
	if p.keyword("IS") {
		not := p.keyword("NOT")
		if !p.keyword("NULL") {
			return nil, p.errorf("expected NULL")
		}
		return nullNode{col: col, not: not}, nil
	}
	not := p.keyword("NOT")
	switch {
	case p.keyword("LIKE"):
		t := p.next()
		if t.kind != 's' {
			p.i--
			return nil, p.errorf("LIKE needs a string pattern")
		}
		return likeNode{col: col, not: not, pat: t.text}, nil
	case p.keyword("IN"):
		if !p.punct("(") {
			return nil, p.errorf("expected '(' after IN")
		}
		var lits []literal
		for {
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			if lits = append(lits, lit); len(lits) > maxInItems {
				return nil, fmt.Errorf("more than %d values in IN", maxInItems)
			}
			if p.punct(")") {
				break
			}
			if !p.punct(",") {
				return nil, p.errorf("expected ',' or ')'")
			}
		}
		return inNode{col: col, not: not, lits: lits}, nil
	}
	return nil, p.errorf("expected an operator (= != < <= > >= LIKE IN IS NULL)")
}

func (p *filterParser) literal() (literal, error) {
	t := p.peek()
	switch t.kind {
	case 's':
		p.i++
		return literal{kind: 's', s: t.text}, nil
	case 'n':
		p.i++
		return numberLiteral(t)
	case 'i':
		switch strings.ToUpper(t.text) {
		case "TRUE", "FALSE":
			p.i++
			return literal{kind: 'b', s: strings.ToUpper(t.text)}, nil
		}
	}
	return literal{}, p.errorf("expected a literal (a 'string', a number, TRUE or FALSE)")
}

// numberLiteral checks a number token and returns its canonical text: integers as decimal
// integers of any size, everything else as a float.
func numberLiteral(t token) (literal, error) {
	if i, ok := new(big.Int).SetString(t.text, 10); ok {
		return literal{kind: 'n', s: i.String()}, nil
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil || strings.HasPrefix(strings.TrimPrefix(t.text, "-"), ".") {
		return literal{}, fmt.Errorf("bad number %q at offset %d", t.text, t.pos)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.ContainsAny(s, "IN") { // Inf or NaN
		return literal{}, fmt.Errorf("bad number %q at offset %d", t.text, t.pos)
	}
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return literal{kind: 'n', s: s}, nil
}

// filterSQL returns the SQL of a parsed filter.
func filterSQL(n node) string {
	var b strings.Builder
	n.sql(&b)
	return b.String()
}
