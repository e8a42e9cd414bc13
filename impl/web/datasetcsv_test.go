package web_test

import (
	"html"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestDatasetUploadRefusesMalformedCSV: the Datasets page refuses a CSV file that DuckDB reads
// as a table only by working around its faults (rows of differing field counts, a quote that
// nothing closes, a binary file named .csv, a file of blank lines) with the page's error
// (422, the reason, the file's own name), and stores nothing: no new dataset, and a dataset
// the upload was to replace stays as it was. Before, DuckDB's sniffer read each as some table
// (the last row, a column of whole lines, a binary file's bytes as a column name) and the file
// was stored.
func TestDatasetUploadRefusesMalformedCSV(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	if p := alice.upload(nil, "sales.csv", []byte(salesCSV)); p.Status != http.StatusSeeOther {
		t.Fatalf("upload: %d %.500s", p.Status, p.Body)
	}
	refused := []struct {
		name, file, content, says string
		fields                    map[string]string
	}{
		{"ragged rows", "ragged.csv", "a,b,c\n1,2,3\n4,5\n6,7,8,9\n", "its rows do not all have the same number of fields", nil},
		{"a short last row", "short.csv", "a,b,c\n1,2,3\n4,5\n", `its first line has several fields separated by ","`, nil},
		{"an unclosed quote", "quote.csv", "a,b\n\"x,1\n2,3\n", `a '"' opens a value that no '"' closes`, nil},
		{"a binary file", "binary.csv", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x03\x00>\x00", "it holds binary data", nil},
		{"blank lines", "blank.csv", "\n \n", "is empty", nil},
		{"a replacement with ragged rows", "sales.csv", "region,amount\nnorth,3\nsouth\n", "but its rows do not all have that many", map[string]string{"replace": "yes"}},
	}
	for _, c := range refused {
		p := alice.upload(c.fields, c.file, []byte(c.content))
		body := html.UnescapeString(p.Body)
		if p.Status != http.StatusUnprocessableEntity || !strings.Contains(body, "The file is not usable: "+c.file+" ") || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d, want 422 naming %s and saying %q: %.1500s", c.name, p.Status, c.file, c.says, body)
		}
		if strings.Contains(p.Body, "tollgate-upload-") {
			t.Errorf("%s: the message shows the temporary file", c.name)
		}
	}
	list := alice.get("/datasets")
	for _, gone := range []string{"ragged", "short", "quote", "binary", "blank"} {
		if strings.Contains(list.Body, `<th scope="row">`+gone) {
			t.Errorf("refused upload %s is listed", gone)
		}
	}
	if !strings.Contains(list.Body, `<th scope="row">sales</th>`) || !strings.Contains(list.Body, "<td>30 B</td>") {
		t.Errorf("the dataset a refused file was to replace is not as it was: %.1500s", list.Body)
	}
	var stored []string
	_ = filepath.WalkDir(e.DatasetDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			stored = append(stored, filepath.Base(p))
		}
		return nil
	})
	if len(stored) != 1 || stored[0] != "sales.csv" {
		t.Errorf("the storage holds %v, want only sales.csv", stored)
	}
	// A file of one column with a header is a table.
	if p := alice.upload(nil, "names.csv", []byte("name\nalice\nbob\n")); p.Status != http.StatusSeeOther {
		t.Errorf("one-column upload: %d %.800s", p.Status, p.Body)
	}
}
