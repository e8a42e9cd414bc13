package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/audit"
)

// TestAdminDatasetChangesAudited (operator trial h1): `tollgate admin dataset put` and
// `dataset delete` are in the account's audit log, as the Datasets page's uploads and
// deletions are (actor operator, the stored dataset as it was and as it is), and a file given
// no -name is named as the page names it ("Q3 sales.csv" is q3_sales). Before, the CLI's
// changes left no audit entry, and that file was refused for its name.
func TestAdminDatasetChangesAudited(t *testing.T) {
	url := migratedDatabase(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")
	store := t.TempDir()
	file := filepath.Join(t.TempDir(), "Q3 sales.csv")
	put := func(content string) string {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := runAdmin(context.Background(), []string{"dataset", "put", "acme", file, "-dir", store}, &out); err != nil {
			t.Fatalf("dataset put %q: %v\n%s", file, err, out.String())
		}
		return out.String()
	}
	if out := put("region,units\nnorth,3\n"); !strings.Contains(out, "dataset q3_sales stored") {
		t.Fatalf("dataset put: %s", out)
	}
	put("region,units\nnorth,3\nsouth,4\n")
	if out := mustAdmin(t, "dataset list acme -dir "+store); !strings.Contains(out, "q3_sales") {
		t.Fatalf("dataset list: %s", out)
	}
	mustAdmin(t, "dataset delete acme q3_sales -yes -dir "+store)
	if _, err := adminRun(t, "dataset delete acme q3_sales -yes -dir "+store); err == nil {
		t.Fatal("deleting a deleted dataset was accepted")
	}

	st, acct := openAccount(t, url, "acme")
	entries, err := (&audit.Log{Store: st}).List(context.Background(), acct.ID, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	state := func(v any) string {
		raw, _ := v.(json.RawMessage)
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return "-"
		}
		return fmt.Sprintf("%v %v %vB", m["name"], m["format"], m["size_bytes"])
	}
	var got []string
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		if e.Actor != "operator" {
			t.Errorf("audit entry by %q: %+v", e.Actor, e)
		}
		got = append(got, fmt.Sprintf("%s %s: %s -> %s", e.Action, e.Target, state(e.Before), state(e.After)))
	}
	want := []string{
		"dataset.uploaded dataset q3_sales: - -> q3_sales csv 21B",
		"dataset.uploaded dataset q3_sales: q3_sales csv 21B -> q3_sales csv 29B",
		"dataset.deleted dataset q3_sales: q3_sales csv 29B -> -",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
