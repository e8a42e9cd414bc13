package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
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
	// Limits are the key's other limits (expiry, credit cap, model subset); nil when it has
	// none, so that a key without them costs nothing more per request.
	Limits *KeyLimits
	// OAuth is set when the caller is an MCP client signed in with OAuth (impl/mcpauth) rather
	// than an API key: the grant, the member who approved it and the client it was issued to.
	// It is nil for API keys.
	OAuth *OAuthActor
	// disabled is set for a disabled key, which is cached as such and refused.
	disabled bool
	// keyText and accountText are the ids as text, made once when the key is looked up rather
	// than on every request (the rate limiter and the access log use them).
	keyText, accountText string
}

// OAuthActor is who an OAuth access token acts for: the grant, its member and its client.
type OAuthActor struct {
	// GrantID is the grant the access token belongs to; the rate limit is kept per grant.
	GrantID uuid.UUID
	// UserID and UserEmail name the member who approved the grant.
	UserID    uuid.UUID
	UserEmail string
	// ClientID and ClientName name the client (the app) the grant was issued to; ClientName
	// is empty when the client registered none.
	ClientID   string
	ClientName string
}

// KeyLimits are the limits of a key beyond its requests-per-minute cap.
type KeyLimits struct {
	// ExpiresAt is when the key stops working (zero: never).
	ExpiresAt time.Time
	// HasCap says the key has a credit cap: at most CapMicros in each CapPeriod.
	HasCap    bool
	CapMicros int64
	CapPeriod store.CapPeriod
	// Models are the models the key may use (nil: every model of its account).
	Models map[string]struct{}
}

// AllowsModel reports whether the key may use the model (as far as the key's own subset goes:
// the account must have it too).
func (p Principal) AllowsModel(id string) bool {
	if p.Limits == nil || p.Limits.Models == nil {
		return true
	}
	_, ok := p.Limits.Models[id]
	return ok
}

// KeyText is the key's id as text; for an OAuth caller, which has no key, it is
// "oauth-grant:" and the grant's id (so the rate limiter keeps one bucket per grant).
func (p Principal) KeyText() string {
	if p.keyText != "" {
		return p.keyText
	}
	if p.KeyID == uuid.Nil && p.OAuth != nil {
		return "oauth-grant:" + p.OAuth.GrantID.String()
	}
	return p.KeyID.String()
}

// AccountText is the account's id as text.
func (p Principal) AccountText() string {
	if p.accountText != "" {
		return p.accountText
	}
	return p.AccountID.String()
}

// Errors of Authenticate that mean 401. Authenticate's other errors are dependency failures
// (apierror.Unavailable, 503): the key is not in memory, or not usable from it, and the
// database cannot be asked.
var (
	ErrMissing   = errors.New("missing bearer credential")
	ErrMalformed = errors.New("malformed API key")
	// ErrMistyped is an ErrMalformed: the key has a tollgate key's form but a character of it
	// was changed (its checksum does not match).
	ErrMistyped = fmt.Errorf("%w: a character of it was changed or mistyped", ErrMalformed)
	ErrScheme   = errors.New("not the Bearer scheme")
	ErrUnknown  = errors.New("unknown or revoked API key")
	ErrDisabled = errors.New("the API key is disabled")
)

// ExpiredError is the 401 of a key whose expiry has passed.
type ExpiredError struct{ At time.Time }

// Error implements error.
func (e *ExpiredError) Error() string {
	return "the key expired at " + e.At.UTC().Format(time.RFC3339)
}

// Options tune an Authenticator.
type Options struct {
	// TTL bounds how long a cached key is trusted while notifications are live, even with no
	// notification (default 5 minutes). While they are lost the feed's MaxStale applies.
	TTL time.Duration
	// TouchInterval is how often last-use times are written (default 10 seconds).
	TouchInterval time.Duration
	// Now is the clock of last-use times (default time.Now); the cache uses the feed's.
	Now    func() time.Time
	Logger *slog.Logger
}

// Authenticator verifies API keys. Create it with New and run its background work with Run.
type Authenticator struct {
	store *store.Store
	opts  Options

	cache *changefeed.Cache[apikey.Hash, Principal]

	touchMu sync.Mutex
	// touched holds the latest use of each key used since the last write of last-use times.
	touched map[uuid.UUID]time.Time
	// touchFailing is whether the last write of last-use times failed; guarded by touchMu.
	touchFailing bool
}

// New returns an Authenticator over st that drops cached keys when feed says they changed, and
// keeps authenticating the keys it knows, within the feed's MaxStale, while the feed is lost
// (see changefeed.Cache).
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
	a := &Authenticator{store: st, opts: opts, touched: map[uuid.UUID]time.Time{},
		cache: changefeed.NewCache[apikey.Hash, Principal](feed, "api_key", opts.TTL, 1_000_000)}
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
	if errors.Is(err, apikey.ErrChecksum) {
		return Principal{}, ErrMistyped
	}
	if err != nil {
		return Principal{}, ErrMalformed
	}
	p, err := a.cache.Get(ctx, hash, func(ctx context.Context) (Principal, error) {
		k, err := a.store.ActiveAPIKeyByHash(ctx, hash[:])
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, ErrUnknown
		}
		if err != nil {
			// A lookup by primary key fails only when the database cannot answer.
			return Principal{}, apierror.Unavailable("the database", err)
		}
		return principalOf(k), nil
	})
	if err != nil {
		return Principal{}, err
	}
	if err := a.refusal(p); err != nil {
		return Principal{}, err
	}
	a.touch(p.KeyID)
	return p, nil
}

// KeyPrincipal returns the caller that the account's key with id stands for, as Authenticate
// would: its account, RPM cap and limits (the credit cap and the model subset that the metering
// and the routes apply to a Principal); another account's key is ErrUnknown, as an unknown one. It is for work done later on a key's behalf, such as an agent
// session's model calls, which must keep to the key's limits as its requests do: a revoked or
// unknown key is ErrUnknown, a disabled one ErrDisabled, an expired one an *ExpiredError. It
// reads the database on every call (no cache); its other errors are dependency failures.
func (a *Authenticator) KeyPrincipal(ctx context.Context, accountID, id uuid.UUID) (Principal, error) {
	k, err := a.store.GetAccountAPIKey(ctx, accountID, id)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, ErrUnknown
	}
	if err != nil {
		return Principal{}, apierror.Unavailable("the database", err)
	}
	if k.RevokedAt != nil {
		return Principal{}, ErrUnknown
	}
	p := principalOf(k)
	if err := a.refusal(p); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// refusal is why a key known to the database is refused now: ErrDisabled, an *ExpiredError, or
// nil. A key without limits is not even given the clock.
func (a *Authenticator) refusal(p Principal) error {
	if p.disabled {
		return ErrDisabled
	}
	if p.Limits != nil && !p.Limits.ExpiresAt.IsZero() && !a.opts.Now().Before(p.Limits.ExpiresAt) {
		return &ExpiredError{At: p.Limits.ExpiresAt}
	}
	return nil
}

// principalOf is the cached form of a stored key.
func principalOf(k store.APIKey) Principal {
	p := Principal{AccountID: k.AccountID, KeyID: k.ID, RPMLimit: k.RPMLimit, disabled: k.DisabledAt != nil,
		keyText: k.ID.String(), accountText: k.AccountID.String()}
	if k.ExpiresAt == nil && k.CreditCapMicros == nil && k.Models == nil {
		return p
	}
	l := &KeyLimits{CapPeriod: k.CapPeriod}
	if k.ExpiresAt != nil {
		l.ExpiresAt = *k.ExpiresAt
	}
	if k.CreditCapMicros != nil {
		l.HasCap, l.CapMicros = true, *k.CreditCapMicros
	}
	if k.Models != nil {
		l.Models = make(map[string]struct{}, len(k.Models))
		for _, m := range k.Models {
			l.Models[m] = struct{}{}
		}
	}
	p.Limits = l
	return p
}

// touch records that the key with id is used now. The time of the use is what writeTouches
// writes, not the time of the write: a key revoked between its last use and the next write
// must not show a use after its revocation (newcomer trial finding 7).
func (a *Authenticator) touch(id uuid.UUID) {
	now := a.opts.Now()
	a.touchMu.Lock()
	if last, ok := a.touched[id]; !ok || now.After(last) {
		a.touched[id] = now
	}
	a.touchMu.Unlock()
}

// writeTouches writes the latest use of each key touched since the last write.
func (a *Authenticator) writeTouches(ctx context.Context) {
	a.touchMu.Lock()
	if len(a.touched) == 0 {
		a.touchMu.Unlock()
		return
	}
	uses := a.touched
	a.touched = make(map[uuid.UUID]time.Time, len(uses))
	a.touchMu.Unlock()
	err := a.store.TouchAPIKeys(ctx, uses)
	a.touchMu.Lock()
	failing := a.touchFailing
	a.touchFailing = err != nil
	if err != nil {
		// Kept for the next write, each with its own time unless the key was used again
		// since; logged once when the writes start failing, not every interval of an outage.
		for id, at := range uses {
			if last, ok := a.touched[id]; !ok || at.After(last) {
				a.touched[id] = at
			}
		}
	}
	a.touchMu.Unlock()
	switch {
	case err != nil && !failing:
		a.opts.Logger.Warn("recording key last-use times failed; retrying every interval", "keys", len(uses), "err", err)
	case err == nil && failing:
		a.opts.Logger.Info("recording key last-use times again")
	}
}

type principalKey struct{}

// WithPrincipal returns a context carrying the verified caller; the HTTP edge sets it once.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the verified caller of the request, if authentication ran: the one
// WithPrincipal put in the context, else the one set in the context's Slot.
func FromContext(ctx context.Context) (Principal, bool) {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p, true
	}
	if s, ok := ctx.Value(slotKey{}).(*Slot); ok && s.set {
		return s.p, true
	}
	return Principal{}, false
}

// Slot is a place in a request's context for its caller, filled in when authentication
// succeeds later in the same request. The HTTP edge adds it with the request's other values,
// so that authenticating does not copy the request a second time to carry the caller. A Slot
// is set by the goroutine serving the request, before anything reads it.
type Slot struct {
	p   Principal
	set bool
}

type slotKey struct{}

// WithSlot returns a context carrying an empty Slot, and the Slot.
func WithSlot(ctx context.Context) (context.Context, *Slot) {
	s := new(Slot)
	return context.WithValue(ctx, slotKey{}, s), s
}

// SlotFrom returns the Slot of ctx, or nil.
func SlotFrom(ctx context.Context) *Slot {
	s, _ := ctx.Value(slotKey{}).(*Slot)
	return s
}

// Set records the verified caller.
func (s *Slot) Set(p Principal) { s.p, s.set = p, true }
