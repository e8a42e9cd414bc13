package audit

import (
	"time"

	"github.com/tollgate/tollgate/impl/dataset"
)

// Actions on an account's stored datasets, recorded by the web console's Datasets page and by
// `tollgate admin dataset put|delete`.
const (
	ActionDatasetUploaded = "dataset.uploaded"
	ActionDatasetDeleted  = "dataset.deleted"
)

// DatasetState is what the audit log keeps of a stored dataset, as an entry's Before or After.
func DatasetState(s dataset.StoredDataset) map[string]any {
	return map[string]any{"name": s.Name, "format": string(s.Format), "size_bytes": s.SizeBytes,
		"updated": s.Updated.UTC().Format(time.RFC3339)}
}
