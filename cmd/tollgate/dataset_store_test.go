package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tollgate/tollgate/impl/devkit/s3test"
)

// runTollgate runs the tollgate binary with env and args and returns its stdout, its stderr
// and its exit status.
func runTollgate(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testBinary(t), args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// bucketKeys lists the objects of the server's bucket under tenant/.
func bucketKeys(t *testing.T, srv *s3test.Server) []string {
	t.Helper()
	cl, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for o := range cl.ListObjects(context.Background(), srv.Bucket(), minio.ListObjectsOptions{Prefix: "tenant/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// TestAdminDatasetCommandsSayTheirStore runs `tollgate admin dataset put` as an operator does,
// as a process. With the configuration the gateways serve (TOLLGATE_CONFIG naming a file whose
// datasets section selects an S3 store, the credentials in the AWS variables), the dataset is
// written to the bucket and nothing is said of a local directory; without it, it is written
// to the local directory, and stderr says so and names the directory (before, nothing did,
// and an operator's upload went where no gateway read it). A malformed CSV file (rows of
// differing field counts) is refused with exit status 1 and the reason on stderr, and
// nothing of it is left in the bucket.
func TestAdminDatasetCommandsSayTheirStore(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	db := migratedDatabase(t)
	t.Setenv("DATABASE_URL", db)
	t.Setenv("LOG_LEVEL", "error")
	mustAdmin(t, "account create acme -plan demo")

	dir := t.TempDir()
	builtin, err := os.ReadFile("../../impl/config/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	configFile := filepath.Join(dir, "tollgate.yaml")
	withS3 := string(builtin) + "\ndatasets:\n  store: s3\n  s3:\n    endpoint: " + srv.Endpoint() + "\n    bucket: " + srv.Bucket() +
		"\n    region: " + srv.Region() + "\n    path_style: true\n"
	if err := os.WriteFile(configFile, []byte(withS3), 0o600); err != nil {
		t.Fatal(err)
	}
	sales := filepath.Join(dir, "sales.csv")
	ragged := filepath.Join(dir, "ragged.csv")
	if err := os.WriteFile(sales, []byte("region,amount\nnorth,10\nsouth,25\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ragged, []byte("region,amount\nnorth,10\nsouth\neast,1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := func(config string) []string {
		return append(os.Environ(), "DATABASE_URL="+db, "LOG_LEVEL=error", "TOLLGATE_CONFIG="+config, "TOLLGATE_DATA_DIR="+data,
			"TOLLGATE_DATASETS_DIR=", "TOLLGATE_DATASET_STORE=", "TOLLGATE_S3_ENDPOINT=", "TOLLGATE_S3_BUCKET=",
			"OPENAI_API_KEY=", "ANTHROPIC_API_KEY=", "AWS_ACCESS_KEY_ID="+srv.AccessKeyID(), "AWS_SECRET_ACCESS_KEY="+srv.SecretAccessKey())
	}

	// The gateways' configuration: the bucket.
	stdout, stderr, code := runTollgate(t, env(configFile), "admin", "dataset", "put", "acme", sales)
	if code != 0 || !strings.Contains(stdout, "dataset sales stored") || strings.Contains(stderr, "local directory") {
		t.Fatalf("put with the configuration: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if keys := bucketKeys(t, srv); len(keys) != 1 || !strings.HasSuffix(keys[0], "/sales.csv") {
		t.Fatalf("the bucket holds %v, want tenant/<account>/sales.csv", keys)
	}
	stdout, stderr, code = runTollgate(t, env(configFile), "admin", "dataset", "put", "acme", ragged)
	if code != 1 || !strings.Contains(stderr, "tollgate: "+ragged+" is not one table") || !strings.Contains(stderr, "number of fields") {
		t.Errorf("put of a ragged file: exit %d, want 1 with the reason\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if keys := bucketKeys(t, srv); len(keys) != 1 {
		t.Errorf("after the refused put the bucket holds %v", keys)
	}

	// No configuration: the local directory, said on stderr.
	stdout, stderr, code = runTollgate(t, env(""), "admin", "dataset", "put", "acme", sales)
	local := filepath.Join(data, "datasets")
	if code != 0 || !strings.Contains(stderr, "tollgate: datasets in the local directory "+local+": the configuration selects no object store") {
		t.Fatalf("put without the configuration: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if found, _ := filepath.Glob(filepath.Join(local, "tenant", "*", "sales.csv")); len(found) != 1 {
		t.Errorf("the local directory holds %v, want tenant/<account>/sales.csv", found)
	}
	if _, stderr, code = runTollgate(t, env(""), "admin", "dataset", "list", "acme", "-dir", local); code != 0 || !strings.Contains(stderr, "local directory "+local+" (-dir)") {
		t.Errorf("list -dir: exit %d, stderr: %s", code, stderr)
	}
}
