package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// The two tenants of the tests: the key "x" is account A's, the key "y" account B's.
var (
	accountA = uuid.MustParse("00000000-0000-4000-8000-00000000000a")
	accountB = uuid.MustParse("00000000-0000-4000-8000-00000000000b")
	keys     = map[string]auth.Principal{
		"x": {AccountID: accountA, KeyID: uuid.MustParse("00000000-0000-4000-8000-0000000000a1")},
		"y": {AccountID: accountB, KeyID: uuid.MustParse("00000000-0000-4000-8000-0000000000b1")},
	}
)

// withPrincipal stands in for the gateway's authentication middleware: a known bearer key puts
// its Principal in the request context, as auth.WithPrincipal does in impl/httpapi. Any other
// request is passed on without one, which exercises the handler's own -32001 answer. It also
// sets the request id header the way the gateway's edge does.
func withPrincipal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerRequestID, "req-test")
		if key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if p, ok := keys[key]; ok {
				r = r.WithContext(auth.WithPrincipal(r.Context(), p))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// newTestServer serves NewHandler(opts) at /api/mcp behind withPrincipal; opts.Tools defaults to
// the dataset tools over ds.
func newTestServer(t *testing.T, ds *fakeDatasets, opts Options) string {
	t.Helper()
	if opts.Tools == nil {
		opts.Tools = DatasetTools(ds)
	}
	if opts.Version == "" {
		opts.Version = "test"
	}
	mux := http.NewServeMux()
	mux.Handle("/api/mcp", withPrincipal(NewHandler(opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/api/mcp"
}

// fakeDatasets is an in-memory DatasetService standing in for the dataset engine (impl/dataset),
// which another package provides (the tests of impl/tenanttools run the tools over the real
// one). It keeps each account's datasets apart, takes a dataset's short name or its full name
// tenant/<account-id>/<name>, and refuses any other name with ErrNotOwned, as the engine must.
type fakeDatasets struct {
	mu     sync.Mutex
	stored map[uuid.UUID]map[string]fakeStored
	loaded map[uuid.UUID]map[string]LoadedDataset
	// calls records the account of every call, to prove the caller reaches the service.
	calls []uuid.UUID
	// rowCap cuts query results off.
	rowCap int
}

type fakeStored struct {
	format  string
	size    int64
	updated time.Time
	columns []Column
	rows    [][]any
}

// newFakeDatasets has account A's "sales" (csv) and "events" (parquet), and account B's
// "payroll" (csv).
func newFakeDatasets() *fakeDatasets {
	updated := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sales := fakeStored{
		format: "csv", size: 2048, updated: updated,
		columns: []Column{{"id", "BIGINT"}, {"region", "VARCHAR"}, {"amount", "DOUBLE"}},
		rows:    [][]any{{1, "EU", 120.5}, {2, "US", 80.0}, {3, "EU", 300.25}},
	}
	events := fakeStored{format: "parquet", size: 4096, updated: updated, columns: []Column{{"at", "TIMESTAMP"}}}
	payroll := fakeStored{
		format: "csv", size: 512, updated: updated,
		columns: []Column{{"name", "VARCHAR"}, {"salary", "BIGINT"}},
		rows:    [][]any{{"secret person", 1000000}},
	}
	return &fakeDatasets{
		stored: map[uuid.UUID]map[string]fakeStored{
			accountA: {"sales": sales, "events": events},
			accountB: {"payroll": payroll},
		},
		loaded: map[uuid.UUID]map[string]LoadedDataset{},
		rowCap: 100,
	}
}

// fullName is the full name of the account's dataset name.
func fullName(account uuid.UUID, name string) string {
	return "tenant/" + account.String() + "/" + name
}

// shortName is the short name that a short or full name given by the account stands for.
func shortName(account uuid.UUID, name string) string {
	return strings.TrimPrefix(name, "tenant/"+account.String()+"/")
}

func (f *fakeDatasets) record(account uuid.UUID) {
	f.calls = append(f.calls, account)
}

func (f *fakeDatasets) ListStorage(_ context.Context, account uuid.UUID) ([]StoredDataset, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(account)
	var out []StoredDataset
	for name, s := range f.stored[account] {
		out = append(out, StoredDataset{Name: name, FullName: fullName(account, name), Format: s.format, Size: s.size, Updated: s.updated})
	}
	slices.SortFunc(out, func(a, b StoredDataset) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeDatasets) Load(_ context.Context, account uuid.UUID, req LoadRequest) (LoadedDataset, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(account)
	name := shortName(account, req.Name)
	s, ok := f.stored[account][name]
	if !ok {
		return LoadedDataset{}, ErrNotOwned
	}
	if req.Filter == "DROP TABLE" {
		return LoadedDataset{}, tool.Errorf("invalid filter: not a boolean expression")
	}
	cols := s.columns
	if len(req.Columns) > 0 {
		cols = nil
		for _, col := range req.Columns {
			i := slices.IndexFunc(s.columns, func(c Column) bool { return c.Name == col })
			if i < 0 {
				return LoadedDataset{}, tool.Errorf("dataset '%s' has no column '%s'", name, col)
			}
			cols = append(cols, s.columns[i])
		}
	}
	rows := int64(len(s.rows))
	if req.Limit > 0 && req.Limit < rows {
		rows = req.Limit
	}
	ld := LoadedDataset{Name: name, FullName: fullName(account, name), Rows: rows, Columns: cols, Limit: req.Limit, Filter: req.Filter,
		LoadedAt: time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)}
	if f.loaded[account] == nil {
		f.loaded[account] = map[string]LoadedDataset{}
	}
	f.loaded[account][name] = ld
	return ld, nil
}

func (f *fakeDatasets) Loaded(_ context.Context, account uuid.UUID) ([]LoadedDataset, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(account)
	var out []LoadedDataset
	for _, l := range f.loaded[account] {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b LoadedDataset) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// lookup returns an owned loaded dataset, ErrNotOwned for a name the account does not own, and a
// public error for an owned one that is not loaded.
func (f *fakeDatasets) lookup(account uuid.UUID, name string) (LoadedDataset, fakeStored, error) {
	name = shortName(account, name)
	s, ok := f.stored[account][name]
	if !ok {
		return LoadedDataset{}, fakeStored{}, ErrNotOwned
	}
	l, ok := f.loaded[account][name]
	if !ok {
		return LoadedDataset{}, fakeStored{}, tool.Errorf("dataset '%s' is not loaded: load it with load_storage_dataset", name)
	}
	return l, s, nil
}

func (f *fakeDatasets) Schema(_ context.Context, account uuid.UUID, dataset string) ([]Column, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(account)
	l, _, err := f.lookup(account, dataset)
	if err != nil {
		return nil, err
	}
	return l.Columns, nil
}

// Query answers any single SELECT or WITH statement with the loaded rows of the dataset,
// projected to the loaded columns and cut off at rowCap; other statements are refused.
func (f *fakeDatasets) Query(_ context.Context, account uuid.UUID, dataset, sql string) (QueryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(account)
	l, s, err := f.lookup(account, dataset)
	if err != nil {
		return QueryResult{}, err
	}
	head := strings.ToUpper(strings.TrimSpace(sql))
	if !strings.HasPrefix(head, "SELECT") && !strings.HasPrefix(head, "WITH") || strings.Contains(strings.TrimSuffix(strings.TrimSpace(sql), ";"), ";") {
		return QueryResult{}, tool.Errorf("only one SELECT or WITH statement is allowed")
	}
	res := QueryResult{Columns: l.Columns}
	for i, row := range s.rows[:l.Rows] {
		if i == f.rowCap {
			res.CutOff = "row cap reached"
			break
		}
		var out []any
		for _, c := range l.Columns {
			j := slices.IndexFunc(s.columns, func(sc Column) bool { return sc.Name == c.Name })
			out = append(out, row[j])
		}
		res.Rows = append(res.Rows, out)
	}
	return res, nil
}

// callsFor returns how many calls account made.
func (f *fakeDatasets) callsFor(account uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, a := range f.calls {
		if a == account {
			n++
		}
	}
	return n
}
