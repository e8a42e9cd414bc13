package dataset

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
)

// csvDelimiters are the delimiters DuckDB's sniffer chooses among.
const csvDelimiters = ",;\t|"

// csvDialect is what DuckDB's sniffer (sniff_csv) makes of a CSV file.
type csvDialect struct {
	delim   string
	quote   string // "(empty)" when the sniffer reads the file with no quote character
	skip    int64  // lines skipped above the table
	header  bool
	columns int64
	first   string // the first column's name
}

// checkCSV refuses a CSV file that DuckDB reads as a table only by working around its faults,
// before it is stored (DescribeFile). DuckDB's sniffer never gives up on a text file: it skips
// the lines above the last ones that agree (rows of differing field counts: "a,b,c", "1,2,3",
// "4,5", "6,7,8,9" became the one row 6,7,8,9), reads a quote that nothing closes as a letter,
// and, when no delimiter splits every line the same, reads each whole line as the one value
// of a single VARCHAR column (as it does a binary file), so that an agent then queried
// nonsense. A file is accepted when DuckDB reads it with its sniffed dialect from its first
// line, with '"' as the quote when it has one, and, read as one column, no other delimiter
// in its first line splits its rows as well (checkOneColumn); the whole file is then read as
// a load reads it (DescribeFile). A file of one column with a header is a table. name names
// the file in the error.
func checkCSV(ctx context.Context, conn *sql.Conn, path, name string) error {
	if err := checkText(path, name); err != nil {
		return err
	}
	d, err := sniffCSV(ctx, conn, path, "")
	if err != nil {
		return userErr(CodeInvalid, "%s is not a readable csv file: %s", name, csvReason(err))
	}
	if d.skip > 0 {
		return userErr(CodeInvalid, "%s is not one table: its rows do not all have the same number of fields (DuckDB could read it only by skipping its first %s). "+
			"Give every row the header's fields, and remove any lines above the header", name, lineCount(d.skip))
	}
	if d.quote == "(empty)" {
		// Read with '"' as the quote, a file whose quotes pair up reads as it did.
		q, err := sniffCSV(ctx, conn, path, `, quote = '"'`)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || q.delim != d.delim || q.columns != d.columns || q.skip != 0 {
			return userErr(CodeInvalid, `%s is not one table: a '"' opens a value that no '"' closes. Quote a value that holds the delimiter, a line break or '"' whole, with its '"' doubled ("5"" pipe")`, name)
		}
	}
	if d.columns == 1 {
		return checkOneColumn(ctx, conn, path, name, d)
	}
	return nil
}

// checkOneColumn refuses a file read as one column whose first line (its header, or its first
// row) holds a delimiter that is not the sniffed one and that splits its other rows too: a
// table whose rows do not split the same way, read by DuckDB as whole lines. A one-column file
// whose header names a column with such a delimiter in it ("Price; incl. VAT") is taken: its
// values do not hold that delimiter, or only some of them do (splitsRows).
func checkOneColumn(ctx context.Context, conn *sql.Conn, path, name string, d csvDialect) error {
	rows, err := oneColumnSample(ctx, conn, path)
	if err != nil {
		return userErr(CodeInvalid, "%s is not a readable csv file: %s", name, firstLine(err.Error()))
	}
	first := d.first
	if !d.header && len(rows) > 0 {
		first, rows = rows[0], rows[1:]
	}
	for _, delim := range strings.ReplaceAll(csvDelimiters, d.delim, "") {
		sep := string(delim)
		if strings.Contains(first, sep) && splitsRows(rows, sep) {
			return userErr(CodeInvalid, "%s is not one table: its first line has several fields separated by %q, but its rows do not all have that many "+
				"(DuckDB could read it only as one column of whole lines). Give every row the header's fields", name, sep)
		}
	}
	return nil
}

// oneColumnSampleRows is how many rows of a one-column file checkOneColumn reads.
const oneColumnSampleRows = 2048

// oneColumnSample is the text of the first rows of a file DuckDB reads as one column (a null
// or a value that is not text is "").
func oneColumnSample(ctx context.Context, conn *sql.Conn, path string) ([]string, error) {
	rs, err := conn.QueryContext(ctx, "SELECT * FROM "+readerSQL(path, CSV)+" LIMIT "+strconv.Itoa(oneColumnSampleRows))
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []string
	for rs.Next() {
		var v any
		if err := rs.Scan(&v); err != nil {
			return nil, err
		}
		s, _ := v.(string)
		rows = append(rows, s)
	}
	return rows, rs.Err()
}

// splitsRows reports whether sep splits at least half of the rows (and at least one) into
// several fields, as it does the rows of a table separated by it, evenly or not (a ragged
// table is refused too). The values of a genuine one-column file seldom hold it.
func splitsRows(rows []string, sep string) bool {
	split := 0
	for _, r := range rows {
		if strings.Contains(r, sep) {
			split++
		}
	}
	return split > 0 && 2*split >= len(rows)
}

// lineCount is "1 line" or "n lines".
func lineCount(n int64) string {
	if n == 1 {
		return "1 line"
	}
	return strconv.FormatInt(n, 10) + " lines"
}

// sniffCSV runs DuckDB's sniffer on the file with the given extra options (", quote = '\"'").
func sniffCSV(ctx context.Context, conn *sql.Conn, path, options string) (csvDialect, error) {
	var d csvDialect
	err := conn.QueryRowContext(ctx, "SELECT Delimiter, Quote, SkipRows, HasHeader, len(Columns), Columns[1].name FROM sniff_csv("+
		quoteString(path)+options+")").Scan(&d.delim, &d.quote, &d.skip, &d.header, &d.columns, &d.first)
	return d, err
}

// checkText refuses an empty file (nothing but blanks) and a binary one: a file with a NUL
// byte, which no CSV file holds and which DuckDB reads as text all the same.
func checkText(path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	blank := true
	for {
		n, err := f.Read(buf)
		if bytes.IndexByte(buf[:n], 0) >= 0 {
			return userErr(CodeInvalid, "%s is not a CSV file: it holds binary data (NUL bytes)", name)
		}
		blank = blank && len(bytes.TrimSpace(buf[:n])) == 0
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if blank {
		return userErr(CodeInvalid, "%s is empty: it holds no header and no rows", name)
	}
	return nil
}

// csvReason is the first line of DuckDB's error and, for an error on a line of the file, the
// reason it gives below the line's text ("CSV Error on Line: 30003; Expected Number of
// Columns: 2 Found: 3", or "...; Invalid unicode (byte sequence mismatch) detected. This file is
// not utf-8 encoded."); the rest (the line itself, the options it read with, the fixes it
// suggests) is left out.
func csvReason(err error) string {
	lines := strings.Split(err.Error(), "\n")
	reason := strings.TrimSpace(lines[0])
	if !strings.Contains(reason, "CSV Error on Line") {
		return reason
	}
	for _, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "Possible") {
			break
		}
		if !strings.HasPrefix(line, "Original Line:") {
			return reason + "; " + line
		}
	}
	return reason
}
