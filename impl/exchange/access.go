package exchange

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
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
// cache entry, not once per request.
type modelAccess struct {
	store *store.Store
	cache *changefeed.Cache[uuid.UUID, *Grants]
	// endUserKeys make the accounts' end-user identifiers, from the server secret of the
	// sealed ids (read once, when the first account's grants are).
	endUserKeys *enduserid.Loader
}

// Grants are an account's model grants, in the database's order, and by model id, and the
// account's end-user identifiers.
type Grants struct {
	list  []store.ModelGrant
	index map[string]int
	// endUser puts the account's identifiers in place of its clients' end-user ids.
	endUser *convert.EndUser
}

func newModelAccess(st *store.Store, feed *changefeed.Feed) *modelAccess {
	a := &modelAccess{store: st, cache: changefeed.NewCache[uuid.UUID, *Grants](feed, "model_access", accessTTL, 100_000),
		endUserKeys: enduserid.NewLoader(func(ctx context.Context) ([]byte, error) { return st.Secret(ctx, sealedid.SecretName) })}
	if feed != nil {
		feed.Subscribe(changefeed.Handlers{ModelAccessChanged: a.cache.Invalidate, Reset: a.cache.Reset})
	}
	return a
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
		keys, err := a.endUserKeys.Keys(ctx)
		if err != nil {
			return nil, apierror.Unavailable("the database", err)
		}
		acct := keys.Account(account)
		g := &Grants{list: list, index: make(map[string]int, len(list)), endUser: convert.NewEndUser(acct.ID(), acct.AppendUser)}
		for i, m := range list {
			g.index[m.ModelID] = i
		}
		return g, nil
	})
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
