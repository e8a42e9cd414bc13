package objectstore

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/impl/dataset"
)

// DefaultCacheMaxBytes bounds the local cache when CacheOptions leaves it unset (10 GiB).
const DefaultCacheMaxBytes = 10 << 30

// The cache directory's file names: objects and downloads in progress. Only such files are
// removed when a Cache starts, so a cache directory shared by mistake loses nothing else.
const (
	cachedPrefix  = "obj-"
	partialPrefix = "part-"
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Dir is the cache directory, which belongs to one process (required).
	Dir string
	// MaxBytes bounds the bytes of the cached files (default DefaultCacheMaxBytes). Files
	// under a lease are never evicted, so the bound can be exceeded while they are held.
	MaxBytes int64
	// Logger receives the cache's log lines (default: slog.Default()).
	Logger *slog.Logger
}

// Cache is a read-through local cache in front of a Store: a dataset.LeasingStorage whose
// LeasePath downloads the object to the cache directory on first use and checks the object's
// ETag with the store on every use, so that an object replaced through another replica is
// fetched again. The least recently used files are evicted beyond the size bound, never one
// under a lease, and concurrent first reads of one object download it once. Writes, lists
// and deletes go to the store. Create it with NewCache; it is safe for concurrent use.
type Cache struct {
	store    *Store
	dir      string
	maxBytes int64
	log      *slog.Logger

	mu       sync.Mutex
	entries  map[string]*cached // by key
	lru      *list.List         // of *cached, most recently used first
	used     int64
	inflight map[string]*fetch // by key and ETag

	// downloads counts the downloads done, for the tests.
	downloads atomic.Int64
}

var _ dataset.LeasingStorage = (*Cache)(nil)

// cached is one object's file in the cache.
type cached struct {
	key, etag, path string
	size            int64
	refs            int
	gone            bool // out of the index: its file is removed when the last lease ends
	elem            *list.Element
}

// fetch is a download in progress, which concurrent first readers wait for.
type fetch struct {
	done chan struct{}
	err  error
}

// NewCache returns a cache over store in opts.Dir, creating the directory and removing the
// files an earlier process left there.
func NewCache(store *Store, opts CacheOptions) (*Cache, error) {
	if opts.Dir == "" {
		return nil, errors.New("object store cache: a directory is required")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultCacheMaxBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("object store cache: %w", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("object store cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("object store cache: %w", err)
	}
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && (strings.HasPrefix(n, cachedPrefix) || strings.HasPrefix(n, partialPrefix)) {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	return &Cache{store: store, dir: dir, maxBytes: opts.MaxBytes, log: opts.Logger,
		entries: map[string]*cached{}, lru: list.New(), inflight: map[string]*fetch{}}, nil
}

// Store returns the store behind the cache.
func (c *Cache) Store() *Store { return c.store }

// Dir returns the absolute path of the cache directory.
func (c *Cache) Dir() string { return c.dir }

// List lists the store.
func (c *Cache) List(ctx context.Context, prefix string) ([]dataset.Object, error) {
	return c.store.List(ctx, prefix)
}

// Open opens the object in the store.
func (c *Cache) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return c.store.Open(ctx, key)
}

// Stat describes the object in the store.
func (c *Cache) Stat(ctx context.Context, key string) (dataset.Object, error) {
	return c.store.Stat(ctx, key)
}

// Put stores the object and drops this process's copy of the old one.
func (c *Cache) Put(ctx context.Context, key string, r io.Reader) error {
	err := c.store.Put(ctx, key, r)
	c.drop(key)
	return err
}

// Delete removes the object from the store and drops this process's copy.
func (c *Cache) Delete(ctx context.Context, key string) error {
	err := c.store.Delete(ctx, key)
	c.drop(key)
	return err
}

// LocalPath returns the path of an up-to-date local copy of the object. The file stays until
// it is evicted; a reader that opens it later should hold a lease (LeasePath) instead.
func (c *Cache) LocalPath(ctx context.Context, key string) (string, error) {
	p, release, err := c.LeasePath(ctx, key)
	if err != nil {
		return "", err
	}
	release()
	return p, nil
}

// LeasePath returns the path of an up-to-date local copy of the object, checked against the
// object's ETag in the store, and a function that ends the lease; until then the file is
// neither evicted nor replaced.
func (c *Cache) LeasePath(ctx context.Context, key string) (string, func(), error) {
	for attempt := 0; ; attempt++ {
		info, err := c.store.stat(ctx, key)
		if err != nil {
			return "", nil, err
		}
		p, release, err := c.lease(ctx, key, info.ETag, info.Size)
		if errors.Is(err, errChanged) && attempt < 2 {
			continue // replaced between the stat and the download: look again
		}
		return p, release, err
	}
}

// lease returns a lease on the cached copy of key at etag, downloading it (once, whoever
// asks meanwhile) when the cache does not hold it.
func (c *Cache) lease(ctx context.Context, key, etag string, size int64) (string, func(), error) {
	fk := key + "\x00" + etag
	c.mu.Lock()
	for {
		if e := c.entries[key]; e != nil && e.etag == etag {
			e.refs++
			c.lru.MoveToFront(e.elem)
			c.mu.Unlock()
			return e.path, c.releaser(e), nil
		}
		f := c.inflight[fk]
		if f == nil {
			break
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
		if f.err != nil && !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, context.DeadlineExceeded) {
			return "", nil, f.err
		}
		c.mu.Lock()
	}
	f := &fetch{done: make(chan struct{})}
	c.inflight[fk] = f
	c.mu.Unlock()

	p, n, err := c.download(ctx, key, etag, size)

	c.mu.Lock()
	delete(c.inflight, fk)
	f.err = err
	close(f.done)
	if err != nil {
		c.mu.Unlock()
		return "", nil, err
	}
	e := &cached{key: key, etag: etag, path: p, size: n, refs: 1}
	if old := c.entries[key]; old != nil {
		c.removeLocked(old)
	}
	c.entries[key] = e
	e.elem = c.lru.PushFront(e)
	c.used += n
	c.evictLocked()
	c.mu.Unlock()
	return p, c.releaser(e), nil
}

// releaser returns the function that ends one lease on e; calling it again does nothing.
func (c *Cache) releaser(e *cached) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			e.refs--
			if e.gone && e.refs == 0 {
				_ = os.Remove(e.path)
				return
			}
			c.evictLocked()
		})
	}
}

// download copies the object at etag to a new file in the cache directory and returns its path
// and size. A copy that is cut short is removed.
func (c *Cache) download(ctx context.Context, key, etag string, size int64) (string, int64, error) {
	body, _, err := c.store.get(ctx, key, etag)
	if err != nil {
		return "", 0, err
	}
	defer body.Close()
	c.downloads.Add(1)
	name := fileName(key)
	tmp, err := os.CreateTemp(c.dir, partialPrefix+"*")
	if err != nil {
		return "", 0, fmt.Errorf("object store cache: %w", err)
	}
	n, err := io.Copy(tmp, body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = c.store.unavailable("read", key, fmt.Errorf("got %d of %d bytes", n, size))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", 0, err
	}
	final := filepath.Join(c.dir, name)
	if err := os.Rename(tmp.Name(), final); err != nil {
		_ = os.Remove(tmp.Name())
		return "", 0, fmt.Errorf("object store cache: %w", err)
	}
	return final, n, nil
}

// fileName returns a new file name for a copy of key: the key's hash, a random part (an old
// copy of the same key may still be held), and the key's extension, which the query engine
// may read the format from.
func fileName(key string) string {
	h := sha256.Sum256([]byte(key))
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	ext := path.Ext(key)
	if len(ext) > 10 || strings.ContainsFunc(ext[min(len(ext), 1):], func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		ext = ""
	}
	return cachedPrefix + hex.EncodeToString(h[:12]) + "-" + hex.EncodeToString(rnd[:]) + ext
}

// drop forgets this process's copy of key (a write or delete made it stale).
func (c *Cache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil {
		c.removeLocked(e)
	}
}

// removeLocked takes e out of the index and removes its file, at once when no lease holds it,
// else when the last lease ends.
func (c *Cache) removeLocked(e *cached) {
	if e.gone {
		return
	}
	e.gone = true
	delete(c.entries, e.key)
	c.lru.Remove(e.elem)
	c.used -= e.size
	if e.refs == 0 {
		_ = os.Remove(e.path)
	}
}

// evictLocked evicts the least recently used files without a lease until the cache is within
// its bound.
func (c *Cache) evictLocked() {
	for el := c.lru.Back(); el != nil && c.used > c.maxBytes; {
		e := el.Value.(*cached)
		el = el.Prev()
		if e.refs > 0 {
			continue
		}
		c.log.Info("dataset cache file evicted", "key", e.key, "bytes", e.size)
		c.removeLocked(e)
	}
}

// Usage returns the bytes of the cached files and how many there are.
func (c *Cache) Usage() (bytes int64, files int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.lru.Len()
}
