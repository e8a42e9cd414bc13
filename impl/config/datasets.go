package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Dataset store kinds (see Datasets).
const (
	// DatasetStoreDir keeps datasets in a local directory (the default).
	DatasetStoreDir = "dir"
	// DatasetStoreS3 keeps datasets in an S3-compatible object store.
	DatasetStoreS3 = "s3"
)

// Datasets configures where tenant datasets are stored: a local directory (the default, fit for
// one host) or an S3-compatible object store that every replica shares, read through a local
// cache. Credentials never come from the file: the object store's are the standard
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
type Datasets struct {
	// Store is "dir" (default) or "s3".
	Store string `yaml:"store"`
	// Dir is the directory of the dir store (default: $TOLLGATE_DATA_DIR/datasets).
	Dir string `yaml:"dir"`
	// S3 is the object store of the s3 store.
	S3 S3Store `yaml:"s3"`
	// EngineMemoryMB is the hard memory bound, in MiB, of each dataset engine process (each
	// materialized dataset runs its SQL in a process of its own, whose private memory the
	// kernel bounds; see docs/mcp.md). 0: the default, DefaultEngineMemoryMB. At least
	// MinEngineMemoryMB.
	EngineMemoryMB int64 `yaml:"engine_memory_mb"`
}

// The bounds of datasets.engine_memory_mb.
const (
	// DefaultEngineMemoryMB is a dataset engine process's default memory bound: DuckDB's own
	// memory limit (256 MiB) and 512 MiB for the process itself and for the values that
	// DuckDB builds outside its limit (a query that needs more ends in an "out of memory"
	// error of its dataset's engine alone).
	DefaultEngineMemoryMB = 768
	// MinEngineMemoryMB is the smallest bound: DuckDB's memory limit (256 MiB), which its
	// loads and queries may use whole, and what an idle engine process already counts against
	// the bound (234-302 MiB of private writable mappings in our runs: its threads' stacks and
	// the arenas of Go and of DuckDB), with some room. Below it a dataset whose database used
	// its whole memory limit could have its engine fail for want of memory before DuckDB said
	// so (impl/dataset TestSmallestEngineBoundServes runs at this bound).
	MinEngineMemoryMB = 640
)

// S3Store names a bucket of an S3-compatible object store (AWS S3, Cloudflare R2, Google Cloud
// Storage's S3 interoperability, MinIO, SeaweedFS) and the local cache in front of it.
type S3Store struct {
	// Endpoint is the store's URL, e.g. https://s3.eu-west-1.amazonaws.com (empty: AWS S3 in
	// Region).
	Endpoint string `yaml:"endpoint"`
	// Bucket is the bucket's name (required).
	Bucket string `yaml:"bucket"`
	// Region is the bucket's region (R2: "auto"; empty: asked of the store).
	Region string `yaml:"region"`
	// Prefix is put before every key, so that deployments can share a bucket.
	Prefix string `yaml:"prefix"`
	// PathStyle addresses the bucket as endpoint/bucket (MinIO, SeaweedFS).
	PathStyle bool `yaml:"path_style"`
	// CacheDir is the local read-through cache (default: $TOLLGATE_DATA_DIR/dataset-cache).
	CacheDir string `yaml:"cache_dir"`
	// CacheMaxMB bounds the cache in MiB (default 10240); the least recently used files go.
	CacheMaxMB int64 `yaml:"cache_max_mb"`
	// RequestTimeout bounds each request to the store (default 5 s).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// TransferIdleTimeout bounds how long an upload or download may make no progress
	// (default 20 s).
	TransferIdleTimeout time.Duration `yaml:"transfer_idle_timeout"`
}

// ApplyEnv overrides the section with the environment, read through lookup (cmd/ passes
// os.LookupEnv): TOLLGATE_DATASET_STORE, TOLLGATE_DATASETS_DIR, TOLLGATE_S3_BUCKET,
// TOLLGATE_S3_PREFIX, TOLLGATE_S3_PATH_STYLE, TOLLGATE_DATASET_CACHE_DIR,
// TOLLGATE_DATASET_CACHE_MAX_MB, the endpoint from TOLLGATE_S3_ENDPOINT, else
// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, and the region from TOLLGATE_S3_REGION, else
// AWS_REGION, else AWS_DEFAULT_REGION (the AWS variables only where the file sets nothing).
// A value that does not parse is an error.
func (d *Datasets) ApplyEnv(lookup func(string) (string, bool)) error {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return v, ok && v != ""
	}
	if v, ok := get("TOLLGATE_DATASET_STORE"); ok {
		d.Store = v
	}
	if v, ok := get("TOLLGATE_DATASETS_DIR"); ok {
		d.Dir = v
	}
	if v, ok := get("TOLLGATE_S3_BUCKET"); ok {
		d.S3.Bucket = v
	}
	if v, ok := get("TOLLGATE_S3_PREFIX"); ok {
		d.S3.Prefix = v
	}
	if v, ok := get("TOLLGATE_S3_ENDPOINT"); ok {
		d.S3.Endpoint = v
	} else if d.S3.Endpoint == "" {
		if v, ok := get("AWS_ENDPOINT_URL_S3"); ok {
			d.S3.Endpoint = v
		} else if v, ok := get("AWS_ENDPOINT_URL"); ok {
			d.S3.Endpoint = v
		}
	}
	if v, ok := get("TOLLGATE_S3_REGION"); ok {
		d.S3.Region = v
	} else if d.S3.Region == "" {
		if v, ok := get("AWS_REGION"); ok {
			d.S3.Region = v
		} else if v, ok := get("AWS_DEFAULT_REGION"); ok {
			d.S3.Region = v
		}
	}
	if v, ok := get("TOLLGATE_DATASET_CACHE_DIR"); ok {
		d.S3.CacheDir = v
	}
	var errs []error
	if v, ok := get("TOLLGATE_S3_PATH_STYLE"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("TOLLGATE_S3_PATH_STYLE=%q is not a boolean", v))
		}
		d.S3.PathStyle = b
	}
	if v, ok := get("TOLLGATE_DATASET_CACHE_MAX_MB"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("TOLLGATE_DATASET_CACHE_MAX_MB=%q is not a positive number", v))
		}
		d.S3.CacheMaxMB = n
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return d.Validate()
}

// Validate checks the section.
func (d Datasets) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("datasets: "+format, args...)) }
	switch d.Store {
	case "", DatasetStoreDir:
	case DatasetStoreS3:
		if d.S3.Bucket == "" {
			bad("s3.bucket is required with store s3")
		}
		if e := d.S3.Endpoint; e != "" {
			if !strings.Contains(e, "://") {
				e = "https://" + e
			}
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
				bad("s3.endpoint %q is not an http(s) URL of a host", d.S3.Endpoint)
			}
		}
		if d.S3.CacheMaxMB < 0 || d.S3.RequestTimeout < 0 || d.S3.TransferIdleTimeout < 0 {
			bad("s3.cache_max_mb and the timeouts must not be negative")
		}
	default:
		bad("store must be %q or %q, not %q", DatasetStoreDir, DatasetStoreS3, d.Store)
	}
	if d.EngineMemoryMB != 0 && d.EngineMemoryMB < MinEngineMemoryMB {
		bad("engine_memory_mb %d is below %d: an engine process holds DuckDB's 256 MiB memory limit and about 300 MiB of its own (0: the default, %d)", d.EngineMemoryMB, MinEngineMemoryMB, DefaultEngineMemoryMB)
	}
	return errors.Join(errs...)
}

// EngineMemoryBytes is each dataset engine process's memory bound in bytes
// (engine_memory_mb, or DefaultEngineMemoryMB when it is 0).
func (d Datasets) EngineMemoryBytes() int64 {
	if d.EngineMemoryMB <= 0 {
		return DefaultEngineMemoryMB << 20
	}
	return d.EngineMemoryMB << 20
}
