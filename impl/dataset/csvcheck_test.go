package dataset

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUploadCheckRefusesMalformedCSV: the upload check (DescribeFile) refuses a CSV file that
// DuckDB reads as a table only by working around its faults, and takes well-formed ones,
// one-column files with a header among them. Before, DuckDB's sniffer read each of the
// refused files as some table (the last row of a ragged file, a column of whole lines, a
// quote as a letter, a binary file's bytes as a column name) and the file was stored.
func TestUploadCheckRefusesMalformedCSV(t *testing.T) {
	refused := []struct{ name, body, says string }{
		{"ragged rows", "a,b,c\n1,2,3\n4,5\n6,7,8,9\n", "do not all have the same number of fields"},
		{"a short last row", "a,b,c\n1,2,3\n4,5\n", "its first line has several fields separated by \",\""},
		{"a long last row", "a,b,c\n1,2,3\n4,5,6,7\n", "do not all have the same number of fields"},
		{"ragged rows, no header", "1,2,3\n4,5\n", "its first line has several fields"},
		{"prose", "Dear sir, hello.\nThis is a letter\nWith, several, commas\n", "do not all have the same number of fields (DuckDB could read it only by skipping its first 2 lines)"},
		{"a comment line above the header", "# sales\na,b\n1,2\n", "only by skipping its first 1 line)"},
		{"Latin-1", "name,city\nbob,K\xf6ln\n", "CSV Error on Line: 2; Invalid unicode (byte sequence mismatch) detected"},
		{"an unclosed quote", "a,b\n\"x,1\n2,3\n", "no '\"' closes"},
		{"an unclosed quote in a later field", "a,b\nx,\"1\n2,3\n4,5\n", "no '\"' closes"},
		{"a ragged row past the sniffer's sample", "a,b\n" + strings.Repeat("1,2\n", 30_000) + "1,2,3\n", "is not a readable csv file: Invalid Input Error: CSV Error on Line: 30002; Expected Number of Columns: 2 Found: 3"},
		{"a binary file", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00\x01\x00\x00\x00 \x10\x00\x00", "binary data"},
		{"a file of zeros", string(make([]byte, 4096)), "binary data"},
		{"a zip file", "PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00b\xee\x9dh^\x01\x00\x00\x90\x04\x00\x00\x13\x00\x08\x02[Content_Types].xml", "is not"},
		{"an empty file", "", "is empty"},
		{"blank lines", "\n \n\n", "is empty"},
	}
	accepted := []struct{ name, body string }{
		{"two columns", "region,amount\nnorth,10\nsouth,25\n"},
		{"one column with a header", "name\nalice\nbob\n"},
		{"one column of numbers", "1\n2\n3\n"},
		{"one column whose values hold commas", "note\nhello, world\nfoo\n"},
		{"a quoted header with a comma", "\"a,b\"\nx\ny\n"},
		{"quoted values", "a,b\n\"x, y\",1\n\"he said \"\"hi\"\"\",2\n"},
		{"semicolons", "a;b\n1;2\n3;4\n"},
		{"CRLF and no final line break", "a,b\r\n1,2\r\n3,4"},
		{"a header only", "a,b\n"},
		{"a trailing delimiter", "a,b,\n1,2,\n3,4,\n"},
	}
	ctx := context.Background()
	dir := t.TempDir()
	write := func(i int, body string) string {
		p := filepath.Join(dir, "f"+string(rune('a'+i))+".csv")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, c := range refused {
		p := write(i, c.body)
		_, err := DescribeFile(ctx, p, CSV)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), p+" ") {
			t.Errorf("%s: DescribeFile = %v, want an error naming the file that says %q", c.name, err, c.says)
		}
	}
	for i, c := range accepted {
		p := write(len(refused)+i, c.body)
		if cols, err := DescribeFile(ctx, p, CSV); err != nil || len(cols) == 0 {
			t.Errorf("%s: DescribeFile = %v, %v, want its columns", c.name, cols, err)
		}
	}
}

// TestUploadCheckTakesAOneColumnHeaderWithADelimiter: a one-column CSV whose header names a
// column with ';', '|' or a tab in it is taken, with its values read as one column, while a
// table of such a delimiter read as one column (its rows split by it too, evenly or not) is
// still refused. Before, any first line with another delimiter was refused.
func TestUploadCheckTakesAOneColumnHeaderWithADelimiter(t *testing.T) {
	accepted := []struct{ name, body, column string }{
		{"a semicolon, numbers", "Price; incl. VAT\n10\n12\n15\n", "Price; incl. VAT"},
		{"a semicolon, text", "Price; incl. VAT\nten\ntwelve\nfifteen\n", "Price; incl. VAT"},
		{"a pipe", "in | out\n1\n2\n3\n", "in | out"},
		{"a tab", "first\tname\nalice\nbob\ncarol\n", "first\tname"},
		{"a semicolon in one value of three", "Price; incl. VAT\n10\nn/a; see note\n12\n", "Price; incl. VAT"},
	}
	refused := []struct{ name, body, says string }{
		{"semicolons, a short row", "a;b;c\n1;2;3\n4;5\n6;7;8\n", `separated by ";"`},
		{"pipes, rows of two under a header of three", "a|b|c\n1|2\n3|4\n", `separated by "|"`},
		{"tabs, no header", "1\t2\t3\n4\t5\n", `separated by "\t"`},
	}
	ctx := context.Background()
	dir := t.TempDir()
	for i, c := range accepted {
		p := filepath.Join(dir, "a"+string(rune('a'+i))+".csv")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		cols, err := DescribeFile(ctx, p, CSV)
		if err != nil || len(cols) != 1 {
			t.Errorf("%s: DescribeFile = %v, %v, want one column", c.name, cols, err)
			continue
		}
		if cols[0].Name != c.column {
			t.Errorf("%s: the column is %q, want %q", c.name, cols[0].Name, c.column)
		}
	}
	for i, c := range refused {
		p := filepath.Join(dir, "r"+string(rune('a'+i))+".csv")
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := DescribeFile(ctx, p, CSV)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "is not one table") {
			t.Errorf("%s: DescribeFile = %v, want an error that says %q", c.name, err, c.says)
		}
	}
}
