package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tollgate/tollgate/impl/devkit/s3test"
)

// TestAdminDatasetPutWritesTheObjectStore runs `tollgate admin dataset put|list|delete` with the
// s3 dataset store selected by the environment (as an operator would on any host): the upload
// is in the bucket when the command returns, the listing reads it back from the store, and
// delete removes it. With the default directory store nothing would reach the bucket.
func TestAdminDatasetPutWritesTheObjectStore(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	t.Setenv("DATABASE_URL", migratedDatabase(t))
	t.Setenv("LOG_LEVEL", "error")
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	mustAdmin(t, "account create acme -plan demo")
	file := filepath.Join(t.TempDir(), "sales.csv")
	if err := os.WriteFile(file, []byte("region,amount\nnorth,10\nsouth,25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustAdmin(t, "dataset put acme "+file); !strings.Contains(out, "sales") {
		t.Fatalf("dataset put: %s", out)
	}
	keys := bucketKeys(t, srv)
	if len(keys) != 1 || !strings.HasSuffix(keys[0], "/sales.csv") {
		t.Fatalf("the bucket holds %v, want the uploaded tenant/<account>/sales.csv", keys)
	}
	cl, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := cl.GetObject(context.Background(), srv.Bucket(), keys[0], minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(obj)
	if err != nil || string(body) != "region,amount\nnorth,10\nsouth,25\n" {
		t.Fatalf("the stored object reads %q, %v", body, err)
	}
	if out := mustAdmin(t, "dataset list acme"); !strings.Contains(out, "sales") || !strings.Contains(out, "csv") {
		t.Fatalf("dataset list: %s", out)
	}
	mustAdmin(t, "dataset delete acme sales -yes")
	if out := mustAdmin(t, "dataset list acme"); strings.Contains(out, "sales") {
		t.Fatalf("dataset list after delete: %s", out)
	}
}
