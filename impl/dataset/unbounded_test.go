package dataset_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/dataset"
)

// TestFunctionsOutsideTheMemoryLimitAreRefused: the functions whose results DuckDB builds
// outside its memory limit, in proportion to an argument, are refused before the engine runs
// anything, wherever they appear (select list, filter, subquery, schema-qualified, in a table
// function's argument); range and generate_series still serve as table functions. On the code
// before, each ran: SELECT len(range(100000000)) took 9 GB and 40 s past a 5 s timeout with a
// 256 MiB memory limit (trial s16h3); here the arguments are small, so that the test costs
// nothing before the fix either.
func TestFunctionsOutsideTheMemoryLimitAreRefused(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{QueryTimeout: 5 * time.Second})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	for q, fn := range map[string]string{
		"SELECT len(range(3)) AS n":                                           "range",
		"SELECT range(1, 3) AS l":                                             "range",
		"SELECT generate_series(1, 3) AS l":                                   "generate_series",
		"SELECT * FROM unnest(range(3))":                                      "range",
		"SELECT count(*) AS n FROM range(len(range(3)))":                      "range",
		"SELECT repeat('x', 3) AS s":                                          "repeat",
		"SELECT main.repeat('x', 3) AS s":                                     "repeat",
		"SELECT REPEAT([1], 3) AS l":                                          "repeat",
		"SELECT lpad('x', 3, '-') AS s":                                       "lpad",
		"SELECT rpad(region, 30, '.') AS s FROM sales":                        "rpad",
		"SELECT printf('%10d', 1) AS s":                                       "printf",
		"SELECT format('{:>10}', 1) AS s":                                     "format",
		"SELECT list_resize([1], 3) AS l":                                     "list_resize",
		"SELECT array_resize([1], 3) AS l":                                    "array_resize",
		"SELECT damerau_levenshtein('ab', 'ba') AS d":                         "damerau_levenshtein",
		"SELECT id FROM sales WHERE region = (SELECT repeat('n', 1))":         "repeat",
		"WITH x AS (SELECT lpad(product, 3) AS p FROM sales) SELECT * FROM x": "lpad",
	} {
		_, err := s.Query(context.Background(), f.a, "sales", q)
		var e *dataset.Error
		if !errors.As(err, &e) || e.Code != dataset.CodeRefused || !strings.Contains(e.Msg, "the function "+fn+" (what it builds is not bounded") {
			t.Errorf("%s: %v, want it refused naming %s", q, err, fn)
		}
	}
	for _, q := range []string{
		"SELECT count(*) AS n FROM range(1000)",
		"SELECT sum(x) AS n FROM range(1, 1001) t(x)",
		"SELECT count(*) AS n FROM generate_series(1, 1000)",
		"SELECT count(*) AS n FROM sales, range(3)",
	} {
		r, err := s.Query(context.Background(), f.a, "sales", q)
		if err != nil || r.Rows != 1 {
			t.Errorf("%s: %v, want it served", q, err)
		}
	}
}
