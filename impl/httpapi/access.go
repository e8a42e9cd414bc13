package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/store"
)

// accessTTL bounds how long a cached model list of an account is trusted even without a
// notification; grants and withdrawals are pushed, so they take effect at once.
const accessTTL = 5 * time.Minute

// modelAccess caches which models each account may use, so that the inference hot path does not
// query the database per request. A database trigger announces every change of model_access;
// the feed drops the account's entry, and while the feed is not live nothing is cached.
type modelAccess struct {
	store *store.Store
	cache *changefeed.Cache[uuid.UUID, map[string]struct{}]
}

func newModelAccess(st *store.Store, feed *changefeed.Feed) *modelAccess {
	a := &modelAccess{store: st, cache: changefeed.NewCache[uuid.UUID, map[string]struct{}](feed, accessTTL, 100_000, nil)}
	if feed != nil {
		feed.Subscribe(changefeed.Handlers{ModelAccessChanged: a.cache.Invalidate, Reset: a.cache.Reset})
	}
	return a
}

// allowed reports whether the account may use the model.
func (a *modelAccess) allowed(ctx context.Context, account uuid.UUID, model string) (bool, error) {
	models, err := a.cache.Get(account, func() (map[string]struct{}, error) {
		grants, err := a.store.AccountModels(ctx, account)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		set := make(map[string]struct{}, len(grants))
		for _, g := range grants {
			set[g.ModelID] = struct{}{}
		}
		return set, nil
	})
	if err != nil {
		return false, err
	}
	_, ok := models[model]
	return ok, nil
}
