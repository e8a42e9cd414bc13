package tenanttools_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/s3test"
	"github.com/tollgate/tollgate/impl/objectstore"
)

// Short bounds on the object store, as the outage tests want them.
const (
	storeRequestTimeout = 2 * time.Second
	storeIdleTimeout    = 3 * time.Second
)

// s3Storage returns a read-through cache, in a fresh directory of its own, over the server's
// bucket: what a gateway replica configured with the s3 dataset store runs on.
func s3Storage(t *testing.T, srv *s3test.Server) *objectstore.Cache {
	t.Helper()
	st, err := objectstore.New(objectstore.Config{Endpoint: srv.Endpoint(), Bucket: srv.Bucket(), Region: srv.Region(),
		PathStyle: true, AccessKeyID: srv.AccessKeyID(), SecretAccessKey: srv.SecretAccessKey(),
		RequestTimeout: storeRequestTimeout, TransferIdleTimeout: storeIdleTimeout})
	if err != nil {
		t.Fatal(err)
	}
	c, err := objectstore.NewCache(st, objectstore.CacheOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chat sends a small chat completion with key and returns its status.
func chat(t *testing.T, g *apitest.Gateway, key string) int {
	t.Helper()
	req, err := http.NewRequest("POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"service-flint","max_tokens":20,"messages":[{"role":"user","content":"hello [[sim words=5]]"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// TestDatasetUploadedOnOneGatewayQueriedOnAnother uploads a dataset through one gateway's
// dataset service (what the web console's upload and `tollgate admin dataset put` call) into
// an S3-compatible store, and queries it through the MCP tools of a second gateway instance on
// the same database, whose cache directory starts empty: the second reads it from the store.
// With each replica on its own local directory (today's default) the second would answer
// "not owned".
func TestDatasetUploadedOnOneGatewayQueriedOnAnother(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	srv := s3test.Start(t, s3test.Options{})
	g1 := apitest.Start(t, apitest.Options{DatasetStorage: s3Storage(t, srv)})
	cache2 := s3Storage(t, srv)
	g2 := apitest.Start(t, apitest.Options{ConnString: g1.ConnString, DatasetStorage: cache2})
	alpha := g1.NewTenant(t, "alpha", 0, 0)
	beta := g1.NewTenant(t, "beta", 0, 0)

	if _, err := g1.Datasets.Put(ctx, alpha.Account.ID, "sales", dataset.CSV,
		strings.NewReader("region,amount\nnorth,10\nsouth,25\nnorth,7\n")); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ctx, g2, alpha.Key)
	text, isErr := call(t, ctx, cs, "list_storage_datasets", map[string]any{})
	if isErr || !strings.Contains(text, `"name":"sales"`) {
		t.Fatalf("list_storage_datasets on the second gateway: %v %s", isErr, text)
	}
	if text, isErr := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": "sales"}); isErr {
		t.Fatalf("load on the second gateway: %s", text)
	}
	text, isErr = call(t, ctx, cs, "query_data", map[string]any{"dataset": "sales",
		"sql": "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY region"})
	if isErr || !strings.Contains(text, "north") || !strings.Contains(text, "17") || !strings.Contains(text, "25") {
		t.Fatalf("query on the second gateway: %v %s", isErr, text)
	}
	if files, _ := filepath.Glob(filepath.Join(cache2.Dir(), "obj-*")); len(files) != 1 {
		t.Fatalf("the second gateway's cache holds %v, want the one dataset it read", files)
	}

	// The other tenant sees nothing of it through either gateway.
	other := connect(t, ctx, g2, beta.Key)
	if text, isErr := call(t, ctx, other, "load_storage_dataset", map[string]any{"name": fullName(alpha, "sales")}); !isErr ||
		!strings.Contains(text, "is not owned by the caller") {
		t.Fatalf("another tenant loading it: %v %s", isErr, text)
	}

	// A replacement through the first gateway is what the second reads after loading again.
	if _, err := g1.Datasets.Put(ctx, alpha.Account.ID, "sales", dataset.CSV, strings.NewReader("region,amount\neast,99\n")); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": "sales"}); isErr {
		t.Fatalf("reload on the second gateway: %s", text)
	}
	text, isErr = call(t, ctx, cs, "query_data", map[string]any{"dataset": "sales", "sql": "SELECT region, amount FROM sales"})
	if isErr || !strings.Contains(text, "east") || strings.Contains(text, "north") {
		t.Fatalf("query after the replacement: %v %s", isErr, text)
	}
}

// TestDatasetToolsAnswerStoreOutage stops the object store in the middle of a gateway's life:
// frozen (it accepts connections and never answers) and then killed, the dataset tools that
// need it answer a tool error naming the dataset store within its bounds, never hang, while
// inference on the same gateway keeps serving; once the store is back, the same calls work.
func TestDatasetToolsAnswerStoreOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	srv := s3test.Start(t, s3test.Options{})
	g := apitest.Start(t, apitest.Options{DatasetStorage: s3Storage(t, srv)})
	alpha := g.NewTenant(t, "alpha", 0, 10_000_000) // $10 of credit for the inference beside
	if _, err := g.Datasets.Put(ctx, alpha.Account.ID, "sales", dataset.CSV, strings.NewReader("region,amount\nnorth,10\n")); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, ctx, g, alpha.Key)
	// A second gateway on the same database has not materialized the load: its query needs
	// the store.
	g2 := apitest.Start(t, apitest.Options{ConnString: g.ConnString, DatasetStorage: s3Storage(t, srv)})
	cs2 := connect(t, ctx, g2, alpha.Key)
	if text, isErr := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": "sales"}); isErr {
		t.Fatalf("load: %s", text)
	}

	// Worst case of one call: a stat, then a download that stalls (each retried once by the
	// client), well under the tools' own timeouts.
	bound := 2*storeRequestTimeout + storeIdleTimeout + 3*time.Second
	outage := func(phase string) {
		t.Helper()
		for _, c := range []struct {
			cs   *sdk.ClientSession
			tool string
			args map[string]any
		}{
			{cs, "list_storage_datasets", map[string]any{}},
			{cs, "load_storage_dataset", map[string]any{"name": "sales"}},
			{cs2, "query_data", map[string]any{"dataset": "sales", "sql": "SELECT count(*) FROM sales"}},
		} {
			inference := make(chan int, 1)
			go func() { inference <- chat(t, g, alpha.Key) }()
			start := time.Now()
			text, isErr := call(t, ctx, c.cs, c.tool, c.args)
			took := time.Since(start)
			if !isErr || !strings.Contains(text, "dataset store is unavailable") {
				t.Fatalf("%s: %s answered %v %q, want a tool error naming the dataset store", phase, c.tool, isErr, text)
			}
			if took > bound {
				t.Fatalf("%s: %s took %s, bound %s", phase, c.tool, took, bound)
			}
			select {
			case status := <-inference:
				if status != http.StatusOK {
					t.Fatalf("%s: inference during the outage answered %d", phase, status)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: inference waits on the dataset store", phase)
			}
		}
	}
	srv.Freeze()
	outage("frozen store")
	srv.Thaw()
	srv.Stop()
	outage("stopped store")
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, ctx, cs, "load_storage_dataset", map[string]any{"name": "sales"}); isErr {
		t.Fatalf("load after the store is back: %s", text)
	}
	if text, isErr := call(t, ctx, cs2, "query_data", map[string]any{"dataset": "sales", "sql": "SELECT sum(amount) AS s FROM sales"}); isErr ||
		!strings.Contains(text, "10") {
		t.Fatalf("query after the store is back: %v %s", isErr, text)
	}
}
