package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/objectstore"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// datasetUsage documents the dataset commands (datasetStorageNote, after the command list,
// where their storage is).
const datasetUsage = `  dataset put ACCOUNT FILE [-name N] [-format F] [-dir DIR]
                                            copy a local CSV (.csv), Parquet (.parquet) or JSON lines
                                            (.jsonl, .ndjson) file into the account's storage as dataset N
                                            (default: made from the file's name as the web console does,
                                            "Q3 sales.csv" is q3_sales); it replaces the dataset and
                                            forgets its load (audited in the account's audit log)
  dataset list ACCOUNT [-dir DIR]           the account's datasets in storage, and which are loaded
  dataset delete ACCOUNT NAME [-dir DIR] [-yes]
                                            delete a dataset and forget its load (audited; asks first,
                                            -yes: without asking)
`

// datasetStorageNote is the note of adminUsage, after its command list, on where the dataset
// commands find their storage.
const datasetStorageNote = `Dataset storage is the directory -dir when given, else the configured store (the datasets
section of the config file, -config or TOLLGATE_CONFIG as for serve, or TOLLGATE_DATASET_STORE=s3
with TOLLGATE_S3_BUCKET and the other variables of docs/operations.md), else
$TOLLGATE_DATASETS_DIR, else $TOLLGATE_DATA_DIR/datasets (default ./.data/datasets); a command on
a local directory says so on stderr. An account's datasets are its objects
tenant/<account-id>/<name>.<format>. A put returns once the store holds the object, so every
replica sees it at once; a CSV file whose rows do not all have the header's fields (or with an
unclosed quote, binary data or nothing in it) is refused and nothing is stored.
`

// datasetsDir returns the dataset storage root from the environment: TOLLGATE_DATASETS_DIR,
// else TOLLGATE_DATA_DIR/datasets, else .data/datasets.
func datasetsDir() string {
	if d := os.Getenv("TOLLGATE_DATASETS_DIR"); d != "" {
		return d
	}
	return filepath.Join(dataDir(), "datasets")
}

// dataDir returns TOLLGATE_DATA_DIR, else .data.
func dataDir() string {
	if d := os.Getenv("TOLLGATE_DATA_DIR"); d != "" {
		return d
	}
	return ".data"
}

// openDatasetStorage opens the dataset store the configuration's datasets section and the
// environment select (config.Datasets.ApplyEnv): a local directory (default, or dir when
// not empty) or an S3-compatible object store read through a local cache, whose credentials
// come from the standard AWS environment. The returned function releases it.
func openDatasetStorage(ctx context.Context, cfg *config.Config, dir string, log *slog.Logger) (dataset.Storage, func(), error) {
	ds := cfg.Datasets
	if err := ds.ApplyEnv(os.LookupEnv); err != nil {
		return nil, nil, err
	}
	if ds.Store != config.DatasetStoreS3 || dir != "" {
		if dir == "" {
			dir = ds.Dir
		}
		if dir == "" {
			dir = datasetsDir()
		}
		st, err := dataset.NewDirStorage(dir)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Close() }, nil
	}
	s3 := ds.S3
	st, err := objectstore.New(objectstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Region: s3.Region,
		Prefix: s3.Prefix, PathStyle: s3.PathStyle, RequestTimeout: s3.RequestTimeout, TransferIdleTimeout: s3.TransferIdleTimeout,
		Logger: log})
	if err != nil {
		return nil, nil, err
	}
	if err := st.Check(ctx); err != nil {
		// The store may come back later: datasets fail meanwhile, and nothing else does.
		log.Warn("dataset store not reachable at start", "endpoint", s3.Endpoint, "bucket", s3.Bucket, "err", err)
	}
	cacheDir := s3.CacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(dataDir(), "dataset-cache")
	}
	cache, err := objectstore.NewCache(st, objectstore.CacheOptions{Dir: cacheDir, MaxBytes: s3.CacheMaxMB << 20, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	log.Info("datasets in the object store", "endpoint", s3.Endpoint, "bucket", s3.Bucket, "prefix", s3.Prefix, "cache", cache.Dir())
	return cache, func() {}, nil
}

// dataset runs "admin dataset put|list|delete".
func (a *admin) dataset(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet("dataset "+verb, flag.ContinueOnError)
	dir := fs.String("dir", "", "dataset storage directory (default: the configured store)")
	var name, format *string
	var yes *bool
	asJSON := new(bool)
	want := 1
	switch verb {
	case "put":
		name = fs.String("name", "", "dataset name (default: made from the file's name, as the web console does)")
		format = fs.String("format", "", "csv, parquet or jsonl (default: from the file's extension)")
		want = 2
	case "delete":
		yes = yesFlag(fs)
		want = 2
	case "list":
		asJSON = jsonFlag(fs)
	default:
		return usageError(fmt.Sprintf("unknown admin command %q", "dataset "+verb))
	}
	pos, err := parse(fs, args, want)
	if err != nil {
		return err
	}
	var putName string
	var putFormat dataset.Format
	if verb == "put" {
		if putName, putFormat, err = datasetOfFile(pos[1], *name, *format); err != nil {
			return err
		}
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	storage, closeStorage, err := a.openDatasetStore(ctx, "datasets", *dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer closeStorage()
	svc := dataset.New(a.svc.Store, storage, dataset.Options{})
	defer svc.Close()

	switch verb {
	case "put":
		return a.datasetPut(ctx, svc, acct.ID, acct.Name, pos[1], putName, putFormat)
	case "delete":
		return a.datasetDelete(ctx, svc, acct.ID, acct.Name, pos[1], *yes)
	}
	stored, err := svc.ListStorage(ctx, acct.ID)
	if err != nil {
		return err
	}
	loaded, err := svc.Loaded(ctx, acct.ID)
	if err != nil {
		return err
	}
	byName := map[string]dataset.LoadedDataset{}
	for _, l := range loaded {
		byName[l.Name] = l
	}
	if *asJSON {
		list := make([]datasetJSON, 0, len(stored))
		for _, d := range stored {
			j := datasetJSON{Name: d.Name, Format: string(d.Format), SizeBytes: d.SizeBytes, UpdatedAt: utc(d.Updated)}
			if l, ok := byName[d.Name]; ok {
				j.Loaded = &datasetLoadJSON{Rows: l.Rows, LoadedAt: utc(l.LoadedAt)}
			}
			list = append(list, j)
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFORMAT\tBYTES\tUPDATED\tLOADED")
	for _, d := range stored {
		state := "-"
		if l, ok := byName[d.Name]; ok {
			state = fmt.Sprintf("%d rows at %s", l.Rows, l.LoadedAt.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.Name, d.Format, d.SizeBytes, d.Updated.Format(time.RFC3339), state)
	}
	return tw.Flush()
}

// openDatasetStore opens the dataset store for an admin command (openDatasetStorage, dir
// being its -dir if it has one) and says on stderr when it is a local directory
// (sayDatasetStore); what names what the command keeps there, such as "datasets". Every admin
// command that opens the dataset store opens it here.
func (a *admin) openDatasetStore(ctx context.Context, what, dir string, log *slog.Logger) (dataset.Storage, func(), error) {
	storage, closeStorage, err := openDatasetStorage(ctx, a.svc.Config, dir, log)
	if err != nil {
		return nil, nil, err
	}
	a.sayDatasetStore(storage, what, dir != "")
	return storage, closeStorage, nil
}

// sayDatasetStore tells the operator, on stderr, when an admin command works on a local
// directory for the dataset store: an operator whose gateways read an object store, named in
// the configuration that serve is given, and who runs the command without that configuration
// (-config or TOLLGATE_CONFIG) would otherwise store datasets where no gateway reads them, or
// read usage archives from where no gateway wrote them, unwarned.
func (a *admin) sayDatasetStore(storage dataset.Storage, what string, explicit bool) {
	ds, ok := storage.(*dataset.DirStorage)
	if !ok || a.notes == nil {
		return
	}
	if explicit {
		fmt.Fprintf(a.notes, "tollgate: %s in the local directory %s (-dir)\n", what, ds.Dir())
		return
	}
	fmt.Fprintf(a.notes, "tollgate: %s in the local directory %s: the configuration selects no object store "+
		"(give the configuration the gateways serve: -config FILE or TOLLGATE_CONFIG, or TOLLGATE_DATASET_STORE=s3)\n", what, ds.Dir())
}

// datasetOfFile is the name and the format of the dataset dataset put stores from file: -name
// (name) or one made from the file's name, -format (format) or the file's extension; a name or
// a format it cannot have is a mistake in the command line.
func datasetOfFile(file, name, format string) (string, dataset.Format, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	if format == "" {
		format = ext
		if ext == "ndjson" {
			format = "jsonl"
		}
	}
	f, ok := dataset.ParseFormat(format)
	if !ok {
		return "", "", usageError(fmt.Sprintf("cannot tell the format of %s: use a .csv, .parquet or .jsonl file, or -format", file))
	}
	if name == "" {
		name = dataset.NameFor(file)
	}
	if !dataset.ValidName(name) {
		return "", "", usageError(fmt.Sprintf("dataset name %q: use letters, digits, '_' and '-' (at most 64, starting with a letter or digit), or -name", name))
	}
	return name, f, nil
}

// datasetPut stores file as the account's dataset name in format f (datasetOfFile).
func (a *admin) datasetPut(ctx context.Context, svc *dataset.Service, account uuid.UUID, accountName, file, name string, f dataset.Format) error {
	cols, err := dataset.DescribeFile(ctx, file, f)
	if err != nil {
		return err
	}
	src, err := os.Open(file)
	if err != nil {
		return err
	}
	defer src.Close()
	before, err := storedByName(ctx, svc, account)
	if err != nil {
		return err
	}
	d, err := svc.Put(ctx, account, name, f, src)
	if err != nil {
		return err
	}
	var was any
	if s, ok := before[d.Name]; ok {
		was = audit.DatasetState(s)
	}
	if err := a.audit(ctx, account, audit.ActionDatasetUploaded, "dataset "+d.Name, was, audit.DatasetState(d)); err != nil {
		return err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name + " " + c.Type
	}
	fmt.Fprintf(a.out, "dataset %s stored for account %s (%s, %d bytes; columns: %s)\n", d.Name, accountName, d.Format, d.SizeBytes, strings.Join(names, ", "))
	return nil
}

// datasetDelete deletes the account's dataset ref and records each stored dataset it removed
// in the account's audit log, as the Datasets page's deletions are.
func (a *admin) datasetDelete(ctx context.Context, svc *dataset.Service, account uuid.UUID, accountName, ref string, yes bool) error {
	before, err := storedByName(ctx, svc, account)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("delete dataset %s of account %s and forget its load", ref, accountName)
	if d, ok := before[ref]; ok {
		what = fmt.Sprintf("delete dataset %s of account %s (%s, %d bytes) and forget its load", ref, accountName, d.Format, d.SizeBytes)
	}
	if err := a.confirm(yes, "dataset delete", what); err != nil {
		return err
	}
	err = svc.Delete(ctx, account, ref)
	if errors.Is(err, dataset.ErrNotOwned) {
		return fmt.Errorf("account %s has no dataset %q", accountName, ref)
	}
	if err != nil {
		return err
	}
	after, err := storedByName(ctx, svc, account)
	if err != nil {
		return fmt.Errorf("dataset %s is deleted, but listing the account's datasets to audit it failed: %w", ref, err)
	}
	for name, s := range before {
		if _, kept := after[name]; kept {
			continue
		}
		if err := a.audit(ctx, account, audit.ActionDatasetDeleted, "dataset "+name, audit.DatasetState(s), nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.out, "dataset %s of account %s deleted\n", ref, accountName)
	return nil
}

// storedByName returns the account's stored datasets by name.
func storedByName(ctx context.Context, svc *dataset.Service, account uuid.UUID) (map[string]dataset.StoredDataset, error) {
	stored, err := svc.ListStorage(ctx, account)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]dataset.StoredDataset, len(stored))
	for _, s := range stored {
		byName[s.Name] = s
	}
	return byName, nil
}
