package exchange

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/upstreamkeys"
)

// accessTTL bounds how long a cached model list of an account is trusted while notifications
// are live, even without one; grants and withdrawals are pushed, so they take effect at once.
const accessTTL = 5 * time.Minute

// modelAccess caches which models each account may use, so that the inference hot path does not
// query the database per request. A database trigger announces every change of model_access;
// the feed drops the account's entry. While the feed is lost, an account's list already in
// memory keeps answering within the feed's MaxStale, and an account not in memory gets a
// dependency error (503); see changefeed.Cache.
//
// The account's part of the end-user identifiers its requests are sent upstream with
// (impl/enduserid) is made with its grants, so that a request pays for it once per account and
// cache entry, not once per request. So are the account's own upstream keys (impl/upstreamkeys),
// opened and made into request headers once per entry: a change of them notifies the same
// channel as a change of the model list (the table's trigger), so a key removed or replaced
// stops being sent as soon as a revoked API key stops being accepted, and during a database
// outage the keys in memory answer within the same staleness bound as the grants (an account
// not in memory gets the 503, never the operator's key).
type modelAccess struct {
	store *store.Store
	cache *changefeed.Cache[uuid.UUID, *Grants]
	// keys make the accounts' end-user identifiers and open their upstream keys, from the
	// server secret of the sealed ids (read once, when the first account's grants are).
	keys *secretKeys
	// upstreams are the configured providers, by name, whose request headers an account's keys
	// are made into.
	upstreams map[string]*provider.Upstream
	// log tells the operator of a stored key that does not open, which only they can set again.
	log *slog.Logger
}

// Grants are an account's model grants, in the database's order, and by model id, and the
// account's end-user identifiers.
type Grants struct {
	list  []store.ModelGrant
	index map[string]int
	// endUser puts the account's identifiers in place of its clients' end-user ids.
	endUser *convert.EndUser
	// upstreamKeys are the account's own upstream keys by provider name; nil for an account
	// with none (the operator's keys serve it).
	upstreamKeys map[string]accountKey
}

// accountKey is an account's own key for one provider: its credential, or, when its sealed key
// did not open, the error every attempt of the account on the provider fails with (the
// operator's key is never sent in its place).
type accountKey struct {
	cred *provider.Credential
	err  error
}

func newModelAccess(st *store.Store, feed *changefeed.Feed, upstreams map[string]*provider.Upstream, log *slog.Logger) *modelAccess {
	a := &modelAccess{store: st, cache: changefeed.NewCache[uuid.UUID, *Grants](feed, "model_access", accessTTL, 100_000),
		keys: &secretKeys{store: st}, upstreams: upstreams, log: log}
	if feed != nil {
		feed.Subscribe(changefeed.Handlers{ModelAccessChanged: a.cache.Invalidate, Reset: a.cache.Reset})
	}
	return a
}

// secretKeys are the keys made from the server secret of the sealed ids: those of the accounts'
// end-user identifiers and the sealer of their own upstream keys. They are made once the
// secret can be read, and kept; a failed read (the database away) is returned and tried again
// at the next call, so a process that started during an outage has them as soon as the
// database is back.
type secretKeys struct {
	store *store.Store

	mu      sync.Mutex
	endUser *enduserid.Keys
	sealer  *upstreamkeys.Sealer
}

// load returns the keys, reading the secret first if no call has yet.
func (k *secretKeys) load(ctx context.Context) (*enduserid.Keys, *upstreamkeys.Sealer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.endUser != nil {
		return k.endUser, k.sealer, nil
	}
	secret, err := k.store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		return nil, nil, err
	}
	endUser, err := enduserid.New(secret)
	if err != nil {
		return nil, nil, err
	}
	sealer, err := upstreamkeys.New(secret)
	if err != nil {
		return nil, nil, err
	}
	k.endUser, k.sealer = endUser, sealer
	return endUser, sealer, nil
}

// grants returns the account's model grants: from memory while the cache may answer (during a
// database outage, within the feed's staleness bound), else from the database. Its error is a
// dependency failure (apierror.Unavailable).
func (a *modelAccess) grants(ctx context.Context, account uuid.UUID) (*Grants, error) {
	return a.cache.Get(ctx, account, func(ctx context.Context) (*Grants, error) {
		list, err := a.store.AccountModels(ctx, account)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// A read of one account's grants fails only when the database cannot answer.
			return nil, apierror.Unavailable("the database", err)
		}
		endUser, _, err := a.keys.load(ctx)
		if err != nil {
			return nil, apierror.Unavailable("the database", err)
		}
		acct := endUser.Account(account)
		g := &Grants{list: list, index: make(map[string]int, len(list)), endUser: convert.NewEndUser(acct.ID(), acct.AppendUser)}
		for i, m := range list {
			g.index[m.ModelID] = i
		}
		if g.upstreamKeys, err = a.accountKeys(ctx, account); err != nil {
			return nil, err
		}
		return g, nil
	})
}

// accountKeys reads and opens the account's own upstream keys (nil when it has none). A key for
// a provider the configuration no longer has is left out, and the operator warned; one that
// does not open is kept as its error. Its error is a dependency failure (apierror.Unavailable).
func (a *modelAccess) accountKeys(ctx context.Context, account uuid.UUID) (map[string]accountKey, error) {
	rows, err := a.store.UpstreamKeys(ctx, account)
	if err != nil {
		return nil, apierror.Unavailable("the database", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	_, sealer, err := a.keys.load(ctx)
	if err != nil {
		return nil, apierror.Unavailable("the database", err)
	}
	keys := make(map[string]accountKey, len(rows))
	for _, r := range rows {
		up, ok := a.upstreams[r.Provider]
		if !ok {
			// A provider renamed or removed in the configuration: the key serves nothing, and
			// the account's requests to the entry that replaced it go with the operator's key,
			// in the shared prompt cache, until the operator sets the key there. Only the
			// operator can tell; they are told here, as for a key that does not open.
			a.log.Warn("an account's own upstream key names a provider the configuration does not have: it is not used, and the account's requests go with the operator's key on the providers that serve them (set it for the provider's new name: tollgate admin provider-key set; or remove it)",
				"account", account, "provider", r.Provider, "hint", r.Hint)
			continue
		}
		key, err := sealer.Open(account, r.Provider, r.Sealed)
		if err != nil {
			// The tenant is told that the operator must set it again; the operator is told
			// here, each time the account's grants are loaded (a change of them, or accessTTL).
			a.log.Warn("an account's own upstream key does not open with this gateway's secret: its requests to the provider are refused (503) until it is set again (tollgate admin provider-key set)",
				"account", account, "provider", r.Provider, "hint", r.Hint)
			keys[r.Provider] = accountKey{err: &apierror.Error{Kind: apierror.KindUnavailable, RetryAfter: apierror.DependencyRetryAfter,
				Message: "the gateway cannot read this account's own upstream credential for the provider " + r.Provider +
					" (it does not open with this gateway's secret): the operator must set it again (tollgate admin provider-key set); the operator's credential is not used in its place"}}
			continue
		}
		keys[r.Provider] = accountKey{cred: up.Credential(key)}
	}
	return keys, nil
}

// List is the account's grants, in the database's order; the caller must not change it.
func (g *Grants) List() []store.ModelGrant { return g.list }

// Grant returns the account's grant of model, and whether there is one.
func (g *Grants) Grant(model string) (store.ModelGrant, bool) {
	i, ok := g.index[model]
	if !ok {
		return store.ModelGrant{}, false
	}
	return g.list[i], true
}

// allowed reports whether the account may use the model, with the account's grants. Its error
// is a dependency failure (apierror.Unavailable).
func (a *modelAccess) allowed(ctx context.Context, account uuid.UUID, model string) (bool, *Grants, error) {
	g, err := a.grants(ctx, account)
	if err != nil {
		return false, nil, err
	}
	_, ok := g.index[model]
	return ok, g, nil
}
