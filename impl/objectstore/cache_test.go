package objectstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/s3test"
)

// TestCacheRevalidatesByETag has two replicas, each with its own store client and cache, on
// one bucket: an object replaced through one is fetched again by the other at its next use,
// and an unchanged object is not downloaded twice.
func TestCacheRevalidatesByETag(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	one := newCache(t, newStore(t, srv, nil), 0)
	two := newCache(t, newStore(t, srv, nil), 0)
	const key = "tenant/a/sales.csv"

	if err := one.Put(ctx, key, strings.NewReader("v1\n")); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		t.Helper()
		p, release, err := two.LeasePath(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != "v1\n" {
		t.Fatalf("first read %q", got)
	}
	if got := read(); got != "v1\n" || two.downloads.Load() != 1 {
		t.Fatalf("second read %q after %d downloads, want v1 from the cache", got, two.downloads.Load())
	}
	if err := one.Put(ctx, key, strings.NewReader("version two\n")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "version two\n" || two.downloads.Load() != 2 {
		t.Fatalf("after the other replica replaced it: %q after %d downloads, want the new object", got, two.downloads.Load())
	}
	if n, files := two.Usage(); n != int64(len("version two\n")) || files != 1 {
		t.Fatalf("cache holds %d bytes in %d files, want only the new copy", n, files)
	}
	if err := one.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := two.LocalPath(ctx, key); err == nil {
		t.Fatal("a deleted object is still served from the other replica's cache")
	}
}

// TestCacheEvictsLeastRecentlyUsedWithinBound reads more objects than the bound holds: the
// cache stays within it by dropping the least recently used files, but never a file under a
// lease.
func TestCacheEvictsLeastRecentlyUsedWithinBound(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	c := newCache(t, newStore(t, srv, nil), 3000)
	key := func(i int) string { return fmt.Sprintf("tenant/a/d%d.csv", i) }
	for i := range 6 {
		if err := c.Put(ctx, key(i), bytes.NewReader(randomBytes(1000))); err != nil {
			t.Fatal(err)
		}
	}
	held, release, err := c.LeasePath(ctx, key(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 6; i++ {
		if _, err := c.LocalPath(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Usage(); n > 3000 {
			t.Fatalf("after %d reads the cache holds %d bytes, bound 3000", i+1, n)
		}
		if _, err := os.Stat(held); err != nil {
			t.Fatalf("the leased file was evicted: %v", err)
		}
	}
	release()
	// Within the bound again: the three most recently used (d0 was held, then d4, d5).
	n, files := c.Usage()
	onDisk, _ := filepath.Glob(filepath.Join(c.Dir(), "obj-*"))
	if n > 3000 || files != 3 || len(onDisk) != 3 {
		t.Fatalf("after the release: %d bytes in %d files, %d on disk; want 3 within 3000", n, files, len(onDisk))
	}
	// Reading another evicts the least recently used, d0, now that no lease holds it.
	if _, err := c.LocalPath(ctx, key(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(held); err == nil {
		t.Fatal("the least recently used file survived beyond the bound once its lease ended")
	}
	// The most recently used survive: reading them again downloads nothing.
	before := c.downloads.Load()
	for _, i := range []int{1, 4, 5} {
		if _, err := c.LocalPath(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c.downloads.Load() != before {
		t.Fatalf("the three most recent objects were downloaded again")
	}
}

// TestCacheConcurrentFirstReadsDownloadOnce has many readers ask for one object at once: it
// is downloaded once, and all of them read the same file.
func TestCacheConcurrentFirstReadsDownloadOnce(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	c := newCache(t, newStore(t, srv, nil), 0)
	const key = "tenant/a/big.parquet"
	data := randomBytes(8 << 20)
	if err := c.Put(ctx, key, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	paths := make([]string, 16)
	errs := make([]error, 16)
	releases := make([]func(), 16)
	for i := range paths {
		wg.Go(func() { paths[i], releases[i], errs[i] = c.LeasePath(ctx, key) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if paths[i] != paths[0] {
			t.Fatalf("readers got different files: %s and %s", paths[0], paths[i])
		}
		releases[i]()
	}
	if n := c.downloads.Load(); n != 1 {
		t.Fatalf("%d downloads for 16 concurrent first reads, want 1", n)
	}
	if b, err := os.ReadFile(paths[0]); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("cached copy: %d bytes, %v", len(b), err)
	}
	if !strings.HasSuffix(paths[0], ".parquet") {
		t.Fatalf("cached file %s lost the key's extension", paths[0])
	}
}
