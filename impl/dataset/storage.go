package dataset

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Object describes one stored object.
type Object struct {
	// Key is the object's '/'-separated key, e.g. "tenant/<account>/sales.csv".
	Key     string
	Size    int64
	Updated time.Time
}

// Storage is where dataset files live: a flat key space of '/'-separated keys, as in an
// S3-compatible object store. A missing key is reported as an error matching fs.ErrNotExist.
// Implementations must be safe for concurrent use and must refuse keys that are not
// well-formed (see ValidKey).
type Storage interface {
	// List returns every object whose key starts with prefix, ordered by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Open opens the object for reading.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Put stores the whole of r under key, replacing any object there atomically.
	Put(ctx context.Context, key string, r io.Reader) error
	// Delete removes the object.
	Delete(ctx context.Context, key string) error
	// Stat describes the object.
	Stat(ctx context.Context, key string) (Object, error)
}

// LocalStorage is a Storage whose objects are files on the local file system that the query
// engine can read in place. A Storage that is not a LocalStorage has each object copied to a
// temporary file for loading.
type LocalStorage interface {
	Storage
	// LocalPath returns the absolute path of the object's file.
	LocalPath(ctx context.Context, key string) (string, error)
}

// LeasingStorage is a LocalStorage whose local files may go away once nobody holds them, such as
// a read-through cache of an object store that evicts the least recently used files. LocalPath
// of such a storage returns a path that stays valid only until the file is evicted; a reader
// that opens the file later holds a lease instead, which keeps it in place until released.
type LeasingStorage interface {
	LocalStorage
	// LeasePath returns the absolute path of an up-to-date local copy of the object and a
	// function that gives the lease back. The file is neither evicted nor replaced before
	// release is called; release may be called more than once.
	LeasePath(ctx context.Context, key string) (path string, release func(), err error)
}

// ValidKey reports whether key is a well-formed storage key: non-empty, valid UTF-8,
// '/'-separated segments that are neither empty, "." nor "..", and no backslash, NUL or other
// control character.
func ValidKey(key string) bool {
	if key == "" || len(key) > 1024 || !utf8.ValidString(key) {
		return false
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return false
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// DirStorage is a Storage in a local directory: key a/b/c is the file a/b/c under the root.
// All access goes through an os.Root, so no key, symbolic link or race can reach outside the
// root.
type DirStorage struct {
	dir  string
	root *os.Root
}

var _ LocalStorage = (*DirStorage)(nil)

// NewDirStorage opens (creating it if needed) the directory dir as a storage root.
func NewDirStorage(dir string) (*DirStorage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dataset storage: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset storage: %w", err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("dataset storage: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("dataset storage: %w", err)
	}
	return &DirStorage{dir: abs, root: root}, nil
}

// Dir returns the absolute path of the root directory.
func (d *DirStorage) Dir() string { return d.dir }

// Close releases the root directory.
func (d *DirStorage) Close() error { return d.root.Close() }

func badKey(key string) error {
	return &fs.PathError{Op: "storage", Path: key, Err: fs.ErrInvalid}
}

// List returns every regular file whose key starts with prefix, ordered by key. Files whose
// names start with '.' (uploads in progress) are skipped.
func (d *DirStorage) List(ctx context.Context, prefix string) ([]Object, error) {
	// Walk the deepest directory that the prefix names completely.
	dir := "."
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		dir = prefix[:i]
		if !ValidKey(dir) {
			return nil, badKey(prefix)
		}
	}
	var out []Object
	err := fs.WalkDir(d.root.FS(), dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != dir {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(p, prefix) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		out = append(out, Object{Key: p, Size: info.Size(), Updated: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Open opens the object's file for reading.
func (d *DirStorage) Open(_ context.Context, key string) (io.ReadCloser, error) {
	if _, err := d.stat(key); err != nil {
		return nil, err
	}
	return d.root.Open(key)
}

// Put writes r to a temporary file beside the key's file and renames it into place.
func (d *DirStorage) Put(_ context.Context, key string, r io.Reader) (err error) {
	if !ValidKey(key) {
		return badKey(key)
	}
	if dir := path.Dir(key); dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(key), ".put-"+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = d.root.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return d.root.Rename(tmp, key)
}

// Delete removes the object's file.
func (d *DirStorage) Delete(_ context.Context, key string) error {
	if _, err := d.stat(key); err != nil {
		return err
	}
	return d.root.Remove(key)
}

// Stat describes the object's file.
func (d *DirStorage) Stat(_ context.Context, key string) (Object, error) {
	info, err := d.stat(key)
	if err != nil {
		return Object{}, err
	}
	return Object{Key: key, Size: info.Size(), Updated: info.ModTime()}, nil
}

// stat returns the file's information when key is valid and names a regular file (not a
// symbolic link, not a directory).
func (d *DirStorage) stat(key string) (fs.FileInfo, error) {
	if !ValidKey(key) {
		return nil, badKey(key)
	}
	info, err := d.root.Lstat(key)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "stat", Path: key, Err: fs.ErrNotExist}
	}
	return info, nil
}

// LocalPath returns the absolute path of the object's file. It refuses a file whose real
// path is not under the root (a directory on the way replaced by a symbolic link).
func (d *DirStorage) LocalPath(_ context.Context, key string) (string, error) {
	if _, err := d.stat(key); err != nil {
		return "", err
	}
	p := filepath.Join(d.dir, filepath.FromSlash(key))
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if rel, err := filepath.Rel(d.dir, real); err != nil || !filepath.IsLocal(rel) {
		return "", &fs.PathError{Op: "stat", Path: key, Err: fs.ErrNotExist}
	}
	return real, nil
}
