package config

import (
	"strings"
	"testing"
	"time"
)

// TestDatasetsSectionAndEnvironment reads the datasets section from a file, lets the
// environment override it (the AWS variables only where the file is silent) and refuses what
// cannot work.
func TestDatasetsSectionAndEnvironment(t *testing.T) {
	c, err := Parse([]byte(`
datasets:
  store: s3
  s3:
    bucket: b
    region: eu-west-1
    path_style: true
    request_timeout: 3s
`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Datasets
	if d.Store != DatasetStoreS3 || d.S3.Bucket != "b" || !d.S3.PathStyle || d.S3.RequestTimeout != 3*time.Second {
		t.Fatalf("parsed %+v", d)
	}
	env := map[string]string{
		"AWS_REGION":                    "us-west-2",
		"AWS_ENDPOINT_URL_S3":           "http://127.0.0.1:8333",
		"TOLLGATE_S3_BUCKET":            "other",
		"TOLLGATE_DATASET_CACHE_MAX_MB": "64",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := d.ApplyEnv(lookup); err != nil {
		t.Fatal(err)
	}
	if d.S3.Region != "eu-west-1" || d.S3.Endpoint != "http://127.0.0.1:8333" || d.S3.Bucket != "other" || d.S3.CacheMaxMB != 64 {
		t.Fatalf("after the environment: %+v", d.S3)
	}
	env["TOLLGATE_S3_REGION"] = "auto"
	if err := d.ApplyEnv(lookup); err != nil || d.S3.Region != "auto" {
		t.Fatalf("TOLLGATE_S3_REGION: %v %q", err, d.S3.Region)
	}

	var dflt Datasets
	if err := dflt.ApplyEnv(func(string) (string, bool) { return "", false }); err != nil || dflt.Store != "" {
		t.Fatalf("no section, no environment: %v %+v", err, dflt)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"datasets:\n  store: s3\n", "s3.bucket is required"},
		{"datasets:\n  store: gcs\n", `store must be "dir" or "s3"`},
		{"datasets:\n  store: s3\n  s3:\n    bucket: b\n    endpoint: ftp://x\n", "is not an http(s) URL"},
	} {
		if _, err := Parse([]byte(bad.yaml)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%q: %v, want %q", bad.yaml, err, bad.want)
		}
	}
	env = map[string]string{"TOLLGATE_DATASET_STORE": "s3", "TOLLGATE_S3_BUCKET": "b", "TOLLGATE_S3_PATH_STYLE": "maybe"}
	if err := (&Datasets{}).ApplyEnv(lookup); err == nil || !strings.Contains(err.Error(), "TOLLGATE_S3_PATH_STYLE") {
		t.Fatalf("a bad boolean: %v", err)
	}
}

// TestDatasetEngineMemory reads datasets.engine_memory_mb, the bound of each dataset engine
// process, defaults it to 768 MiB and refuses a bound below what an engine needs (DuckDB's
// 256 MiB and its idle process's own).
func TestDatasetEngineMemory(t *testing.T) {
	c, err := Parse([]byte("datasets:\n  engine_memory_mb: 1024\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Datasets.EngineMemoryBytes(); got != 1<<30 {
		t.Errorf("engine_memory_mb 1024: %d bytes", got)
	}
	if got := (Datasets{}).EngineMemoryBytes(); got != 768<<20 {
		t.Errorf("the default: %d bytes, want 768 MiB", got)
	}
	for _, v := range []string{"256", "639", "-1"} {
		if _, err := Parse([]byte("datasets:\n  engine_memory_mb: " + v + "\n")); err == nil || !strings.Contains(err.Error(), "engine_memory_mb "+v+" is below 640") {
			t.Errorf("engine_memory_mb %s: %v, want it refused", v, err)
		}
	}
	if _, err := Parse([]byte("datasets:\n  engine_memory_mb: 640\n")); err != nil {
		t.Errorf("engine_memory_mb 640: %v", err)
	}
}
