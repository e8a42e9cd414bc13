package dataset

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// Options configure a Service. Zero fields take the defaults named on each.
type Options struct {
	// MaxLoaded bounds how many materialized datasets a process holds in memory (default 16),
	// which is how many idle engine processes it keeps (about 55 MiB resident each).
	MaxLoaded int
	// MaxMemoryBytes bounds the approximate memory of the materialized datasets a process holds
	// (default 1 GiB). The least recently used ones are dropped beyond either bound.
	MaxMemoryBytes int64
	// DatabaseMemoryLimit is DuckDB's memory_limit for each dataset's database (default 256 MiB):
	// a load or query that needs more fails rather than starving the process.
	DatabaseMemoryLimit int64
	// EngineMemoryBytes is the hard memory bound of each dataset's engine process, which the
	// kernel enforces (default DatabaseMemoryLimit + 512 MiB: an idle engine process takes about
	// 60 MiB, and values that DuckDB builds outside its memory limit need the rest). A query
	// that needs more ends in an "out of memory" error of its own, never the gateway's. The
	// configuration's datasets.engine_memory_mb sets it (impl/config: at least 640 MiB).
	EngineMemoryBytes int64
	// Threads is DuckDB's worker thread count for each dataset's database (default 2).
	Threads int
	// QueryTimeout is the statement timeout of query_data (default 10 s). A query that has not
	// answered 2 s (killGrace) past it has its dataset's engine process killed.
	QueryTimeout time.Duration
	// LoadTimeout bounds loading or materializing one dataset (default 2 min).
	LoadTimeout time.Duration
	// MaxRows caps the rows of one query result (default 1000).
	MaxRows int
	// MaxResultBytes caps the text of one query result (default 256 KiB).
	MaxResultBytes int
	// MaxQueries bounds the queries the process runs at once over every dataset (default 4),
	// and MaxAccountQueries those of one account (default 2): each dataset's database may use
	// DatabaseMemoryLimit, so that without a bound the engine's memory, which the Go memory
	// limit does not cover, grew with the number of datasets queried at once (trial h9 D6).
	MaxQueries        int
	MaxAccountQueries int
	// MaxLoads bounds the loads and materializations the process runs at once (default 2):
	// each builds a whole copy of its dataset (ten concurrent loads of a 72 MB CSV took the
	// process to 2.1 GB).
	MaxLoads int
	// TempDir is where objects of a Storage that is not a LocalStorage are copied for loading
	// (default: the system's temporary directory).
	TempDir string
	// Logger receives the package's log lines (default: slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxLoaded <= 0 {
		o.MaxLoaded = 16
	}
	if o.MaxMemoryBytes <= 0 {
		o.MaxMemoryBytes = 1 << 30
	}
	if o.DatabaseMemoryLimit <= 0 {
		o.DatabaseMemoryLimit = 256 << 20
	}
	if o.EngineMemoryBytes <= 0 {
		o.EngineMemoryBytes = o.DatabaseMemoryLimit + 512<<20
	}
	if o.Threads <= 0 {
		o.Threads = 2
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 10 * time.Second
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = 2 * time.Minute
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 1000
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 256 << 10
	}
	if o.MaxQueries <= 0 {
		o.MaxQueries = 4
	}
	if o.MaxAccountQueries <= 0 {
		o.MaxAccountQueries = 2
	}
	if o.MaxLoads <= 0 {
		o.MaxLoads = 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// StoredDataset is a dataset file in the caller's storage namespace.
type StoredDataset struct {
	Name      string
	Format    Format
	SizeBytes int64
	Updated   time.Time
}

// LoadOptions shape a load.
type LoadOptions struct {
	// Columns are the columns to keep, in order (all when empty). Names match the dataset's
	// columns case-insensitively.
	Columns []string `json:"columns,omitempty"`
	// Limit is the most rows to load (all when 0).
	Limit int `json:"limit,omitempty"`
	// Filter keeps the rows for which a predicate holds (all when empty). The predicate is
	// comparisons of a column with a literal, combined with AND, OR, NOT and parentheses:
	//
	//	column = != <> < <= > >= literal     literal: 'string', number, TRUE, FALSE
	//	column [NOT] LIKE 'pattern'
	//	column [NOT] IN (literal, ...)
	//	column IS [NOT] NULL
	//
	// A column is a name or a "double-quoted" name. The predicate is parsed and checked
	// against the dataset's columns, and the SQL is built from the parse tree.
	Filter string `json:"filter,omitempty"`
}

// LoadResult reports a load.
type LoadResult struct {
	Dataset  string
	Format   Format
	Rows     int64
	Columns  []Column
	LoadedAt time.Time
}

// LoadedDataset is one dataset the caller has loaded.
type LoadedDataset struct {
	Name     string
	Format   Format
	Rows     int64
	Columns  []Column
	Options  LoadOptions
	LoadedAt time.Time
	// InMemory reports whether this process holds the dataset materialized right now (the
	// others materialize it on first use).
	InMemory bool
}

// QueryResult is the answer of a query.
type QueryResult struct {
	// Text is the result as a compact text table, followed by a line that says how many rows
	// it shows and, when a cap was hit, which.
	Text    string
	Columns []Column
	// Rows is the number of rows in Text.
	Rows int
	// Truncated reports that the result had more than Text shows: the row cap or the byte
	// cap (TruncatedBy "rows" or "bytes") was hit.
	Truncated   bool
	TruncatedBy string
}

// Service is the datasets of every account: storage, loading and queries. Create it with New;
// it is safe for concurrent use.
type Service struct {
	store   *store.Store
	storage Storage
	opts    Options
	engine  engineConfig

	mu       sync.Mutex
	lru      *list.List // of *entry, most recently used first
	entries  map[entryKey]*entry
	inflight map[entryKey]*flight
	used     int64
	closed   bool
	// running counts each account's queries in flight (under mu); queries and loads hold a
	// place of the process's bounds (Options.MaxQueries, MaxLoads) while they run.
	running map[uuid.UUID]int
	queries chan struct{}
	loads   chan struct{}
}

type entryKey struct {
	account uuid.UUID
	name    string
}

// entry is one materialized dataset in the cache: its engine process.
type entry struct {
	key  entryKey
	gen  int64
	proc *engineProcess
	refs int
	gone bool // removed from the cache; closed when the last user releases it
	// quarantined: dropped as unusable and its process killed (see quarantine).
	quarantined bool
	elem        *list.Element
}

// flight is a materialization in progress, which concurrent users of the same generation wait
// for instead of loading the dataset again.
type flight struct {
	gen  int64
	done chan struct{}
	err  error
}

// New returns a Service over the database and the storage.
func New(st *store.Store, storage Storage, opts Options) *Service {
	opts = opts.withDefaults()
	return &Service{
		store:    st,
		storage:  storage,
		opts:     opts,
		engine:   engineConfig{threads: opts.Threads, memoryLimit: opts.DatabaseMemoryLimit, conns: 4, processBytes: opts.EngineMemoryBytes},
		lru:      list.New(),
		entries:  map[entryKey]*entry{},
		inflight: map[entryKey]*flight{},
		running:  map[uuid.UUID]int{},
		queries:  make(chan struct{}, opts.MaxQueries),
		loads:    make(chan struct{}, opts.MaxLoads),
	}
}

// startQuery takes one of the account's query places and one of the process's, waiting for
// the latter at most the statement timeout; the returned func gives both back. An account at
// its own bound is told at once.
func (s *Service) startQuery(ctx context.Context, account uuid.UUID) (func(), error) {
	s.mu.Lock()
	if s.running[account] >= s.opts.MaxAccountQueries {
		s.mu.Unlock()
		return nil, userErr(CodeTimeout, "the account already runs %d queries on its datasets, the most it may at once: retry when one ends", s.opts.MaxAccountQueries)
	}
	s.running[account]++
	s.mu.Unlock()
	leave := func() {
		s.mu.Lock()
		if s.running[account]--; s.running[account] <= 0 {
			delete(s.running, account)
		}
		s.mu.Unlock()
	}
	wait := time.NewTimer(s.opts.QueryTimeout)
	defer wait.Stop()
	select {
	case s.queries <- struct{}{}:
		return func() { <-s.queries; leave() }, nil
	case <-wait.C:
		leave()
		return nil, userErr(CodeTimeout, "the dataset engine is busy: %d queries ran for the whole %s statement timeout; retry later", s.opts.MaxQueries, s.opts.QueryTimeout)
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// Close drops every materialized dataset of this process (not the records) and waits a
// little for their engine processes to exit. Queries in flight finish first; the Service must
// not be used afterwards.
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	var drop []*engineProcess
	for _, e := range s.entries {
		drop = append(drop, s.removeLocked(e)...)
	}
	s.mu.Unlock()
	closeAll(drop)
	for _, p := range drop {
		p.wait(2 * time.Second)
	}
	return nil
}

// ListStorage returns the caller's datasets in storage, by name.
func (s *Service) ListStorage(ctx context.Context, account uuid.UUID) ([]StoredDataset, error) {
	prefix := tenantPrefix(account)
	objs, err := s.storage.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list storage: %w", err)
	}
	rank := map[Format]int{}
	for i, f := range formats {
		rank[f] = i
	}
	best := map[string]StoredDataset{}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, prefix)
		dot := strings.LastIndexByte(rest, '.')
		if strings.Contains(rest, "/") || dot < 0 {
			continue
		}
		name := rest[:dot]
		f, ok := ParseFormat(rest[dot+1:])
		if !ok || !ValidName(name) {
			continue
		}
		if cur, ok := best[name]; ok && rank[cur.Format] < rank[f] {
			continue
		}
		best[name] = StoredDataset{Name: name, Format: f, SizeBytes: o.Size, Updated: o.Updated}
	}
	out := make([]StoredDataset, 0, len(best))
	for _, d := range best {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Load loads the caller's dataset ref into its own query engine database, applying opts, and
// records the load so that every process (and this one after a restart) can materialize it. A
// new load of the same dataset replaces the earlier one.
func (s *Service) Load(ctx context.Context, account uuid.UUID, ref string, opts LoadOptions) (LoadResult, error) {
	if opts.Limit < 0 {
		return LoadResult{}, userErr(CodeInvalid, "limit must not be negative")
	}
	if len(opts.Columns) > 4096 {
		return LoadResult{}, userErr(CodeInvalid, "too many columns")
	}
	r, err := s.resolve(ctx, account, ref)
	if err != nil {
		return LoadResult{}, err
	}
	d, opts, err := s.materialize(ctx, account, r, opts)
	if err != nil {
		if errors.Is(err, ErrNotOwned) {
			return LoadResult{}, &NotOwnedError{Name: ref}
		}
		return LoadResult{}, err
	}
	params, _ := json.Marshal(opts)
	cols, _ := json.Marshal(d.columns)
	rec, err := s.store.RecordLoadedDataset(ctx, store.LoadedDataset{
		AccountID: account, Dataset: r.Name, Format: string(r.Format), Params: params, RowCount: d.rows, Columns: cols,
	})
	if err != nil {
		_ = d.Close()
		return LoadResult{}, fmt.Errorf("record loaded dataset: %w", err)
	}
	e := s.install(entryKey{account, r.Name}, rec.Generation, d)
	s.release(e)
	// A delete or a replace that ran while the file was read removed the record of its load
	// before this one was written, or will remove it after: the file, checked again now that
	// the load is recorded, tells which. If it is gone or not the one read (its size or time
	// changed), the load is withdrawn, so that no query sees data that was deleted or replaced
	// (trial h9 D5: the deleted data stayed loaded and queryable).
	if now, err := s.storage.Stat(ctx, datasetKey(account, r.Name, r.Format)); err != nil || now.Size != r.Object.Size || !now.Updated.Equal(r.Object.Updated) {
		if ferr := s.forget(ctx, account, r.Name); ferr != nil {
			return LoadResult{}, ferr
		}
		if errors.Is(err, ErrStoreUnavailable) {
			return LoadResult{}, err
		}
		return LoadResult{}, userErr(CodeFailed, "dataset '%s' was replaced or deleted while it was loading, so nothing was loaded: load it again", r.Name)
	}
	s.opts.Logger.Info("dataset loaded", "account", account, "dataset", r.Name, "format", r.Format, "rows", d.rows, "bytes", d.bytes)
	return LoadResult{Dataset: r.Name, Format: r.Format, Rows: d.rows, Columns: d.columns, LoadedAt: rec.LoadedAt}, nil
}

// Loaded returns the datasets the caller has loaded, by name; nobody else's.
func (s *Service) Loaded(ctx context.Context, account uuid.UUID) ([]LoadedDataset, error) {
	recs, err := s.store.LoadedDatasets(ctx, account)
	if err != nil {
		return nil, fmt.Errorf("loaded datasets: %w", err)
	}
	out := make([]LoadedDataset, 0, len(recs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		ld, err := loadedFromRecord(rec)
		if err != nil {
			return nil, err
		}
		e := s.entries[entryKey{account, rec.Dataset}]
		ld.InMemory = e != nil && e.gen == rec.Generation
		out = append(out, ld)
	}
	return out, nil
}

func loadedFromRecord(rec store.LoadedDataset) (LoadedDataset, error) {
	ld := LoadedDataset{Name: rec.Dataset, Format: Format(rec.Format), Rows: rec.RowCount, LoadedAt: rec.LoadedAt}
	if err := json.Unmarshal(rec.Columns, &ld.Columns); err != nil {
		return ld, fmt.Errorf("loaded dataset %s: columns: %w", rec.Dataset, err)
	}
	if err := json.Unmarshal(rec.Params, &ld.Options); err != nil {
		return ld, fmt.Errorf("loaded dataset %s: params: %w", rec.Dataset, err)
	}
	return ld, nil
}

// Schema returns the columns of the caller's loaded dataset.
func (s *Service) Schema(ctx context.Context, account uuid.UUID, ref string) ([]Column, error) {
	rec, err := s.record(ctx, account, ref)
	if err != nil {
		return nil, err
	}
	ld, err := loadedFromRecord(rec)
	if err != nil {
		return nil, err
	}
	return ld.Columns, nil
}

// Query runs read-only SQL, one SELECT or WITH statement, against the caller's loaded dataset
// ref, in a database that holds only that dataset and can reach nothing else. The statement
// is interrupted after the statement timeout, and the result is cut at the row and byte caps.
func (s *Service) Query(ctx context.Context, account uuid.UUID, ref, sqlText string) (QueryResult, error) {
	rec, err := s.record(ctx, account, ref)
	if err != nil {
		return QueryResult{}, err
	}
	stmt, uerr := checkSelect(sqlText)
	if uerr != nil {
		return QueryResult{}, uerr
	}
	done, err := s.startQuery(ctx, account)
	if err != nil {
		return QueryResult{}, err
	}
	defer done()
	e, err := s.acquire(ctx, account, ref, rec)
	if err != nil {
		return QueryResult{}, err
	}
	defer s.release(e)
	res, err := e.proc.query(ctx, stmt, queryLimits{timeout: s.opts.QueryTimeout, rows: s.opts.MaxRows, bytes: s.opts.MaxResultBytes})
	var ue *Error
	switch {
	case !e.proc.alive():
		// Killed past the statement timeout, or dead of its memory bound: the next query
		// materializes the dataset in a new engine process.
		log := s.opts.Logger.With("account", account, "dataset", rec.Dataset, "error", err)
		if what := e.proc.malformedAnswer(); what != "" {
			log = log.With("malformed_answer", what)
		}
		log.Warn("dataset engine process ended by a query; the dataset is materialized again on its next use")
		s.quarantine(e)
	case errors.As(err, &ue) && (ue.Code == CodeFailed || ue.Code == CodeTimeout) && ctx.Err() == nil && !e.proc.healthy(ctx):
		// Whatever broke it, this copy is dropped and the next query materializes a new one.
		s.opts.Logger.Error("dataset database unusable after a failed query; quarantining it", "account", account, "dataset", rec.Dataset)
		s.quarantine(e)
	}
	return res, err
}

// record returns the caller's record of the loaded dataset ref. A reference that does not
// resolve under the caller's namespace is a *NotOwnedError; one that does but is not loaded
// is an *Error with CodeNotLoaded. A missing record also drops this process's copy.
func (s *Service) record(ctx context.Context, account uuid.UUID, ref string) (store.LoadedDataset, error) {
	name, _, err := cleanName(account, ref)
	if err != nil {
		return store.LoadedDataset{}, err
	}
	rec, err := s.store.LoadedDataset(ctx, account, name)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return rec, fmt.Errorf("loaded dataset: %w", err)
	}
	s.evict(entryKey{account, name})
	if _, err := s.resolve(ctx, account, ref); err != nil {
		return rec, err
	}
	return rec, userErr(CodeNotLoaded, "dataset '%s' is not loaded: load it with load_storage_dataset first", name)
}

// Put stores r as the account's dataset name in the given format, replacing the dataset (in
// any format) and forgetting its load, which was of the old data. It is the operator's way in;
// callers of the tools only read.
func (s *Service) Put(ctx context.Context, account uuid.UUID, name string, f Format, r io.Reader) (StoredDataset, error) {
	if !ValidName(name) {
		return StoredDataset{}, userErr(CodeInvalid, "dataset name %q must match %s", name, nameRE)
	}
	if _, ok := ParseFormat(string(f)); !ok {
		return StoredDataset{}, userErr(CodeInvalid, "format %q is not one of csv, parquet, jsonl", f)
	}
	key := datasetKey(account, name, f)
	if err := s.storage.Put(ctx, key, r); err != nil {
		return StoredDataset{}, fmt.Errorf("store dataset: %w", err)
	}
	for _, other := range formats {
		if other != f {
			if err := s.storage.Delete(ctx, datasetKey(account, name, other)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return StoredDataset{}, fmt.Errorf("remove %s copy: %w", other, err)
			}
		}
	}
	if err := s.forget(ctx, account, name); err != nil {
		return StoredDataset{}, err
	}
	obj, err := s.storage.Stat(ctx, key)
	if err != nil {
		return StoredDataset{}, err
	}
	return StoredDataset{Name: name, Format: f, SizeBytes: obj.Size, Updated: obj.Updated}, nil
}

// Delete removes the account's dataset ref from storage (every format) and forgets its load.
func (s *Service) Delete(ctx context.Context, account uuid.UUID, ref string) error {
	name, _, err := cleanName(account, ref)
	if err != nil {
		return err
	}
	found := false
	for _, f := range formats {
		err := s.storage.Delete(ctx, datasetKey(account, name, f))
		if err == nil {
			found = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete dataset: %w", err)
		}
	}
	forgot, err := s.store.ForgetLoadedDataset(ctx, account, name)
	if err != nil {
		return fmt.Errorf("forget loaded dataset: %w", err)
	}
	s.evict(entryKey{account, name})
	if !found && !forgot {
		return &NotOwnedError{Name: ref}
	}
	return nil
}

func (s *Service) forget(ctx context.Context, account uuid.UUID, name string) error {
	if _, err := s.store.ForgetLoadedDataset(ctx, account, name); err != nil {
		return fmt.Errorf("forget loaded dataset: %w", err)
	}
	s.evict(entryKey{account, name})
	return nil
}

// materialize builds a database for the resolved dataset, reading the file in place when the
// storage is local and from a temporary copy otherwise.
func (s *Service) materialize(ctx context.Context, account uuid.UUID, r resolved, opts LoadOptions) (*engineProcess, LoadOptions, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.LoadTimeout)
	defer cancel()
	select {
	case s.loads <- struct{}{}:
		defer func() { <-s.loads }()
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, opts, userErr(CodeTimeout, "loading dataset '%s' waited the whole %s load timeout behind other loads: retry later", r.Name, s.opts.LoadTimeout)
		}
		return nil, opts, ctx.Err()
	}
	key := datasetKey(account, r.Name, r.Format)
	var path string
	if ls, ok := s.storage.(LocalStorage); ok {
		var p string
		var err error
		if lease, ok := s.storage.(LeasingStorage); ok {
			var release func()
			p, release, err = lease.LeasePath(ctx, key)
			if err == nil {
				defer release()
			}
		} else {
			p, err = ls.LocalPath(ctx, key)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, opts, &NotOwnedError{Name: r.Name}
			}
			return nil, opts, err
		}
		// DuckDB expands glob characters in paths; such a path is read from a copy instead.
		if !strings.ContainsAny(p, "*?[]{}'") {
			path = p
		}
	}
	if path == "" {
		tmp, err := s.copyToTemp(ctx, key, r)
		if err != nil {
			return nil, opts, err
		}
		defer os.Remove(tmp)
		path = tmp
	}
	return startEngine(ctx, s.engine, loadSpec{path: path, format: r.Format, name: r.Name, opts: opts})
}

func (s *Service) copyToTemp(ctx context.Context, key string, r resolved) (string, error) {
	src, err := s.storage.Open(ctx, key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &NotOwnedError{Name: r.Name}
		}
		return "", err
	}
	defer src.Close()
	f, err := os.CreateTemp(s.opts.TempDir, "tollgate-dataset-*."+string(r.Format))
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// acquire returns the materialized database of rec's generation, materializing it from
// storage if this process does not hold it. The caller must release it.
func (s *Service) acquire(ctx context.Context, account uuid.UUID, ref string, rec store.LoadedDataset) (*entry, error) {
	k := entryKey{account, rec.Dataset}
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("dataset service is closed")
		}
		if e := s.entries[k]; e != nil && !e.proc.alive() {
			// Its engine died while idle (the kernel's out-of-memory killer, an operator): the
			// entry is dropped here, so that this query materializes the dataset again rather
			// than fail on it. The process has been waited for; nothing is left to close.
			s.opts.Logger.Warn("dataset engine process found dead; the dataset is materialized again", "account", account, "dataset", rec.Dataset)
			e.quarantined = true
			s.removeLocked(e)
		}
		if e := s.entries[k]; e != nil && e.gen == rec.Generation {
			e.refs++
			s.lru.MoveToFront(e.elem)
			s.mu.Unlock()
			return e, nil
		}
		f := s.inflight[k]
		if f == nil || f.gen != rec.Generation {
			break
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil && !isContextErr(f.err) {
			return nil, f.err
		}
		s.mu.Lock()
	}
	f := &flight{gen: rec.Generation, done: make(chan struct{})}
	s.inflight[k] = f
	s.mu.Unlock()

	e, err := s.rematerialize(ctx, account, ref, rec)

	s.mu.Lock()
	if s.inflight[k] == f {
		delete(s.inflight, k)
	}
	f.err = err
	close(f.done)
	s.mu.Unlock()
	return e, err
}

func (s *Service) rematerialize(ctx context.Context, account uuid.UUID, ref string, rec store.LoadedDataset) (*entry, error) {
	ld, err := loadedFromRecord(rec)
	if err != nil {
		return nil, err
	}
	f, ok := ParseFormat(rec.Format)
	if !ok {
		return nil, fmt.Errorf("loaded dataset %s: unknown format %q", rec.Dataset, rec.Format)
	}
	obj, err := s.storage.Stat(ctx, datasetKey(account, rec.Dataset, f))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &NotOwnedError{Name: ref}
		}
		return nil, err
	}
	start := time.Now()
	d, _, err := s.materialize(ctx, account, resolved{Name: rec.Dataset, Format: f, Object: obj}, ld.Options)
	if err != nil {
		if errors.Is(err, ErrNotOwned) {
			return nil, &NotOwnedError{Name: ref}
		}
		return nil, err
	}
	s.opts.Logger.Info("dataset materialized", "account", account, "dataset", rec.Dataset, "generation", rec.Generation,
		"rows", d.rows, "bytes", d.bytes, "took", time.Since(start))
	return s.install(entryKey{account, rec.Dataset}, rec.Generation, d), nil
}

// install puts a materialized database in the cache with one reference held by the caller,
// replacing an older generation and evicting the least recently used databases beyond the
// bounds. A database of an older generation than the cached one is handed back uncached.
func (s *Service) install(k entryKey, gen int64, d *engineProcess) *entry {
	e := &entry{key: k, gen: gen, proc: d, refs: 1}
	s.mu.Lock()
	var drop []*engineProcess
	if old := s.entries[k]; old != nil && old.gen > gen || s.closed {
		e.gone = true
		s.mu.Unlock()
		return e
	} else if old != nil {
		drop = append(drop, s.removeLocked(old)...)
	}
	e.elem = s.lru.PushFront(e)
	s.entries[k] = e
	s.used += d.bytes
	for s.lru.Len() > 1 && (s.lru.Len() > s.opts.MaxLoaded || s.used > s.opts.MaxMemoryBytes) {
		victim := s.lru.Back().Value.(*entry)
		s.opts.Logger.Info("dataset dropped from memory", "account", victim.key.account, "dataset", victim.key.name, "bytes", victim.proc.bytes)
		drop = append(drop, s.removeLocked(victim)...)
	}
	s.mu.Unlock()
	closeAll(drop)
	return e
}

// release gives back a reference taken by acquire or install.
func (s *Service) release(e *entry) {
	s.mu.Lock()
	e.refs--
	closeIt := e.gone && e.refs == 0 && !e.quarantined
	s.mu.Unlock()
	if closeIt {
		_ = e.proc.Close()
	}
}

// evict drops this process's materialized copy of a dataset, if any.
func (s *Service) evict(k entryKey) {
	s.mu.Lock()
	var drop []*engineProcess
	if e := s.entries[k]; e != nil {
		drop = s.removeLocked(e)
	}
	s.mu.Unlock()
	closeAll(drop)
}

// quarantine takes e out of the cache for good and kills its engine process (a database in an
// unknown state may abort its process when it is closed, which is harmless in a process of its
// own but tells nothing): the next query materializes a new copy. Other queries of the account
// still running on it fail.
func (s *Service) quarantine(e *entry) {
	s.mu.Lock()
	if s.entries[e.key] == e {
		s.removeLocked(e)
	}
	e.quarantined = true
	s.mu.Unlock()
	e.proc.kill("it was found unusable after a failed query")
}

// removeLocked takes e out of the cache and returns its database to close when nobody uses
// it; otherwise the last release closes it.
func (s *Service) removeLocked(e *entry) []*engineProcess {
	if e.gone {
		return nil
	}
	e.gone = true
	delete(s.entries, e.key)
	s.lru.Remove(e.elem)
	s.used -= e.proc.bytes
	if e.refs == 0 && !e.quarantined {
		return []*engineProcess{e.proc}
	}
	return nil
}

func closeAll(ds []*engineProcess) {
	for _, d := range ds {
		_ = d.Close()
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
