package dataset

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// queryLimits bound one query.
type queryLimits struct {
	timeout time.Duration
	rows    int
	bytes   int
}

// parseCheckSQL has DuckDB's own parser, without binding or running anything, serialize $1:
// the answer lists its statements, or is an error for text that does not parse or a
// statement that is not a SELECT (only SELECT statements can be serialized).
const parseCheckSQL = `SELECT json_serialize_sql($1::VARCHAR)::VARCHAR`

// deniedFunctions are the functions a query may not call even though its statement is a
// SELECT: they change the database's state behind the locked configuration (logging,
// profiling, checkpoints, the parser), run SQL text that escaped the checks, read raw memory,
// or sleep without regard for interrupts.
var deniedFunctions = map[string]bool{
	"enable_logging": true, "disable_logging": true, "truncate_duckdb_logs": true, "write_log": true,
	"enable_profiling": true, "disable_profiling": true,
	"checkpoint": true, "force_checkpoint": true,
	"enable_peg_parser": true, "disable_peg_parser": true, "check_peg_parser": true,
	"query": true, "query_table": true, "json_execute_serialized_sql": true,
	"arrow_scan": true, "arrow_scan_dumb": true,
	"sleep_ms": true, "pg_sleep": true,
}

// unboundedFunctions are the functions a query may not call because what they allocate is not
// counted against the database's memory limit (DuckDB builds their results outside its buffer
// manager) and grows with an argument rather than with the data: one call of range(100000000)
// took 9 GB of the gateway's memory and 40 s of a core past a 5 s statement timeout, against a
// memory limit of 256 MiB (trial s16h3), and a larger argument would have the whole gateway
// killed for want of memory. The value is what the refusal suggests instead, if anything.
// range and generate_series stay allowed as table functions (FROM range(n)), which stream
// their rows through the engine's operators: counted, capped and interruptible.
var unboundedFunctions = map[string]string{
	"range": "use it as a table function: FROM range(n)", "generate_series": "use it as a table function: FROM generate_series(a, b)",
	"repeat": "", "lpad": "", "rpad": "", "printf": "", "format": "",
	"list_resize": "", "array_resize": "",
	// Quadratic in memory: two strings of 5,000 characters took 190 MB.
	"damerau_levenshtein": "",
}

// streamingTableFunctions are the unboundedFunctions allowed as a table function (in FROM).
var streamingTableFunctions = map[string]bool{"range": true, "generate_series": true}

// checkParsed checks DuckDB's serialization of a query: exactly one SELECT statement that
// calls no denied function.
func checkParsed(serialized string) *Error {
	var p struct {
		Error        bool              `json:"error"`
		ErrorMessage string            `json:"error_message"`
		Statements   []json.RawMessage `json:"statements"`
	}
	if err := json.Unmarshal([]byte(serialized), &p); err != nil {
		return userErr(CodeRefused, "the query could not be checked")
	}
	switch {
	case p.Error && strings.Contains(p.ErrorMessage, "Only SELECT"):
		return userErr(CodeRefused, "only a SELECT or WITH query is allowed")
	case p.Error:
		return userErr(CodeFailed, "%s", firstLine(p.ErrorMessage))
	case len(p.Statements) != 1:
		return userErr(CodeRefused, "only one statement is allowed")
	}
	var tree any
	if err := json.Unmarshal(p.Statements[0], &tree); err != nil {
		return userErr(CodeRefused, "the query could not be checked")
	}
	if what := deniedIn(tree, false); what != "" {
		return userErr(CodeRefused, "%s is not allowed", what)
	}
	return nil
}

// lambdaFunctions are the functions that take a lambda (x -> x + 1) as an argument; list
// comprehensions are parsed into them. Anywhere else DuckDB binds the arrow as JSON extraction.
var lambdaFunctions = map[string]bool{
	"list_transform": true, "array_transform": true, "list_apply": true, "array_apply": true, "apply": true,
	"list_filter": true, "array_filter": true, "filter": true,
	"list_reduce": true, "array_reduce": true, "reduce": true,
}

// deniedIn returns what the parse tree v uses that a query may not, worded for the caller
// ("the function X"), or "". lambdaOK says that v is an argument of a lambda function.
//
// BIGNUM (arbitrary-precision integers: casts and functions) is refused too: converting a
// million-digit one to or from text runs for minutes without checking for interrupts, so that
// the statement timeout could not stop it (trial h9 D4: 105 s of a core for one call).
//
// Besides deniedFunctions, everything of DuckDB's JSON extension is refused: the functions
// (json_*, from_json, to_json, ->>), the arrow outside a lambda function (JSON extraction) and
// casts to JSON. The engine walks a JSON document recursively on the thread that runs the
// query, so that a document nested deeply enough, built in the query itself
// (repeat('[', 100000) || …), overflowed that thread's stack: a segmentation fault inside the
// cgo call, which no Go code can recover, took the whole gateway down (trial h9 D1).
func deniedIn(v any, lambdaOK bool) string { return deniedWhere(v, lambdaOK, false) }

// deniedWhere is deniedIn, where tableFunction says that v is the call of a table function (the
// function of a TABLE_FUNCTION reference in FROM).
func deniedWhere(v any, lambdaOK, tableFunction bool) string {
	switch x := v.(type) {
	case map[string]any:
		fn, _ := x["function_name"].(string)
		fn = strings.ToLower(fn)
		instead, unbounded := unboundedFunctions[fn]
		switch {
		case deniedFunctions[fn]:
			return "the function " + fn
		case unbounded && !(tableFunction && streamingTableFunctions[fn]):
			what := "the function " + fn + " (what it builds is not bounded by the engine's memory limit"
			if instead != "" {
				what += "; " + instead
			}
			return what + ")"
		case strings.Contains(fn, "json") || fn == "->>":
			return "the JSON function " + fn + " (JSON functions are not available in queries)"
		case strings.Contains(fn, "bignum") || strings.Contains(fn, "varint"):
			return "the function " + fn + " (BIGNUM is not available in queries)"
		case x["class"] == "LAMBDA" && !lambdaOK:
			return "the -> operator outside a lambda function such as list_transform (JSON extraction is not available in queries)"
		}
		if ct, ok := x["cast_type"]; ok {
			switch {
			case namesType(ct, "json"):
				return "a cast to JSON (JSON functions are not available in queries)"
			case namesType(ct, "bignum") || namesType(ct, "varint"):
				return "a cast to BIGNUM (arbitrary-precision integers are not available in queries)"
			}
		}
		for k, c := range x {
			if what := deniedWhere(c, k == "children" && lambdaFunctions[fn], k == "function" && x["type"] == "TABLE_FUNCTION"); what != "" {
				return what
			}
		}
	case []any:
		for _, c := range x {
			if what := deniedWhere(c, lambdaOK, false); what != "" {
				return what
			}
		}
	}
	return ""
}

// namesType reports whether a serialized type (a cast's target) is or holds the type name.
func namesType(v any, name string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if s, ok := c.(string); ok && (k == "name" || k == "alias" || k == "id") && strings.EqualFold(s, name) {
				return true
			}
			if namesType(c, name) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if namesType(c, name) {
				return true
			}
		}
	}
	return false
}

// query runs one checked SELECT (stmt, the output of checkSelect) and renders its result.
func (d *duck) query(ctx context.Context, stmt string, lim queryLimits) (QueryResult, error) {
	qctx, cancel := context.WithTimeout(ctx, lim.timeout)
	defer cancel()
	// The row cap is part of the statement, so that DuckDB never computes more than it.
	// The newline ends a trailing line comment of the caller's text.
	wrapped := "SELECT * FROM (\n" + stmt + "\n) AS tollgate_result LIMIT " + strconv.Itoa(lim.rows+1)

	conn, err := d.db.Conn(qctx)
	if err != nil {
		if ctx.Err() == nil && qctx.Err() != nil {
			return QueryResult{}, userErr(CodeTimeout, "the dataset is busy: other queries of the account held every one of its connections for the whole %s statement timeout; retry when they end", lim.timeout)
		}
		return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
	}
	defer conn.Close()

	// Belt and braces: the caller's text on its own, and the statement that runs, must each
	// be exactly one SELECT statement to DuckDB's parser.
	for _, text := range []string{stmt, wrapped} {
		var serialized string
		if err := conn.QueryRowContext(qctx, parseCheckSQL, text).Scan(&serialized); err != nil {
			return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
		}
		if uerr := checkParsed(serialized); uerr != nil {
			return QueryResult{}, uerr
		}
	}

	capped, err := capWideValues(qctx, conn, wrapped, lim.bytes)
	if err != nil {
		return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
	}
	rows, err := conn.QueryContext(qctx, capped)
	if err != nil {
		return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return QueryResult{}, err
	}
	cols := make([]Column, len(types))
	for i, t := range types {
		cols[i] = Column{Name: t.Name(), Type: t.DatabaseTypeName()}
	}
	t := newTable(cols, lim)
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = formatValue(v, cols[i].Type)
		}
		if !t.add(cells) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return QueryResult{}, d.queryErr(ctx, qctx, lim, err)
	}
	return t.result(), nil
}

// capWideValues returns the statement wrapped (a checked SELECT) so that no value of a
// variable-width type reaches Go larger than the result's byte cap, which no row holding it
// could fit anyway: a string (VARCHAR, JSON) is cut to one character more than the cap (the
// result table then stops at its byte cap, as it would have), and a value of another
// variable-width type (BLOB, BIT, a list, array, struct, map or union) larger than the cap ends
// the query with an error naming its column. Without it a query such as
// SELECT repeat('x', 200000000) made the driver copy 200 MB into Go to show none of it, and a few
// at once took gigabytes. The columns come from DuckDB's DESCRIBE of the statement (its names,
// deduplicated, and types); the values of other types pass as they are.
func capWideValues(ctx context.Context, conn *sql.Conn, wrapped string, limit int) (string, error) {
	rows, err := conn.QueryContext(ctx, "DESCRIBE "+wrapped)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var exprs []string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		name, _ := vals[0].(string)
		typ, _ := vals[1].(string)
		exprs = append(exprs, cappedColumn(name, typ, limit))
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(exprs) == 0 {
		return wrapped, nil
	}
	return "SELECT " + strings.Join(exprs, ", ") + " FROM (\n" + wrapped + "\n) AS tollgate_capped", nil
}

// cappedColumn is the select-list expression of column name of type typ (as DESCRIBE names
// it) for capWideValues.
func cappedColumn(name, typ string, limit int) string {
	c := quoteIdent(name)
	tooLarge := quoteString(fmt.Sprintf("a value of column %s is larger than the result's cap of %d bytes: select a part of it", c, limit))
	lim := strconv.Itoa(limit)
	switch {
	case typ == "VARCHAR" || typ == "JSON":
		return "left(" + c + ", " + strconv.Itoa(limit+1) + ") AS " + c
	case typ == "BLOB" || typ == "BIT":
		return "CASE WHEN octet_length(" + c + ") > " + lim + " THEN error(" + tooLarge + ") ELSE " + c + " END AS " + c
	case strings.HasSuffix(typ, "]") || strings.HasPrefix(typ, "STRUCT(") || strings.HasPrefix(typ, "MAP(") || strings.HasPrefix(typ, "UNION("):
		return "CASE WHEN strlen(CAST(" + c + " AS VARCHAR)) > " + lim + " THEN error(" + tooLarge + ") ELSE " + c + " END AS " + c
	case typ == "VARIANT":
		// The driver cannot scan a VARIANT (trial h9 D9: an internal error, logged as one):
		// its text, capped as a string's, is returned instead.
		return "left(CAST(" + c + " AS VARCHAR), " + strconv.Itoa(limit+1) + ") AS " + c
	}
	return c
}

// queryErr turns an error of a query into what the caller may see: a timeout, the engine's
// message about the caller's SQL, or (for the caller's own cancellation) the context's error.
func (d *duck) queryErr(ctx, qctx context.Context, lim queryLimits, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if qctx.Err() != nil {
		return userErr(CodeTimeout, "the query was cancelled: it ran longer than the %s statement timeout", lim.timeout)
	}
	var de *duckdb.Error
	if errors.As(err, &de) {
		return userErr(CodeFailed, "%s", firstLine(de.Error()))
	}
	return err
}

// healthy reports whether the database still answers a query of its table; a caller's query
// that failed may have left it unusable. Only a probe that got a connection and was refused
// for a reason other than load says so: a database whose connections are all busy with the
// account's other queries, or whose memory they hold, is busy, not broken. (Trial h9 D3: a
// probe that waited for a busy pool had the database quarantined, and every quarantined copy
// stays in memory for good, so that six requests leaked a whole copy of the dataset.)
func (d *duck) healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return ctx.Err() != nil // busy, unless the pool itself failed
	}
	defer conn.Close()
	var n int
	err = conn.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+quoteIdent(d.table)+" LIMIT 1)").Scan(&n)
	if err == nil || ctx.Err() != nil {
		return true
	}
	var de *duckdb.Error
	return errors.As(err, &de) && (de.Type == duckdb.ErrorTypeOutOfMemory || de.Type == duckdb.ErrorTypeInterrupt)
}

// table renders a result as a compact text table within the row and byte caps.
type table struct {
	cols        []Column
	lim         queryLimits
	rows        [][]string
	size        int // bytes of the cells so far, with separators
	truncatedBy string
}

func newTable(cols []Column, lim queryLimits) *table {
	t := &table{cols: cols, lim: lim}
	for _, c := range cols {
		t.size += len(c.Name) + 3
	}
	return t
}

// add appends one row and reports whether more may follow.
func (t *table) add(cells []string) bool {
	if len(t.rows) >= t.lim.rows {
		t.truncatedBy = "rows"
		return false
	}
	n := 0
	for _, c := range cells {
		n += len(c) + 3
	}
	if t.size+n > t.lim.bytes {
		t.truncatedBy = "bytes"
		return false
	}
	t.size += n
	t.rows = append(t.rows, cells)
	return true
}

// maxPad is the widest a column is padded to; longer cells are written whole.
const maxPad = 40

func (t *table) render(nrows int) string {
	widths := make([]int, len(t.cols))
	for i, c := range t.cols {
		widths[i] = min(len(c.Name), maxPad)
	}
	for _, r := range t.rows[:nrows] {
		for i, c := range r {
			widths[i] = max(widths[i], min(len(c), maxPad))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(cells)-1 && len(c) < widths[i] {
				b.WriteString(strings.Repeat(" ", widths[i]-len(c)))
			}
		}
		b.WriteByte('\n')
	}
	names := make([]string, len(t.cols))
	rule := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.Name
		rule[i] = strings.Repeat("-", widths[i])
	}
	line(names)
	line(rule)
	for _, r := range t.rows[:nrows] {
		line(r)
	}
	return b.String()
}

func (t *table) result() QueryResult {
	n := len(t.rows)
	text := t.render(n)
	// Padding can take the text over the byte cap: drop rows until it fits.
	for n > 0 && len(text) > t.lim.bytes {
		n = max(0, min(n-1, n*t.lim.bytes/len(text)))
		text = t.render(n)
		t.truncatedBy = "bytes"
	}
	var note string
	switch t.truncatedBy {
	case "rows":
		note = fmt.Sprintf("(%d rows shown; the result has more: truncated at the row cap of %d rows)", n, t.lim.rows)
	case "bytes":
		note = fmt.Sprintf("(%d rows shown; the result has more: truncated at the byte cap of %d bytes)", n, t.lim.bytes)
	case "":
		if n == 1 {
			note = "(1 row)"
		} else {
			note = fmt.Sprintf("(%d rows)", n)
		}
	}
	return QueryResult{Text: text + note + "\n", Columns: t.cols, Rows: n, Truncated: t.truncatedBy != "", TruncatedBy: t.truncatedBy}
}

// formatValue renders one value as DuckDB would print it, on one line.
func formatValue(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return textCell(x)
	case []byte:
		if typ == "UUID" && len(x) == 16 {
			var u duckdb.UUID
			copy(u[:], x)
			return u.String()
		}
		return `\x` + hex.EncodeToString(x)
	case bool:
		return strconv.FormatBool(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		switch {
		case typ == "DATE":
			return x.Format("2006-01-02")
		case strings.HasPrefix(typ, "TIME") && !strings.HasPrefix(typ, "TIMESTAMP"):
			return x.Format("15:04:05.999999")
		case strings.Contains(typ, "TIME ZONE") || strings.HasSuffix(typ, "TZ"):
			return x.Format("2006-01-02 15:04:05.999999Z07:00")
		}
		return x.Format("2006-01-02 15:04:05.999999")
	case duckdb.Decimal:
		return x.String()
	case duckdb.Interval:
		return fmt.Sprintf("%d months %d days %d microseconds", x.Months, x.Days, x.Micros)
	case *big.Int:
		return x.String()
	case fmt.Stringer:
		return oneLine(x.String())
	case []any, map[string]any:
		if b, err := json.Marshal(x); err == nil {
			return oneLine(string(b))
		}
	}
	return oneLine(fmt.Sprint(v))
}

// textCell renders a text value as a cell that cannot be misread: as it is when it is plain,
// and as a JSON string when it holds what the table's own marks are made of (the " | "
// separator's bar, a backslash or control character that oneLine's escapes would make look
// alike, a leading quote), when spaces at its ends would vanish into the padding, and when it is
// empty or the word NULL, which is how SQL NULL is shown. (Trial h9 D7: a value holding " | "
// showed as more columns, and 'NULL' as NULL, so that a dataset's data could change how the
// model read the rows around it.)
func textCell(s string) string {
	if s == "" || s == "NULL" || strings.ContainsAny(s, "|\\") || s[0] == '"' || s[0] == ' ' || s[len(s)-1] == ' ' || hasControl(s) {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")
	}
	return s
}

// hasControl reports whether s holds a control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// oneLine escapes the characters that would break a table row.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}
