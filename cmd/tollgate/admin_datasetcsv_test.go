package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminDatasetPutRefusesMalformedCSV: `tollgate admin dataset put` refuses a CSV file that
// DuckDB reads as a table only by working around its faults (rows of differing field counts,
// a quote that nothing closes, a binary file named .csv, an empty file) with exit status 1
// and the reason, naming the file, and stores nothing; a file of one column with a header is
// stored. Before, DuckDB's sniffer read each as some table and the file was stored.
func TestAdminDatasetPutRefusesMalformedCSV(t *testing.T) {
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	store, files := t.TempDir(), t.TempDir()
	refused := []struct{ file, content, says string }{
		{"ragged.csv", "a,b,c\n1,2,3\n4,5\n6,7,8,9\n", "its rows do not all have the same number of fields"},
		{"short.csv", "region,amount\nnorth,3\nsouth\n", `its first line has several fields separated by ","`},
		{"quote.csv", "a,b\n\"x,1\n2,3\n", `a '"' opens a value that no '"' closes`},
		{"binary.csv", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x03\x00>\x00", "it holds binary data"},
		{"empty.csv", "", "is empty"},
	}
	for _, c := range refused {
		path := filepath.Join(files, c.file)
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := adminRun(t, "dataset put acme "+path+" -dir "+store)
		if err == nil || exitStatus(err) != 1 || !strings.HasPrefix(err.Error(), path+" ") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("put %s: %v (exit %d), want exit 1 naming the file and saying %q\n%s", c.file, err, exitStatus(err), c.says, out)
		}
	}
	if out := mustAdmin(t, "dataset list acme -dir "+store); strings.Count(out, "\n") != 1 {
		t.Errorf("refused files are stored:\n%s", out)
	}
	names := filepath.Join(files, "names.csv")
	if err := os.WriteFile(names, []byte("name\nalice\nbob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustAdmin(t, "dataset put acme "+names+" -dir "+store); !strings.Contains(out, "columns: name VARCHAR") {
		t.Errorf("put of a one-column file: %s", out)
	}
}
