package objectstore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/s3test"
)

// newStore returns a Store on the server's bucket with cfg's changes applied.
func newStore(t *testing.T, srv *s3test.Server, change func(*Config)) *Store {
	t.Helper()
	// Short bounds, as outage tests want them.
	cfg := Config{Endpoint: srv.Endpoint(), Bucket: srv.Bucket(), Region: srv.Region(), PathStyle: true,
		AccessKeyID: srv.AccessKeyID(), SecretAccessKey: srv.SecretAccessKey(),
		RequestTimeout: 2 * time.Second, TransferIdleTimeout: 3 * time.Second}
	if change != nil {
		change(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newCache(t *testing.T, s *Store, maxBytes int64) *Cache {
	t.Helper()
	c, err := NewCache(s, CacheOptions{Dir: t.TempDir(), MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func readAll(t *testing.T, st dataset.Storage, key string) []byte {
	t.Helper()
	rc, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

// TestRoundTripListStatDelete stores, lists, describes, reads and deletes objects in a real
// S3-compatible server, with a key prefix that keeps them apart from the rest of the bucket.
func TestRoundTripListStatDelete(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	s := newStore(t, srv, func(c *Config) { c.Prefix = "deploy-a" })
	other := newStore(t, srv, func(c *Config) { c.Prefix = "deploy-b" })

	want := map[string][]byte{
		"tenant/a/sales.csv":    []byte("region,amount\nnorth,10\n"),
		"tenant/a/events.jsonl": []byte(`{"x":1}` + "\n"),
		"tenant/ab/other.csv":   []byte("x\n1\n"),
		"tenant/b/sales.csv":    randomBytes(70_000),
	}
	for k, v := range want {
		if err := s.Put(ctx, k, bytes.NewReader(v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	if err := other.Put(ctx, "tenant/a/sales.csv", strings.NewReader("not the same deployment")); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got := readAll(t, s, k); !bytes.Equal(got, v) {
			t.Fatalf("%s: read %d bytes, want the %d stored", k, len(got), len(v))
		}
		obj, err := s.Stat(ctx, k)
		if err != nil || obj.Key != k || obj.Size != int64(len(v)) || time.Since(obj.Updated) > time.Hour {
			t.Fatalf("stat %s = %+v, %v", k, obj, err)
		}
	}
	list, err := s.List(ctx, "tenant/a/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list {
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, " ") != "tenant/a/events.jsonl tenant/a/sales.csv" {
		t.Fatalf("list tenant/a/ = %v", keys)
	}
	// The prefix is in the bucket, not in the keys.
	cl, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.StatObject(ctx, srv.Bucket(), "deploy-a/tenant/a/sales.csv", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("the object is not under the prefix in the bucket: %v", err)
	}
	if got := readAll(t, other, "tenant/a/sales.csv"); string(got) != "not the same deployment" {
		t.Fatalf("the other prefix reads %q", got)
	}

	if err := s.Delete(ctx, "tenant/a/sales.csv"); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func() error{
		func() error { return s.Delete(ctx, "tenant/a/sales.csv") },
		func() error { _, err := s.Stat(ctx, "tenant/a/sales.csv"); return err },
		func() error { _, err := s.Open(ctx, "tenant/a/sales.csv"); return err },
	} {
		if err := op(); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after delete: %v, want fs.ErrNotExist", err)
		}
	}
	for _, bad := range []string{"", "../x", "a//b", "a/./b", `a\b`} {
		if err := s.Put(ctx, bad, strings.NewReader("x")); !errors.Is(err, fs.ErrInvalid) {
			t.Fatalf("put %q: %v, want fs.ErrInvalid", bad, err)
		}
	}
}

// gatedReader yields data, pausing once after the first pauseAt bytes until gate is closed.
type gatedReader struct {
	data    []byte
	off     int
	pauseAt int
	reached chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func newGatedReader(data []byte, pauseAt int) *gatedReader {
	return &gatedReader{data: data, pauseAt: pauseAt, reached: make(chan struct{}), gate: make(chan struct{})}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.off >= g.pauseAt {
		g.once.Do(func() { close(g.reached) })
		<-g.gate
	}
	if g.off >= len(g.data) {
		return 0, io.EOF
	}
	end := len(g.data)
	if g.off < g.pauseAt {
		end = g.pauseAt
	}
	n := copy(p, g.data[g.off:end])
	g.off += n
	return n, nil
}

// TestMultipartPutIsInvisibleUntilComplete uploads an object of three parts whose source
// pauses after the first: meanwhile the old object is what readers see, whole, and the new
// one replaces it only when the upload completes.
func TestMultipartPutIsInvisibleUntilComplete(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	s := newStore(t, srv, func(c *Config) { c.PartSize = minPartSize })
	const key = "tenant/a/big.csv"
	old := []byte("the old object")
	if err := s.Put(ctx, key, bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}
	data := randomBytes(2*minPartSize + 1000)
	src := newGatedReader(data, minPartSize+100)
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, key, src) }()
	<-src.reached
	time.Sleep(300 * time.Millisecond) // the first part is on its way or stored
	if got := readAll(t, s, key); !bytes.Equal(got, old) {
		t.Fatalf("during the upload the object reads %d bytes, want the old %d", len(got), len(old))
	}
	close(src.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, key); !bytes.Equal(got, data) {
		t.Fatalf("after the upload the object reads %d bytes, want %d", len(got), len(data))
	}
}

// TestStoreStoppedMidUpload kills the store while a multipart upload waits for its source, and
// while a single PUT is sent: each upload fails within its bounds with the store named, the
// object stays the old one, whole, after the store is back, nothing new is listed, and a
// retry succeeds.
func TestStoreStoppedMidUpload(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	s := newStore(t, srv, func(c *Config) { c.PartSize = minPartSize })
	const key = "tenant/a/sales.csv"
	old := []byte("region,amount\nnorth,10\n")
	if err := s.Put(ctx, key, bytes.NewReader(old)); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		size    int
		pauseAt int
	}{
		{"multipart", 3 * minPartSize, minPartSize + 10},
		{"single PUT", minPartSize / 2, minPartSize / 4},
	} {
		data := randomBytes(tc.size)
		src := newGatedReader(data, tc.pauseAt)
		done := make(chan error, 1)
		go func() { done <- s.Put(ctx, key, src) }()
		<-src.reached
		time.Sleep(200 * time.Millisecond)
		srv.Stop()
		close(src.gate)
		start := time.Now()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the upload hangs after the store stopped", tc.name)
		}
		if !errors.Is(err, dataset.ErrStoreUnavailable) {
			t.Fatalf("%s: upload with the store stopped: %v, want the store unavailable", tc.name, err)
		}
		if msg, ok := dataset.CallerMessage(err); !ok || !strings.Contains(msg, "dataset store is unavailable") {
			t.Fatalf("%s: caller message %q, %v", tc.name, msg, ok)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s: the failure took %s", tc.name, d)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, s, key); !bytes.Equal(got, old) {
			t.Fatalf("%s: after the failed upload the object reads %d bytes, want the old %d", tc.name, len(got), len(old))
		}
		list, err := s.List(ctx, "tenant/")
		if err != nil || len(list) != 1 || list[0].Size != int64(len(old)) {
			t.Fatalf("%s: list after the failed upload = %+v, %v", tc.name, list, err)
		}
		if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatalf("%s: retry: %v", tc.name, err)
		}
		if got := readAll(t, s, key); !bytes.Equal(got, data) {
			t.Fatalf("%s: after the retry the object reads %d bytes, want %d", tc.name, len(got), len(data))
		}
		old = data
	}
}

// TestFrozenStoreFailsWithinBounds freezes the store (it accepts connections and never
// answers): a read and a download into the cache cut off mid-transfer, and then every kind of
// call, fail as the store being unavailable within their bounds instead of hanging; the cut-off
// download leaves no file in the cache, and all works again once the store thaws.
func TestFrozenStoreFailsWithinBounds(t *testing.T) {
	srv := s3test.Start(t, s3test.Options{})
	ctx := t.Context()
	s := newStore(t, srv, nil)
	cfg := s.Config()
	const key = "tenant/a/sales.csv"
	big := randomBytes(48 << 20)
	if err := s.Put(ctx, key, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}

	// A download in progress: the first bytes arrive, then the store freezes.
	rc, err := s.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	t.Cleanup(srv.Thaw)
	start := time.Now()
	_, err = io.Copy(io.Discard, rc)
	rc.Close()
	if !errors.Is(err, dataset.ErrStoreUnavailable) {
		t.Fatalf("download from a frozen store: %v, want the store unavailable", err)
	}
	if d := time.Since(start); d > cfg.TransferIdleTimeout+5*time.Second {
		t.Fatalf("the stalled download failed after %s, bound %s", d, cfg.TransferIdleTimeout)
	}

	srv.Thaw()

	// A download into the cache in progress: the store freezes once the partial file has
	// bytes. The load fails within the bound and leaves no file behind.
	cache := newCache(t, s, 0)
	for attempt := 0; ; attempt++ {
		done := make(chan error, 1)
		go func() {
			_, release, err := cache.LeasePath(ctx, key)
			if err == nil {
				release()
			}
			done <- err
		}()
		for !partialFileHasBytes(cache.Dir()) {
			select {
			case err := <-done:
				done <- err
			default:
				time.Sleep(time.Millisecond)
				continue
			}
			break
		}
		srv.Freeze()
		start := time.Now()
		err := <-done
		if err == nil && attempt < 3 {
			// The download was done before the freeze: try again with the copy dropped.
			srv.Thaw()
			cache.drop(key)
			continue
		}
		if !errors.Is(err, dataset.ErrStoreUnavailable) {
			t.Fatalf("cache download from a store frozen mid-transfer: %v, want the store unavailable", err)
		}
		if d := time.Since(start); d > cfg.TransferIdleTimeout+5*time.Second {
			t.Fatalf("the stalled cache download failed after %s, bound %s", d, cfg.TransferIdleTimeout)
		}
		if files, _ := filepath.Glob(filepath.Join(cache.Dir(), "*")); len(files) != 0 {
			t.Fatalf("a cut-off download left %v in the cache", files)
		}
		break
	}

	for name, op := range map[string]func() error{
		"stat":  func() error { _, err := s.Stat(ctx, key); return err },
		"list":  func() error { _, err := s.List(ctx, "tenant/"); return err },
		"open":  func() error { _, err := s.Open(ctx, key); return err },
		"put":   func() error { return s.Put(ctx, "tenant/a/new.csv", strings.NewReader("x\n")) },
		"lease": func() error { _, _, err := cache.LeasePath(ctx, key); return err },
	} {
		start := time.Now()
		err := op()
		if !errors.Is(err, dataset.ErrStoreUnavailable) {
			t.Fatalf("%s on a frozen store: %v, want the store unavailable", name, err)
		}
		if d := time.Since(start); d > cfg.RequestTimeout+cfg.TransferIdleTimeout+2*time.Second {
			t.Fatalf("%s on a frozen store failed after %s", name, d)
		}
	}
	srv.Thaw()
	p, release, err := cache.LeasePath(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("cached copy after the thaw: %d bytes, %v", len(b), err)
	}
	files, _ := filepath.Glob(filepath.Join(cache.Dir(), "*"))
	if len(files) != 1 {
		t.Fatalf("cache directory holds %v, want only the one complete copy", files)
	}
}

// partialFileHasBytes reports whether a download in progress in the cache directory has
// written anything yet.
func partialFileHasBytes(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, partialPrefix+"*"))
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && info.Size() > 0 {
			return true
		}
	}
	return false
}
