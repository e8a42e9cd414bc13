package dataset_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

const salesCSV = `id,region,product,qty,price,day
1,north,apple,10,1.5,2024-01-01
2,south,pear,5,2.25,2024-01-02
3,north,plum,,0.75,2024-01-03
4,east,apple,7,1.5,2024-01-04
5,south,apple,3,1.5,2024-01-05
6,west,"fig, dried",12,4.0,2024-01-06
`

const eventsJSONL = `{"user":"ann","event":"login","ms":12}
{"user":"bob","event":"click","ms":40}
{"user":"ann","event":"logout","ms":7}
`

// fixture is a database, a storage directory and two accounts with datasets.
type fixture struct {
	st      *store.Store
	dir     string
	storage *dataset.DirStorage
	a, b    uuid.UUID
	// aName and bName are the accounts' names.
	aName, bName string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.ConnString(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, dir: t.TempDir()}
	if f.storage, err = dataset.NewDirStorage(f.dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.storage.Close() })
	for _, p := range []struct {
		id   *uuid.UUID
		name *string
	}{{&f.a, &f.aName}, {&f.b, &f.bName}} {
		acct, err := st.CreateAccount(ctx, "acct-"+uuid.NewString()[:8], "default")
		if err != nil {
			t.Fatal(err)
		}
		*p.id, *p.name = acct.ID, acct.Name
	}
	f.write(t, f.a, "sales.csv", salesCSV)
	f.write(t, f.a, "events.jsonl", eventsJSONL)
	f.write(t, f.a, "metrics.parquet", string(parquetBytes(t)))
	f.write(t, f.b, "secret.csv", "k,v\nkey,hunter2\n")
	f.write(t, f.b, "sales.csv", "id,region\n99,mars\n")
	return f
}

func (f *fixture) write(t *testing.T, account uuid.UUID, file, content string) {
	t.Helper()
	p := filepath.Join(f.dir, "tenant", account.String(), file)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) service(t *testing.T, opts dataset.Options) *dataset.Service {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s := dataset.New(f.st, f.storage, opts)
	t.Cleanup(func() { s.Close() })
	return s
}

// parquetBytes makes a small Parquet file with DuckDB.
func parquetBytes(t *testing.T) []byte {
	t.Helper()
	c, err := duckdb.NewConnector("", nil)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	p := filepath.Join(t.TempDir(), "m.parquet")
	if _, err := db.Exec(fmt.Sprintf(`COPY (SELECT i AS n, i * i AS square, 'm' || i AS label FROM range(1, 101) t(i)) TO '%s' (FORMAT parquet)`, p)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustLoad(t *testing.T, s *dataset.Service, account uuid.UUID, name string, opts dataset.LoadOptions) dataset.LoadResult {
	t.Helper()
	r, err := s.Load(context.Background(), account, name, opts)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return r
}

func mustQuery(t *testing.T, s *dataset.Service, account uuid.UUID, name, q string) dataset.QueryResult {
	t.Helper()
	r, err := s.Query(context.Background(), account, name, q)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	return r
}

func columnNames(cols []dataset.Column) string {
	var names []string
	for _, c := range cols {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func TestListStorage(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{})
	// Files that are not datasets are not listed.
	f.write(t, f.a, "notes.txt", "x")
	f.write(t, f.a, "bad name.csv", "x")
	f.write(t, f.a, "nested/deep.csv", "a\n1\n")
	got, err := s.ListStorage(context.Background(), f.a)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range got {
		if d.SizeBytes <= 0 || time.Since(d.Updated) > time.Hour {
			t.Errorf("%s: size %d updated %s", d.Name, d.SizeBytes, d.Updated)
		}
		lines = append(lines, d.Name+"."+string(d.Format))
	}
	if want := "events.jsonl metrics.parquet sales.csv"; strings.Join(lines, " ") != want {
		t.Fatalf("list = %v, want %s", lines, want)
	}
	if got[2].SizeBytes != int64(len(salesCSV)) {
		t.Errorf("sales size = %d, want %d", got[2].SizeBytes, len(salesCSV))
	}
	other, err := s.ListStorage(context.Background(), f.b)
	if err != nil || len(other) != 2 || other[1].Name != "secret" {
		t.Fatalf("b's list = %+v, %v", other, err)
	}
	none, err := s.ListStorage(context.Background(), uuid.New())
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown account's list = %+v, %v", none, err)
	}
}

func TestLoadAndQuery(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{})
	ctx := context.Background()

	r := mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	if r.Dataset != "sales" || r.Format != dataset.CSV || r.Rows != 6 || columnNames(r.Columns) != "id,region,product,qty,price,day" {
		t.Fatalf("load = %+v", r)
	}
	cols, err := s.Schema(ctx, f.a, "sales")
	if err != nil {
		t.Fatal(err)
	}
	want := []dataset.Column{{"id", "BIGINT"}, {"region", "VARCHAR"}, {"product", "VARCHAR"}, {"qty", "BIGINT"}, {"price", "DOUBLE"}, {"day", "DATE"}}
	if fmt.Sprint(cols) != fmt.Sprint(want) {
		t.Fatalf("schema = %v, want %v", cols, want)
	}

	q := mustQuery(t, s, f.a, "sales", "SELECT region, sum(qty) AS total, count(*) AS n FROM sales GROUP BY region ORDER BY region")
	wantText := "" +
		"region | total | n\n" +
		"------ | ----- | -\n" +
		"east   | 7     | 1\n" +
		"north  | 10    | 2\n" +
		"south  | 8     | 2\n" +
		"west   | 12    | 1\n" +
		"(4 rows)\n"
	if q.Text != wantText {
		t.Fatalf("text =\n%s\nwant\n%s", q.Text, wantText)
	}
	if q.Rows != 4 || q.Truncated || columnNames(q.Columns) != "region,total,n" || q.Columns[1].Type != "HUGEINT" && q.Columns[1].Type != "BIGINT" && q.Columns[1].Type != "INT128" {
		t.Fatalf("result = %+v", q)
	}
	// WITH, NULLs, dates, strings with separators, a trailing semicolon and comment.
	q = mustQuery(t, s, f.a, "sales", "WITH x AS (SELECT * FROM sales WHERE id IN (3, 6)) SELECT product, qty, day, price FROM x ORDER BY id; -- done")
	if !strings.Contains(q.Text, "plum       | NULL | 2024-01-03 | 0.75") || !strings.Contains(q.Text, "fig, dried | 12   | 2024-01-06 | 4") {
		t.Fatalf("text =\n%s", q.Text)
	}

	// JSON lines and Parquet load too.
	r = mustLoad(t, s, f.a, "events", dataset.LoadOptions{})
	if r.Format != dataset.JSONL || r.Rows != 3 || columnNames(r.Columns) != "user,event,ms" {
		t.Fatalf("events = %+v", r)
	}
	r = mustLoad(t, s, f.a, "metrics", dataset.LoadOptions{})
	if r.Format != dataset.Parquet || r.Rows != 100 {
		t.Fatalf("metrics = %+v", r)
	}
	q = mustQuery(t, s, f.a, "metrics", "SELECT sum(square) AS s FROM metrics")
	if !strings.Contains(q.Text, "338350") {
		t.Fatalf("text =\n%s", q.Text)
	}

	loaded, err := s.Loaded(ctx, f.a)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 3 || loaded[0].Name != "events" || loaded[2].Name != "sales" || loaded[2].Rows != 6 || !loaded[2].InMemory {
		t.Fatalf("loaded = %+v", loaded)
	}
	// Nobody else's.
	if other, err := s.Loaded(ctx, f.b); err != nil || len(other) != 0 {
		t.Fatalf("b's loaded = %+v, %v", other, err)
	}
}

func TestLoadOptions(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{})
	ctx := context.Background()

	r := mustLoad(t, s, f.a, "sales", dataset.LoadOptions{Columns: []string{"product", "QTY", "id"}})
	if columnNames(r.Columns) != "product,qty,id" || r.Rows != 6 {
		t.Fatalf("projection = %+v", r)
	}
	r = mustLoad(t, s, f.a, "sales", dataset.LoadOptions{Limit: 2})
	if r.Rows != 2 {
		t.Fatalf("limit = %+v", r)
	}
	q := mustQuery(t, s, f.a, "sales", "SELECT id FROM sales ORDER BY id")
	if !strings.HasSuffix(q.Text, "1 \n2 \n(2 rows)\n") && !strings.HasSuffix(q.Text, "1\n2\n(2 rows)\n") {
		t.Fatalf("limited text =\n%q", q.Text)
	}

	filters := map[string]string{
		"region = 'north'":                                    "1,3",
		"region != 'north' AND qty >= 5":                      "2,4,6",
		"NOT (region = 'north' OR region = 'south')":          "4,6",
		"product LIKE 'ap%' AND region IN ('north', 'south')": "1,5",
		"qty IS NULL": "3",
		"qty IS NOT NULL AND price > 1.4 AND price <= 2.25":           "1,2,4,5",
		"product NOT IN ('apple', 'pear') OR id < 2":                  "1,3,6",
		`"product" = 'fig, dried'`:                                    "6",
		"region = 'x'' OR 1=1 --'":                                    "",
		"id > -1 AND id <> 4 AND product NOT LIKE '%p%'":              "6",
		"(region = 'north' OR region = 'east') AND qty > 7 OR id = 5": "1,5",
	}
	for filter, want := range filters {
		r, err := s.Load(ctx, f.a, "sales", dataset.LoadOptions{Columns: []string{"id"}, Filter: filter})
		if err != nil {
			t.Errorf("filter %q: %v", filter, err)
			continue
		}
		q := mustQuery(t, s, f.a, "sales", "SELECT string_agg(id::VARCHAR, ',' ORDER BY id) AS ids FROM sales")
		got := strings.TrimSpace(strings.Split(q.Text, "\n")[2])
		if want == "" {
			want = "NULL"
		}
		if got != want || r.Rows != int64(strings.Count(want, ",")+1) && want != "NULL" {
			t.Errorf("filter %q: ids %q (rows %d), want %q", filter, got, r.Rows, want)
		}
	}

	// Refused options.
	bad := []dataset.LoadOptions{
		{Columns: []string{"nope"}},
		{Columns: []string{"id", "ID"}},
		{Columns: []string{`id" FROM x; --`}},
		{Limit: -1},
		{Filter: "nope = 1"},
		{Filter: "id = 1; DROP TABLE sales"},
		{Filter: "id = 1 OR 1 = 1"},
		{Filter: "id = (SELECT 1)"},
		{Filter: "id = id"},
		{Filter: "region = 'north' --"},
		{Filter: "read_csv('/etc/passwd') IS NULL"},
		{Filter: "id = 1 UNION SELECT 1"},
		{Filter: "region LIKE region"},
		{Filter: "(id = 1"},
		{Filter: "id IN ()"},
		{Filter: strings.Repeat("(", 100) + "id = 1" + strings.Repeat(")", 100)},
		{Filter: "id = 1e999"},
		{Filter: "region = 'unterminated"},
	}
	for _, o := range bad {
		_, err := s.Load(ctx, f.a, "sales", o)
		var e *dataset.Error
		if !errors.As(err, &e) || e.Code != dataset.CodeInvalid {
			t.Errorf("load %+v: err %v, want an invalid-argument error", o, err)
		}
	}
}

func TestLoadedSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s1 := dataset.New(f.st, f.storage, dataset.Options{Logger: quiet})
	mustLoad(t, s1, f.a, "sales", dataset.LoadOptions{Columns: []string{"id", "region"}, Filter: "region = 'south'"})
	mustLoad(t, s1, f.b, "secret", dataset.LoadOptions{})
	s1.Close()

	// A second process (or the same one after a restart) on the same database and storage.
	s2 := f.service(t, dataset.Options{})
	loaded, err := s2.Loaded(ctx, f.a)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 1 || loaded[0].Name != "sales" || loaded[0].Rows != 2 || loaded[0].InMemory ||
		loaded[0].Options.Filter != "region = 'south'" || columnNames(loaded[0].Columns) != "id,region" {
		t.Fatalf("loaded after restart = %+v", loaded)
	}
	q := mustQuery(t, s2, f.a, "sales", "SELECT id, region FROM sales ORDER BY id")
	if !strings.Contains(q.Text, "2  | south\n5  | south\n(2 rows)") {
		t.Fatalf("text =\n%s", q.Text)
	}
	if loaded, _ := s2.Loaded(ctx, f.a); !loaded[0].InMemory {
		t.Fatalf("not materialized after a query: %+v", loaded)
	}

	// A reload in one process is seen by the other, which holds the older copy.
	s3 := f.service(t, dataset.Options{})
	mustLoad(t, s3, f.a, "sales", dataset.LoadOptions{Limit: 1})
	q = mustQuery(t, s2, f.a, "sales", "SELECT count(*) AS n, max(product) AS p FROM sales")
	if !strings.Contains(q.Text, "1 | apple") {
		t.Fatalf("after reload elsewhere:\n%s", q.Text)
	}
	// A delete in one process is seen by the other.
	if err := s3.Delete(ctx, f.a, "sales"); err != nil {
		t.Fatal(err)
	}
	_, err = s2.Query(ctx, f.a, "sales", "SELECT 1")
	if err == nil || err.Error() != "dataset 'sales' is not owned by the caller" {
		t.Fatalf("query after delete: %v", err)
	}
}

func TestLRUEviction(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{MaxLoaded: 2})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	mustLoad(t, s, f.a, "events", dataset.LoadOptions{})
	mustQuery(t, s, f.a, "sales", "SELECT 1") // sales is now the most recently used
	mustLoad(t, s, f.a, "metrics", dataset.LoadOptions{})

	inMemory := func() string {
		loaded, err := s.Loaded(ctx, f.a)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range loaded {
			if l.InMemory {
				names = append(names, l.Name)
			}
		}
		if len(loaded) != 3 {
			t.Fatalf("records = %+v", loaded)
		}
		return strings.Join(names, ",")
	}
	if got := inMemory(); got != "metrics,sales" {
		t.Fatalf("in memory = %s, want metrics,sales", got)
	}
	// The evicted dataset is still recorded and is materialized again on use.
	q := mustQuery(t, s, f.a, "events", "SELECT count(*) AS n FROM events")
	if !strings.Contains(q.Text, "3\n(1 row)") {
		t.Fatalf("text =\n%s", q.Text)
	}
	if got := inMemory(); got != "events,metrics" {
		t.Fatalf("in memory = %s, want events,metrics", got)
	}

	// A memory bound holds one dataset at a time here.
	s2 := f.service(t, dataset.Options{MaxMemoryBytes: 1})
	mustQuery(t, s2, f.a, "sales", "SELECT 1")
	mustQuery(t, s2, f.a, "events", "SELECT 1")
	loaded, _ := s2.Loaded(ctx, f.a)
	n := 0
	for _, l := range loaded {
		if l.InMemory {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("memory-bounded service holds %d datasets: %+v", n, loaded)
	}
}

func TestPutAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})

	// Replacing a dataset (here with another format) forgets its load.
	d, err := s.Put(ctx, f.a, "sales", dataset.JSONL, strings.NewReader(eventsJSONL))
	if err != nil || d.Format != dataset.JSONL || d.SizeBytes != int64(len(eventsJSONL)) {
		t.Fatalf("put = %+v, %v", d, err)
	}
	list, _ := s.ListStorage(ctx, f.a)
	for _, l := range list {
		if l.Name == "sales" && l.Format != dataset.JSONL {
			t.Fatalf("old format kept: %+v", list)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "tenant", f.a.String(), "sales.csv")); !os.IsNotExist(err) {
		t.Fatalf("sales.csv still there: %v", err)
	}
	_, err = s.Query(ctx, f.a, "sales", "SELECT 1")
	var e *dataset.Error
	if !errors.As(err, &e) || e.Code != dataset.CodeNotLoaded {
		t.Fatalf("query after put: %v", err)
	}
	if r := mustLoad(t, s, f.a, "sales", dataset.LoadOptions{}); r.Rows != 3 {
		t.Fatalf("reload = %+v", r)
	}
	if _, err := s.Put(ctx, f.a, "../x", dataset.CSV, strings.NewReader("")); !errors.As(err, &e) || e.Code != dataset.CodeInvalid {
		t.Fatalf("put with a bad name: %v", err)
	}

	if err := s.Delete(ctx, f.a, "sales"); err != nil {
		t.Fatal(err)
	}
	if loaded, _ := s.Loaded(ctx, f.a); len(loaded) != 0 {
		t.Fatalf("loaded after delete: %+v", loaded)
	}
	if err := s.Delete(ctx, f.a, "sales"); err == nil || err.Error() != "dataset 'sales' is not owned by the caller" {
		t.Fatalf("second delete: %v", err)
	}
	// b's dataset of the same name is untouched.
	if r := mustLoad(t, s, f.b, "sales", dataset.LoadOptions{}); r.Rows != 1 {
		t.Fatalf("b's sales = %+v", r)
	}
}

// TestNotOwned gives every dataset operation another tenant's dataset and names with path
// tricks, and expects the exact refusal.
func TestNotOwned(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{})
	mustLoad(t, s, f.b, "secret", dataset.LoadOptions{})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})

	a, b := f.a.String(), f.b.String()
	names := []string{
		"secret",                      // b's dataset, by its bare name
		"secret.csv",                  // with its extension
		"tenant/" + b + "/secret",     // b's full key
		"tenant/" + b + "/secret.csv", //
		"tenant/" + a + "/../" + b + "/secret",
		"../" + b + "/secret",
		"../../tenant/" + b + "/secret.csv",
		"..",
		".",
		"",
		"/etc/passwd",
		"/" + f.dir + "/tenant/" + b + "/secret.csv",
		"sales/../secret",
		"%2e%2e%2f" + b + "%2fsecret",
		"..%2f" + b + "%2fsecret",
		"%2e%2e/secret",
		`..\` + b + `\secret`,
		`sales\..\secret`,
		"secret\x00",
		"sales\x00.csv",
		"sales\n",
		" sales",
		"ｓａｌｅｓ",          // fullwidth letters
		"sales\u200b",    // zero-width space
		"sal\u0435s",     // Cyrillic e
		"．．／secret",      // fullwidth dots and slash
		"..\u2215secret", // division slash
		"sales.csv.csv",  //
		"sales.txt",      //
		"sales.",         //
		"sales/",         //
		"tenant/" + b,    //
		"tenant/",        //
		"file:///etc/passwd",
		"s3://bucket/tenant/" + b + "/secret.csv",
		"~/secret",
		"*",
		"sa*",
		"[s]ales",
		"sales' OR '1'='1",
		`sales"; DROP TABLE x; --`,
		strings.Repeat("a", 65),
		"nonexistent", // a well-formed name that does not exist is refused the same way
		"tenant/" + uuid.NewString() + "/sales",
		// Full names that are malformed, or not the caller's own.
		"tenant/" + b + "/sales",        // b's full name of a name a owns too
		"tenant/" + a + "/secret",       // a's namespace, b's dataset name
		"tenant/" + f.aName + "/sales",  // a's account name in place of its id
		"tenant/" + f.bName + "/secret", //
		"tenant/" + strings.ToUpper(a) + "/sales",
		"tenant/" + strings.ReplaceAll(a, "-", "") + "/sales",
		"tenant/{" + a + "}/sales",
		"tenant/urn:uuid:" + a + "/sales",
		"tenant/" + a + "/",
		"tenant/" + a,
		"tenant/" + a + "/..",
		"tenant/" + a + "/sales/",
		"tenant/" + a + "//sales",
		"tenant/" + a + "/tenant/" + a + "/sales",
		"tenant//sales",
		"tenant/sales",
		"/tenant/" + a + "/sales",
		"Tenant/" + a + "/sales",
		"tenant/" + a + "/sales.txt",
		"tenant/" + a + "%2fsales",
	}
	for _, name := range names {
		want := "dataset '" + name + "' is not owned by the caller"
		check := func(op string, err error) {
			t.Helper()
			if err == nil || err.Error() != want || !errors.Is(err, dataset.ErrNotOwned) {
				t.Errorf("%s(%q): err %v, want %q", op, name, err, want)
			}
			if msg, ok := dataset.CallerMessage(err); !ok || msg != want {
				t.Errorf("%s(%q): caller message %q, %v", op, name, msg, ok)
			}
		}
		_, err := s.Load(ctx, f.a, name, dataset.LoadOptions{})
		check("Load", err)
		_, err = s.Schema(ctx, f.a, name)
		check("Schema", err)
		_, err = s.Query(ctx, f.a, name, "SELECT 1")
		check("Query", err)
		check("Delete", s.Delete(ctx, f.a, name))
	}
	// b's data is intact and a's own dataset answers under its full key.
	if r := mustQuery(t, s, f.b, "secret", "SELECT v FROM secret"); !strings.Contains(r.Text, "hunter2") {
		t.Fatalf("b's secret: %s", r.Text)
	}
	if r := mustQuery(t, s, f.a, "tenant/"+a+"/sales", "SELECT count(*) AS n FROM sales"); !strings.Contains(r.Text, "6") {
		t.Fatalf("a's own full key: %s", r.Text)
	}
	if r := mustQuery(t, s, f.a, "sales.csv", "SELECT count(*) AS n FROM sales"); !strings.Contains(r.Text, "6") {
		t.Fatalf("a's own name with extension: %s", r.Text)
	}
	// a's loaded datasets do not include b's.
	loaded, _ := s.Loaded(ctx, f.a)
	if len(loaded) != 1 || loaded[0].Name != "sales" {
		t.Fatalf("a's loaded = %+v", loaded)
	}
	// A symbolic link in a's namespace that points at b's file is not a dataset.
	link := filepath.Join(f.dir, "tenant", a, "stolen.csv")
	if err := os.Symlink(filepath.Join(f.dir, "tenant", b, "secret.csv"), link); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(ctx, f.a, "stolen", dataset.LoadOptions{})
	if err == nil || err.Error() != "dataset 'stolen' is not owned by the caller" {
		t.Fatalf("load through a symlink: %v", err)
	}
	// Nor is a's namespace directory replaced by a link to b's.
	os.Remove(link)
	ns := filepath.Join(f.dir, "tenant", a)
	if err := os.Rename(ns, ns+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.dir, "tenant", b), ns); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(ctx, f.a, "secret", dataset.LoadOptions{})
	if err == nil || err.Error() != "dataset 'secret' is not owned by the caller" {
		t.Fatalf("load through a linked namespace: %v", err)
	}
}

// TestQueryEscapes tries to get out of the query engine's one-dataset database.
func TestQueryEscapes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{QueryTimeout: 2 * time.Second})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	secretPath := filepath.Join(f.dir, "tenant", f.b.String(), "secret.csv")

	refused := []string{
		"INSERT INTO sales (id) VALUES (100)",
		"UPDATE sales SET qty = 0",
		"DELETE FROM sales",
		"CREATE TABLE x AS SELECT 1",
		"DROP TABLE sales",
		"ALTER TABLE sales ADD COLUMN z INT",
		"CREATE VIEW v AS SELECT 1",
		"CREATE MACRO m(x) AS x",
		"ATTACH '" + f.dir + "/x.db' AS x",
		"DETACH memory",
		"COPY sales TO '" + f.dir + "/out.csv'",
		"COPY sales FROM '" + secretPath + "'",
		"EXPORT DATABASE '" + f.dir + "/exp'",
		"INSTALL httpfs",
		"LOAD httpfs",
		"FORCE INSTALL httpfs",
		"PRAGMA version",
		"PRAGMA enable_external_access",
		"SET enable_external_access = true",
		"SET lock_configuration = false",
		"RESET lock_configuration",
		"SET threads = 64",
		"CALL pragma_version()",
		"CHECKPOINT",
		"VACUUM",
		"BEGIN TRANSACTION",
		"DESCRIBE sales",
		"SHOW TABLES",
		"SUMMARIZE sales",
		"EXPLAIN SELECT 1",
		"EXPLAIN ANALYZE SELECT 1",
		"PREPARE p AS SELECT 1",
		"VALUES (1)",
		"FROM sales",
		"SELECT 1; SELECT 2",
		"SELECT 1; DROP TABLE sales",
		"SELECT 1;DROP TABLE sales;",
		"SELECT 1 /* ; */ ; INSERT INTO sales (id) VALUES (1)",
		"SELECT 'a;b'; DELETE FROM sales",
		"SELECT E'\\''; DELETE FROM sales; SELECT '",
		"SELECT $$;$$; DELETE FROM sales",
		"WITH x AS (SELECT 1) DELETE FROM sales",
		"WITH x AS (SELECT 1) INSERT INTO sales (id) SELECT * FROM x",
		"SELECT 1 -- ; harmless\n; DELETE FROM sales",
		"SELECT 'unterminated",
		"SELECT /* unterminated",
		"",
		"   ",
		"-- only a comment",
		";",
		"SELECT 1\x00; DELETE FROM sales",
		"USE system",
		// SELECTs that call functions which change state behind the locked configuration,
		// run SQL text, read raw memory or sleep.
		"SELECT * FROM enable_logging(storage = 'file', storage_path = '/tmp/tollgate-log')",
		"SELECT * FROM main.\"ENABLE_LOGGING\"()",
		"SELECT (SELECT 1 FROM disable_logging()) AS x",
		"SELECT * FROM truncate_duckdb_logs()",
		"SELECT write_log('x')",
		"SELECT * FROM enable_profiling()",
		"SELECT * FROM force_checkpoint()",
		"SELECT * FROM checkpoint()",
		"SELECT * FROM enable_peg_parser()",
		"SELECT * FROM query('SELECT 1')",
		"SELECT * FROM query('DELETE FROM sales')",
		"SELECT * FROM query_table('sales')",
		"SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
		"SELECT * FROM arrow_scan(0, 0, 0)",
		"SELECT sleep_ms(100000)",
		"WITH x AS (SELECT * FROM enable_logging()) SELECT * FROM x",
	}
	for _, q := range refused {
		_, err := s.Query(ctx, f.a, "sales", q)
		var e *dataset.Error
		if !errors.As(err, &e) || (e.Code != dataset.CodeRefused && e.Code != dataset.CodeFailed) {
			t.Errorf("query %q: err %v, want it refused", q, err)
		}
		t.Logf("%q: %v", q, err)
	}

	// SELECTs that reach for files, the network, settings or other databases fail in the engine.
	failing := []string{
		"SELECT * FROM read_csv('" + secretPath + "')",
		"SELECT * FROM read_csv_auto('" + secretPath + "')",
		"SELECT * FROM '" + secretPath + "'",
		"SELECT * FROM read_parquet('/etc/passwd')",
		"SELECT * FROM read_json('/etc/passwd')",
		"SELECT * FROM read_json_objects('/etc/hostname')",
		"SELECT * FROM read_text('/etc/passwd')",
		"SELECT * FROM read_text('" + secretPath + "')",
		"SELECT * FROM read_blob('/etc/passwd')",
		"SELECT * FROM glob('/etc/*')",
		"SELECT * FROM glob('" + f.dir + "/**')",
		"SELECT * FROM parquet_metadata('/etc/passwd')",
		"SELECT * FROM read_csv('http://127.0.0.1:1/x.csv')",
		"SELECT * FROM read_csv('s3://bucket/x.csv')",
		"SELECT * FROM sniff_csv('" + secretPath + "')",
		"SELECT getenv('HOME')",
		"SELECT * FROM secret",
		"SELECT * FROM other.secret",
		"SELECT * FROM pg_catalog.nope",
		"SELECT load_extension('x')",
	}
	for _, q := range failing {
		_, err := s.Query(ctx, f.a, "sales", q)
		var e *dataset.Error
		if !errors.As(err, &e) || (e.Code != dataset.CodeFailed && e.Code != dataset.CodeRefused) {
			t.Errorf("query %q: err %v, want an engine error", q, err)
			continue
		}
		t.Logf("%q: %v", q, err)
		if strings.Contains(e.Msg, "hunter2") {
			t.Errorf("query %q leaked: %s", q, e.Msg)
		}
	}

	// No secrets exist to be read.
	if r := mustQuery(t, s, f.a, "sales", "SELECT * FROM duckdb_secrets()"); r.Rows != 0 {
		t.Fatalf("secrets:\n%s", r.Text)
	}
	// The settings are as the load left them.
	r := mustQuery(t, s, f.a, "sales", "SELECT current_setting('enable_external_access') AS ext, current_setting('lock_configuration') AS locked, current_setting('autoload_known_extensions') AS autoload, current_setting('autoinstall_known_extensions') AS autoinstall")
	if !strings.Contains(r.Text, "false | true   | false    | false") {
		t.Fatalf("settings:\n%s", r.Text)
	}
	// The database holds the one table and nothing was changed.
	r = mustQuery(t, s, f.a, "sales", "SELECT string_agg(database_name || '.' || table_name, ',') AS t FROM duckdb_tables()")
	if !strings.Contains(r.Text, "\nmemory.sales\n") {
		t.Fatalf("tables:\n%s", r.Text)
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT count(*) AS n, sum(qty) AS q FROM sales")
	if !strings.Contains(r.Text, "6 | 37") {
		t.Fatalf("data changed:\n%s", r.Text)
	}
	for _, p := range []string{"out.csv", "x.db", "exp"} {
		if _, err := os.Stat(filepath.Join(f.dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s was written", p)
		}
	}

	// Too long: interrupted at the statement timeout.
	for _, q := range []string{
		"SELECT count(*) FROM range(1000000000000) a",
		"SELECT count(*) FROM sales a, sales b, sales c, range(1000000000) d",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r",
		"SELECT sum(x) FROM generate_series(1, 100000000000) t(x)",
	} {
		start := time.Now()
		_, err := s.Query(ctx, f.a, "sales", q)
		var e *dataset.Error
		if !errors.As(err, &e) || (e.Code != dataset.CodeTimeout && e.Code != dataset.CodeFailed) {
			t.Errorf("query %q: err %v, want a timeout", q, err)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("query %q took %s", q, el)
		}
	}

	// Too big: cut at the caps, and said so.
	r = mustQuery(t, s, f.a, "sales", "SELECT * FROM range(100000000) t(x)")
	if !r.Truncated || r.TruncatedBy != "rows" || r.Rows != 1000 || !strings.Contains(r.Text, "(1000 rows shown; the result has more: truncated at the row cap of 1000 rows)") {
		t.Fatalf("row cap: %+v", r.Rows)
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT (SELECT string_agg('x', '') FROM range(1000)) AS wide FROM range(900)")
	if !r.Truncated || r.TruncatedBy != "bytes" || len(r.Text) > 256<<10+200 || !strings.Contains(r.Text, "truncated at the byte cap of 262144 bytes") {
		t.Fatalf("byte cap: rows %d, %d bytes, by %q", r.Rows, len(r.Text), r.TruncatedBy)
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT (SELECT string_agg('x', '') FROM range(1000000)) AS huge")
	if !r.Truncated || r.Rows != 0 {
		t.Fatalf("huge cell: %+v", r.Rows)
	}
	// A value far larger than the result's cap is cut before it reaches Go (which would copy all
	// of it to show none of it): a string to one character past the cap, what the caller sees
	// being the same; a value of another variable-width type ends the query naming its column.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r = mustQuery(t, s, f.a, "sales", "SELECT 1 AS n, (SELECT string_agg('x', '') FROM range(30000000)) AS vast")
	runtime.ReadMemStats(&after)
	if !r.Truncated || r.TruncatedBy != "bytes" || r.Rows != 0 {
		t.Fatalf("vast string: %+v", r)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("a 30 MB value made the Go side allocate %d MB", grew>>20)
	}
	for _, q := range []string{
		"SELECT list((SELECT string_agg('x', '') FROM range(1000))) AS l FROM range(1000)",
		"SELECT {'k': (SELECT string_agg('x', '') FROM range(300000))} AS l",
		"SELECT (SELECT string_agg('x', '') FROM range(300000))::BLOB AS l",
	} {
		_, err := s.Query(ctx, f.a, "sales", q)
		var e *dataset.Error
		if !errors.As(err, &e) || e.Code != dataset.CodeFailed || !strings.Contains(e.Error(), `a value of column "l" is larger than the result's cap of 262144 bytes`) {
			t.Errorf("query %q: %v, want the value refused naming its column", q, err)
		}
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT [1, 2] AS l, {'k': 'v'} AS m, 'ab'::BLOB AS b, 'a\"b' AS \"the \"\"col\"\"\"")
	if r.Rows != 1 || !strings.Contains(r.Text, `[1,2]`) || !strings.Contains(r.Text, `{"k":"v"}`) || !strings.Contains(r.Text, `\x6162`) || !strings.Contains(r.Text, `the "col"`) {
		t.Fatalf("small variable-width values:\n%s", r.Text)
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT x, (SELECT string_agg('y', '') FROM range(100)) AS pad FROM range(100000) t(x) ORDER BY x")
	if !r.Truncated || len(r.Text) > 256<<10 {
		t.Fatalf("cap with padding: %d rows, %d bytes", r.Rows, len(r.Text))
	}
	// Exactly at the row cap is not truncated.
	r = mustQuery(t, s, f.a, "sales", "SELECT * FROM range(1000)")
	if r.Truncated || r.Rows != 1000 || !strings.HasSuffix(r.Text, "(1000 rows)\n") {
		t.Fatalf("exactly the cap: %d rows, truncated %v", r.Rows, r.Truncated)
	}
	// Memory is bounded per database.
	if _, err := s.Query(ctx, f.a, "sales", "SELECT list(x) FROM range(300000000) t(x)"); err == nil {
		t.Fatal("a query larger than the memory limit succeeded")
	}

	// The engine still serves afterwards.
	r = mustQuery(t, s, f.a, "sales", "SELECT count(*) AS n FROM sales")
	if !strings.Contains(r.Text, "6") {
		t.Fatalf("after escapes:\n%s", r.Text)
	}
}

// TestTimeoutKeepsServing runs a query that times out while other callers query.
func TestTimeoutKeepsServing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{QueryTimeout: 3 * time.Second})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	mustLoad(t, s, f.b, "secret", dataset.LoadOptions{})

	var slowErr error
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		_, slowErr = s.Query(ctx, f.a, "sales", "SELECT count(*) FROM range(1000000000000)")
	}()
	time.Sleep(200 * time.Millisecond)
	// Another caller, and the same caller on the same dataset, are served meanwhile.
	r := mustQuery(t, s, f.b, "secret", "SELECT k FROM secret")
	if !strings.Contains(r.Text, "key") {
		t.Fatalf("other caller: %s", r.Text)
	}
	r = mustQuery(t, s, f.a, "sales", "SELECT count(*) AS n FROM sales")
	if !strings.Contains(r.Text, "6") {
		t.Fatalf("same dataset meanwhile: %s", r.Text)
	}
	select {
	case <-slowDone:
		t.Fatalf("the slow query ended before the others were served: %v", slowErr)
	default:
	}
	<-slowDone
	var e *dataset.Error
	if !errors.As(slowErr, &e) || e.Code != dataset.CodeTimeout || e.Msg != "the query was cancelled: it ran longer than the 3s statement timeout" {
		t.Fatalf("slow query: %v", slowErr)
	}
	// And after.
	for _, c := range []struct {
		acct uuid.UUID
		name string
	}{{f.a, "sales"}, {f.b, "secret"}} {
		if r := mustQuery(t, s, c.acct, c.name, "SELECT 42 AS answer"); !strings.Contains(r.Text, "42") {
			t.Fatalf("after the timeout: %s", r.Text)
		}
	}
	// A caller's own cancellation is its context's error.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.Query(cctx, f.a, "sales", "SELECT count(*) FROM range(1000000000000)"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled query: %v", err)
	}
}

// TestFullNames names the caller's own datasets by their full names tenant/<account-id>/<name>
// on every operation, next to the short names, and checks what the SQL calls the table.
func TestFullNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.service(t, dataset.Options{})
	full := func(name string) string { return "tenant/" + f.a.String() + "/" + name }

	if got := dataset.FullName(f.a, "sales"); got != full("sales") {
		t.Fatalf("FullName = %q, want %q", got, full("sales"))
	}
	// What ListStorage lists, FullName names, and every operation takes.
	list, err := s.ListStorage(ctx, f.a)
	if err != nil || len(list) != 3 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	for _, d := range list {
		ref := dataset.FullName(f.a, d.Name)
		r := mustLoad(t, s, f.a, ref, dataset.LoadOptions{})
		if r.Dataset != d.Name || r.Format != d.Format {
			t.Errorf("load %s = %+v, want dataset %s in %s", ref, r, d.Name, d.Format)
		}
		cols, err := s.Schema(ctx, f.a, ref)
		if err != nil || columnNames(cols) != columnNames(r.Columns) {
			t.Errorf("schema %s = %v, %v", ref, cols, err)
		}
	}
	// The full name with the format's extension pins the format, as the short name does.
	if r := mustLoad(t, s, f.a, full("sales.csv"), dataset.LoadOptions{Limit: 2}); r.Dataset != "sales" || r.Rows != 2 {
		t.Fatalf("load with extension = %+v", r)
	}
	// The load is one, whichever name made it: the short name sees what the full name loaded.
	if cols, err := s.Schema(ctx, f.a, "sales"); err != nil || len(cols) != 6 {
		t.Fatalf("schema by short name = %v, %v", cols, err)
	}
	loaded, err := s.Loaded(ctx, f.a)
	if err != nil || len(loaded) != 3 || loaded[2].Name != "sales" || loaded[2].Rows != 2 {
		t.Fatalf("loaded = %+v, %v", loaded, err)
	}

	// In the SQL the table is the short name, whichever name the query is given.
	for _, ref := range []string{full("sales"), "sales", full("sales.csv")} {
		if r := mustQuery(t, s, f.a, ref, "SELECT count(*) AS n FROM sales"); !strings.Contains(r.Text, "2") {
			t.Errorf("query %s: %s", ref, r.Text)
		}
	}
	// The full name is not a table name: the engine says so, and names nothing but a's own.
	_, err = s.Query(ctx, f.a, full("sales"), `SELECT count(*) FROM "`+full("sales")+`"`)
	var e *dataset.Error
	if !errors.As(err, &e) || e.Code != dataset.CodeFailed || strings.Contains(e.Msg, f.b.String()) || strings.Contains(e.Msg, f.dir) {
		t.Fatalf("query naming the full name as a table: %v", err)
	}

	// Not loaded is told the same way for either name.
	if _, err := s.Put(ctx, f.a, "fresh", dataset.CSV, strings.NewReader("k\n1\n")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Schema(ctx, f.a, full("fresh"))
	if !errors.As(err, &e) || e.Code != dataset.CodeNotLoaded {
		t.Fatalf("schema of a dataset not loaded, by full name: %v", err)
	}
	// Delete takes the full name too.
	if err := s.Delete(ctx, f.a, full("fresh")); err != nil {
		t.Fatalf("delete by full name: %v", err)
	}
	if _, err := s.Load(ctx, f.a, "fresh", dataset.LoadOptions{}); !errors.Is(err, dataset.ErrNotOwned) {
		t.Fatalf("load after delete: %v", err)
	}

	// b's datasets of the same name are untouched, and b's full names are b's only.
	mustLoad(t, s, f.b, dataset.FullName(f.b, "sales"), dataset.LoadOptions{})
	if r := mustQuery(t, s, f.b, dataset.FullName(f.b, "sales"), "SELECT region FROM sales"); !strings.Contains(r.Text, "mars") {
		t.Fatalf("b's sales by b's full name: %s", r.Text)
	}
	if _, err := s.Load(ctx, f.b, full("sales"), dataset.LoadOptions{}); err == nil || err.Error() != "dataset '"+full("sales")+"' is not owned by the caller" {
		t.Fatalf("b loading a's full name: %v", err)
	}
}

func TestNotLoaded(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{})
	for _, call := range []func() error{
		func() error { _, err := s.Schema(context.Background(), f.a, "sales"); return err },
		func() error { _, err := s.Query(context.Background(), f.a, "sales", "SELECT 1"); return err },
	} {
		err := call()
		var e *dataset.Error
		if !errors.As(err, &e) || e.Code != dataset.CodeNotLoaded || e.Msg != "dataset 'sales' is not loaded: load it with load_storage_dataset first" {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestConcurrentQueries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The query bounds are lifted: this is about the cache, which the bounds would shelter.
	s := f.service(t, dataset.Options{MaxLoaded: 1, MaxQueries: 60, MaxAccountQueries: 60, MaxLoads: 60})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	mustLoad(t, s, f.a, "events", dataset.LoadOptions{})
	mustLoad(t, s, f.b, "secret", dataset.LoadOptions{})
	// With room for one database, concurrent users of three datasets keep evicting each
	// other's databases while they are in use; every query must still answer.
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Go(func() {
			acct, name, q, want := f.a, "sales", "SELECT sum(qty) AS s FROM sales", "37"
			switch i % 3 {
			case 1:
				name, q, want = "events", "SELECT sum(ms) AS s FROM events", "59"
			case 2:
				acct, name, q, want = f.b, "secret", "SELECT v FROM secret", "hunter2"
			}
			r, err := s.Query(ctx, acct, name, q)
			if err != nil {
				errs <- err
			} else if !strings.Contains(r.Text, want) {
				errs <- fmt.Errorf("%s: %s", name, r.Text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
