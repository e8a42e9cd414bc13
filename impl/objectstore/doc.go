// Package objectstore keeps tollgate's datasets in an S3-compatible object store (AWS S3,
// Cloudflare R2, Google Cloud Storage's S3 interoperability, MinIO, SeaweedFS), so that every
// gateway replica, on whatever host, sees a dataset as soon as its upload returns.
//
// Store is the dataset.Storage over one bucket (and an optional key prefix in it). Its Put is
// atomic as readers see it: an object of up to one part is a single PUT, a larger one a
// multipart upload that becomes visible only when it completes, so a reader finds the old
// object or the whole new one, never a part. Every call to the store has a bounded time: a
// request (stat, list, delete, the head of a read) must be answered within
// Config.RequestTimeout, and a transfer must make progress at least every
// Config.TransferIdleTimeout. A store that is slow, stopped or unreachable therefore gives a
// *dataset.StoreUnavailableError within those bounds, never a hang; the dataset tools show its
// text ("the dataset store is unavailable …") as a tool error. Inference never calls the store.
//
// Cache is the read-through cache in front of a Store that the query engine reads from: it
// implements dataset.LeasingStorage, downloading an object to a local directory on first use,
// keyed by the object's key and checked by its ETag on every use, so that an object replaced
// through another replica is fetched again. It is bounded in bytes and evicts the least
// recently used files, never one a reader holds a lease on; concurrent first reads of one
// object download it once.
//
// Credentials come from the standard environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN) unless Config gives them; see docs/operations.md, "Dataset storage".
package objectstore
