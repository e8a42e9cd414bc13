package dataset

import (
	"strings"
	"testing"
)

// TestNameFor: an everyday file name gives a dataset name within ValidName's grammar (which
// stays as strict as it was); a name that is one already is kept as it is. "Q3 sales.csv" used
// to be refused.
func TestNameFor(t *testing.T) {
	for in, want := range map[string]string{
		"Q3 sales.csv":                     "q3_sales",
		"sales.csv":                        "sales",
		"Sales-2026.parquet":               "Sales-2026",
		"events-2026.jsonl":                "events-2026",
		"Résumé (final).csv":               "resume_final",
		"Q3 - sales.csv":                   "q3_sales",
		"a--b c.csv":                       "a-b_c",
		"  leading space.csv":              "leading_space",
		"_hidden.csv":                      "hidden",
		"日本.csv":                           "dataset",
		".csv":                             "dataset",
		"C:\\Users\\me\\Q3 sales.csv":      "q3_sales",
		"dir/Q3 sales.tar.csv":             "q3_sales_tar",
		"Ünïcôdé façade – 2026 (1).csv":    "unicode_facade_2026_1",
		strings.Repeat("ab ", 40) + ".csv": strings.TrimRight(strings.Repeat("ab_", 22)[:64], "_"),
	} {
		got := NameFor(in)
		if got != want {
			t.Errorf("NameFor(%q) = %q, want %q", in, got, want)
		}
	}
}
