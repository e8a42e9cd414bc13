package auth

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/store"
)

// Principal is the verified caller: the account and key that a request acts for.
type Principal struct {
	AccountID uuid.UUID
	KeyID     uuid.UUID
	// RPMLimit is the key's requests-per-minute cap; 0 means none.
	RPMLimit int
}

// Errors of Authenticate; all of them mean 401.
var (
	ErrMissing   = errors.New("missing bearer credential")
	ErrMalformed = errors.New("malformed API key")
	ErrScheme    = errors.New("not the Bearer scheme")
	ErrUnknown   = errors.New("unknown or revoked API key")
)

// Options tune an Authenticator.
type Options struct {
	// TTL bounds how long a cached key is trusted even with no notification (default 5 minutes).
	TTL time.Duration
	// TouchInterval is how often last-use times are written (default 10 seconds).
	TouchInterval time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Authenticator verifies API keys. Create it with New and run its background work with Run.
type Authenticator struct {
	store *store.Store
	opts  Options

	cache *changefeed.Cache[apikey.Hash, Principal]

	touchMu sync.Mutex
	touched map[uuid.UUID]struct{}
}

// New returns an Authenticator over st that drops cached keys when feed says they changed. It
// caches nothing while the feed is not live.
func New(st *store.Store, feed *changefeed.Feed, opts Options) *Authenticator {
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Minute
	}
	if opts.TouchInterval <= 0 {
		opts.TouchInterval = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Authenticator{store: st, opts: opts, touched: map[uuid.UUID]struct{}{},
		cache: changefeed.NewCache[apikey.Hash, Principal](feed, opts.TTL, 1_000_000, opts.Now)}
	feed.Subscribe(changefeed.Handlers{
		KeyChanged: func(h [32]byte) { a.cache.Invalidate(h) },
		Reset:      a.cache.Reset,
	})
	return a
}

// Run writes last-use times every TouchInterval until ctx ends, then writes the last batch. It
// blocks; its owner cancels ctx and waits for it to return.
func (a *Authenticator) Run(ctx context.Context) {
	ticker := time.NewTicker(a.opts.TouchInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			a.writeTouches(flushCtx)
			cancel()
			return
		case <-ticker.C:
			a.writeTouches(ctx)
		}
	}
}

// Authenticate verifies the value of an Authorization header. Only the Bearer scheme is
// accepted.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (Principal, error) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		if authorization == "" {
			return Principal{}, ErrMissing
		}
		return Principal{}, ErrScheme
	}
	hash, err := apikey.Parse(strings.TrimSpace(key))
	if err != nil {
		return Principal{}, ErrMalformed
	}
	p, err := a.cache.Get(hash, func() (Principal, error) {
		k, err := a.store.ActiveAPIKeyByHash(ctx, hash[:])
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, ErrUnknown
		}
		if err != nil {
			return Principal{}, err
		}
		return Principal{AccountID: k.AccountID, KeyID: k.ID, RPMLimit: k.RPMLimit}, nil
	})
	if err != nil {
		return Principal{}, err
	}
	a.touch(p.KeyID)
	return p, nil
}

func (a *Authenticator) touch(id uuid.UUID) {
	a.touchMu.Lock()
	a.touched[id] = struct{}{}
	a.touchMu.Unlock()
}

func (a *Authenticator) writeTouches(ctx context.Context) {
	a.touchMu.Lock()
	if len(a.touched) == 0 {
		a.touchMu.Unlock()
		return
	}
	ids := make([]uuid.UUID, 0, len(a.touched))
	for id := range a.touched {
		ids = append(ids, id)
	}
	clear(a.touched)
	a.touchMu.Unlock()
	if err := a.store.TouchAPIKeys(ctx, ids, a.opts.Now()); err != nil {
		a.opts.Logger.Warn("recording key last-use times", "keys", len(ids), "err", err)
	}
}

type principalKey struct{}

// WithPrincipal returns a context carrying the verified caller; the HTTP edge sets it once.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the verified caller of the request, if authentication ran.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
