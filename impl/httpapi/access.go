package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/changefeed"
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
type modelAccess struct {
	store *store.Store
	cache *changefeed.Cache[uuid.UUID, map[string]struct{}]
}

func newModelAccess(st *store.Store, feed *changefeed.Feed) *modelAccess {
	a := &modelAccess{store: st, cache: changefeed.NewCache[uuid.UUID, map[string]struct{}](feed, "model_access", accessTTL, 100_000)}
	if feed != nil {
		feed.Subscribe(changefeed.Handlers{ModelAccessChanged: a.cache.Invalidate, Reset: a.cache.Reset})
	}
	return a
}

// allowed reports whether the account may use the model. Its error is a dependency failure
// (apierror.Unavailable).
func (a *modelAccess) allowed(ctx context.Context, account uuid.UUID, model string) (bool, error) {
	models, err := a.cache.Get(ctx, account, func(ctx context.Context) (map[string]struct{}, error) {
		grants, err := a.store.AccountModels(ctx, account)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			// A read of one account's grants fails only when the database cannot answer.
			return nil, apierror.Unavailable("the database", err)
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
