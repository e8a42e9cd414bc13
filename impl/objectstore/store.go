package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tollgate/tollgate/impl/dataset"
)

// The defaults of Config's bounds.
const (
	// DefaultRequestTimeout bounds one request to the store (stat, list, delete, the head of
	// a read or the answer to a write).
	DefaultRequestTimeout = 5 * time.Second
	// DefaultTransferIdleTimeout bounds how long a transfer may make no progress.
	DefaultTransferIdleTimeout = 20 * time.Second
	// DefaultPartSize is the part size of multipart uploads; an object of up to one part is
	// stored with a single PUT.
	DefaultPartSize = 16 << 20
	// minPartSize is the smallest part S3 accepts (but for the last).
	minPartSize = 5 << 20
)

// Config names a bucket of an S3-compatible store and the bounds on the calls to it.
type Config struct {
	// Endpoint is the store's URL, e.g. https://s3.eu-west-1.amazonaws.com,
	// https://<account>.r2.cloudflarestorage.com, https://storage.googleapis.com or
	// http://127.0.0.1:8333 (a bare host[:port] means https). Empty: AWS S3 in Region.
	Endpoint string
	// Bucket is the bucket's name (required).
	Bucket string
	// Region is the bucket's region (e.g. us-east-1; R2 takes "auto"). Empty: discovered
	// from the store.
	Region string
	// Prefix, when set, is put before every key (as Prefix + "/" + key), so that several
	// deployments can share a bucket.
	Prefix string
	// PathStyle addresses the bucket as endpoint/bucket/key rather than bucket.endpoint/key
	// (MinIO and SeaweedFS need it; AWS, R2 and GCS take either).
	PathStyle bool
	// AccessKeyID, SecretAccessKey and SessionToken are the credentials. Empty: the standard
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the AWS
	// shared credentials file, then the instance's or container's role.
	AccessKeyID, SecretAccessKey, SessionToken string
	// RequestTimeout bounds each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// TransferIdleTimeout bounds how long an upload or download may make no progress
	// (default DefaultTransferIdleTimeout).
	TransferIdleTimeout time.Duration
	// PartSize is the multipart upload's part size (default DefaultPartSize, at least 5 MiB).
	PartSize int64
	// Logger receives a warning for each call that finds the store unavailable, with the
	// underlying error that callers are not shown (default: slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.TransferIdleTimeout <= 0 {
		c.TransferIdleTimeout = DefaultTransferIdleTimeout
	}
	if c.PartSize <= 0 {
		c.PartSize = DefaultPartSize
	}
	c.PartSize = max(c.PartSize, minPartSize)
	c.Prefix = strings.Trim(c.Prefix, "/")
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Store is a dataset.Storage over one bucket of an S3-compatible object store. Create it with
// New; it is safe for concurrent use.
type Store struct {
	cfg    Config
	client *minio.Client
}

var _ dataset.Storage = (*Store)(nil)

// New returns a Store for cfg. It does not contact the store (see Check).
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if cfg.Bucket == "" {
		return nil, errors.New("object store: a bucket is required")
	}
	if cfg.Prefix != "" && !dataset.ValidKey(cfg.Prefix) {
		return nil, fmt.Errorf("object store: prefix %q is not a well-formed key", cfg.Prefix)
	}
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
		if cfg.Region != "" {
			endpoint = "https://s3." + cfg.Region + ".amazonaws.com"
		}
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("object store: endpoint %q is not an http(s) URL of a host", cfg.Endpoint)
	}
	creds := credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)
	if cfg.AccessKeyID == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{Client: &http.Client{Timeout: cfg.RequestTimeout}},
		})
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	dialer := &net.Dialer{Timeout: cfg.RequestTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.RequestTimeout,
		ResponseHeaderTimeout: cfg.RequestTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        creds,
		Secure:       u.Scheme == "https",
		Transport:    transport,
		Region:       cfg.Region,
		BucketLookup: lookup,
		// One retry: a store that refuses connections is reported at once, not after a
		// backoff ladder.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}
	return &Store{cfg: cfg, client: client}, nil
}

// Config returns the store's configuration, with the defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Check reports whether the bucket can be reached and exists, within the request timeout.
func (s *Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.classify(ctx, "check", "", err)
	}
	if !ok {
		return fmt.Errorf("object store: bucket %q does not exist", s.cfg.Bucket)
	}
	return nil
}

// objectName returns the object's name in the bucket for key.
func (s *Store) objectName(key string) (string, error) {
	if !dataset.ValidKey(key) {
		return "", &fs.PathError{Op: "storage", Path: key, Err: fs.ErrInvalid}
	}
	if s.cfg.Prefix == "" {
		return key, nil
	}
	return s.cfg.Prefix + "/" + key, nil
}

// List returns every object whose key starts with prefix, ordered by key. The listing must
// progress at least every request timeout.
func (s *Store) List(ctx context.Context, prefix string) ([]dataset.Object, error) {
	full := prefix
	if s.cfg.Prefix != "" {
		full = s.cfg.Prefix + "/" + prefix
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dog := newWatchdog(s.cfg.RequestTimeout, cancel)
	defer dog.stop()
	var out []dataset.Object
	for info := range s.client.ListObjects(lctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
		if info.Err != nil {
			return nil, s.classifyWatched(ctx, dog, "list", prefix, info.Err)
		}
		dog.arm()
		key := info.Key
		if s.cfg.Prefix != "" {
			key = strings.TrimPrefix(key, s.cfg.Prefix+"/")
		}
		if !dataset.ValidKey(key) || !strings.HasPrefix(key, prefix) {
			continue
		}
		out = append(out, dataset.Object{Key: key, Size: info.Size, Updated: info.LastModified})
	}
	if dog.fired() {
		return nil, s.classifyWatched(ctx, dog, "list", prefix, context.Canceled)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Stat describes the object.
func (s *Store) Stat(ctx context.Context, key string) (dataset.Object, error) {
	info, err := s.stat(ctx, key)
	if err != nil {
		return dataset.Object{}, err
	}
	return dataset.Object{Key: key, Size: info.Size, Updated: info.LastModified}, nil
}

// stat returns the object's information, ETag included.
func (s *Store) stat(ctx context.Context, key string) (minio.ObjectInfo, error) {
	name, err := s.objectName(key)
	if err != nil {
		return minio.ObjectInfo{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	info, err := s.client.StatObject(rctx, s.cfg.Bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return minio.ObjectInfo{}, s.classify(ctx, "stat", key, err)
	}
	return info, nil
}

// Open opens the object for reading. Its head must arrive within the request timeout, and
// each read of its body must return within the transfer idle timeout.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, _, err := s.get(ctx, key, "")
	return rc, err
}

// errChanged reports that the object's ETag is no longer the one asked for.
var errChanged = errors.New("object store: the object changed")

// get opens the object for reading, only if its ETag is etag when etag is set (errChanged
// otherwise), and returns its information.
func (s *Store) get(ctx context.Context, key, etag string) (io.ReadCloser, minio.ObjectInfo, error) {
	name, err := s.objectName(key)
	if err != nil {
		return nil, minio.ObjectInfo{}, err
	}
	opts := minio.GetObjectOptions{}
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return nil, minio.ObjectInfo{}, err
		}
	}
	gctx, cancel := context.WithCancel(ctx)
	dog := newWatchdog(s.cfg.RequestTimeout, cancel)
	obj, err := s.client.GetObject(gctx, s.cfg.Bucket, name, opts)
	var info minio.ObjectInfo
	if err == nil {
		// GetObject sends nothing until asked: Stat makes the request and reads the head.
		info, err = obj.Stat()
	}
	dog.stop()
	if err != nil {
		if obj != nil {
			_ = obj.Close()
		}
		cancel()
		if minio.ToErrorResponse(err).Code == minio.PreconditionFailed {
			return nil, info, errChanged
		}
		return nil, info, s.classifyWatched(ctx, dog, "read", key, err)
	}
	return &download{s: s, ctx: ctx, key: key, obj: obj, cancel: cancel,
		dog: newWatchdog(s.cfg.TransferIdleTimeout, cancel).disarmed()}, info, nil
}

// download is an object's body being read: each Read must return within the transfer idle
// timeout, or the request is cancelled and the read fails as the store being unavailable.
type download struct {
	s      *Store
	ctx    context.Context
	key    string
	obj    *minio.Object
	cancel context.CancelFunc
	dog    *watchdog
}

func (d *download) Read(p []byte) (int, error) {
	d.dog.arm()
	n, err := d.obj.Read(p)
	d.dog.disarm()
	if err != nil && err != io.EOF {
		return n, d.s.classifyWatched(d.ctx, d.dog, "read", d.key, err)
	}
	return n, err
}

func (d *download) Close() error {
	d.dog.stop()
	d.cancel()
	return d.obj.Close()
}

// Put stores the whole of r under key. Readers see the old object until the new one is
// complete: up to one part it is a single PUT, beyond that a multipart upload that the store
// publishes only when it completes (and that is aborted when it fails). It returns once the
// store has the object, so every replica sees it from then on. The upload must make progress
// at least every transfer idle timeout, not counting the time spent reading r.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	name, err := s.objectName(key)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dog := newWatchdog(s.cfg.TransferIdleTimeout, cancel)
	defer dog.stop()
	src := &upload{r: r, dog: dog}
	// Read the first part: a smaller object is sent as one PUT of known size.
	first := make([]byte, s.cfg.PartSize)
	n, rerr := io.ReadFull(src, first)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: uint64(s.cfg.PartSize)}
	switch {
	case rerr == io.EOF || rerr == io.ErrUnexpectedEOF:
		dog.arm()
		_, err = s.client.PutObject(pctx, s.cfg.Bucket, name, bytes.NewReader(first[:n]), int64(n), opts)
	case rerr != nil:
		return fmt.Errorf("read the dataset to store: %w", rerr)
	default:
		body := io.MultiReader(bytes.NewReader(first), src)
		_, err = s.client.PutObject(pctx, s.cfg.Bucket, name, body, -1, opts)
	}
	if err == nil {
		return nil
	}
	if src.err != nil && ctx.Err() == nil && !dog.fired() {
		return fmt.Errorf("read the dataset to store: %w", src.err)
	}
	return s.classifyWatched(ctx, dog, "write", key, err)
}

// upload is the source of a Put: the idle watchdog runs while the store client is not waiting
// for the source (it is sending), and pauses while a Read of the source is in progress.
type upload struct {
	r   io.Reader
	dog *watchdog
	err error
}

func (u *upload) Read(p []byte) (int, error) {
	u.dog.disarm()
	n, err := u.r.Read(p)
	u.dog.arm()
	if err != nil && err != io.EOF {
		u.err = err
	}
	return n, err
}

// Delete removes the object; a missing object is an error matching fs.ErrNotExist.
func (s *Store) Delete(ctx context.Context, key string) error {
	if _, err := s.stat(ctx, key); err != nil {
		return err
	}
	name, _ := s.objectName(key)
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.client.RemoveObject(rctx, s.cfg.Bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return s.classify(ctx, "delete", key, err)
	}
	return nil
}

// classifyWatched is classify for a call whose watchdog may have cancelled it.
func (s *Store) classifyWatched(ctx context.Context, dog *watchdog, op, key string, err error) error {
	if dog.fired() && ctx.Err() == nil {
		return s.unavailable(op, key, fmt.Errorf("no answer or progress within %s: %w", dog.d, err))
	}
	return s.classify(ctx, op, key, err)
}

// unavailable logs and returns the store's unavailability for op on key.
func (s *Store) unavailable(op, key string, err error) error {
	s.cfg.Logger.Warn("dataset store unavailable", "op", op, "key", key, "bucket", s.cfg.Bucket, "err", err)
	return &dataset.StoreUnavailableError{Op: op, Err: fmt.Errorf("object store %s %q: %w", op, key, err)}
}

// classify turns a store client's error into what the dataset package expects: a missing
// object matches fs.ErrNotExist; a timeout, an unreachable store or its 5xx or throttling
// answer is a *dataset.StoreUnavailableError; the caller's own cancellation stays as it is;
// anything else (denied access, a missing bucket) is an internal error naming the store.
func (s *Store) classify(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("object store %s %q: %w", op, key, ctx.Err())
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket):
		return &fs.PathError{Op: op, Path: key, Err: fs.ErrNotExist}
	case resp.StatusCode == 0 || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.Code == "SlowDown" || resp.Code == "RequestTimeout":
		return s.unavailable(op, key, err)
	default:
		return fmt.Errorf("object store %s %q in bucket %q: %w", op, key, s.cfg.Bucket, err)
	}
}
