package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// LoadedDataset is the record of one dataset an account has loaded into the query engine. The
// data is not kept here: any gateway process materializes it from storage on first use, using
// Format and Params.
type LoadedDataset struct {
	AccountID uuid.UUID
	// Dataset is the dataset's name in the account's storage namespace.
	Dataset string
	// Format is the file format that was loaded: "csv", "parquet" or "jsonl".
	Format string
	// Params is the JSON of the load parameters (columns, limit, filter).
	Params []byte
	// RowCount is the number of rows the load produced.
	RowCount int64
	// Columns is the JSON of the loaded columns (names and types).
	Columns []byte
	// Generation changes on every (re)load of the dataset; a materialized copy of an older
	// generation is stale.
	Generation int64
	LoadedAt   time.Time
}

func loadedDatasetFromRow(r db.LoadedDataset) LoadedDataset {
	return LoadedDataset{
		AccountID: r.AccountID, Dataset: r.Dataset, Format: r.Format, Params: r.Params,
		RowCount: r.RowCount, Columns: r.Columns, Generation: r.Generation, LoadedAt: r.LoadedAt,
	}
}

// RecordLoadedDataset records a load of a dataset, replacing any earlier record of the same
// dataset for the account, and returns the record with its new generation and time. The
// Generation and LoadedAt fields of d are ignored.
func (s *Store) RecordLoadedDataset(ctx context.Context, d LoadedDataset) (LoadedDataset, error) {
	row, err := s.q.UpsertLoadedDataset(ctx, db.UpsertLoadedDatasetParams{
		AccountID: d.AccountID, Dataset: d.Dataset, Format: d.Format, Params: d.Params,
		RowCount: d.RowCount, Columns: d.Columns,
	})
	if err != nil {
		return LoadedDataset{}, err
	}
	return loadedDatasetFromRow(row), nil
}

// LoadedDataset returns the account's record of the loaded dataset, or ErrNotFound.
func (s *Store) LoadedDataset(ctx context.Context, accountID uuid.UUID, dataset string) (LoadedDataset, error) {
	row, err := s.q.GetLoadedDataset(ctx, db.GetLoadedDatasetParams{AccountID: accountID, Dataset: dataset})
	if err != nil {
		return LoadedDataset{}, notFound(err)
	}
	return loadedDatasetFromRow(row), nil
}

// LoadedDatasets returns the records of every dataset the account has loaded, by name.
func (s *Store) LoadedDatasets(ctx context.Context, accountID uuid.UUID) ([]LoadedDataset, error) {
	rows, err := s.q.ListLoadedDatasets(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]LoadedDataset, len(rows))
	for i, r := range rows {
		out[i] = loadedDatasetFromRow(r)
	}
	return out, nil
}

// ForgetLoadedDataset deletes the account's record of the loaded dataset and reports whether
// there was one.
func (s *Store) ForgetLoadedDataset(ctx context.Context, accountID uuid.UUID, dataset string) (bool, error) {
	n, err := s.q.DeleteLoadedDataset(ctx, db.DeleteLoadedDatasetParams{AccountID: accountID, Dataset: dataset})
	if err != nil {
		return false, err
	}
	return n > 0, nil
}
