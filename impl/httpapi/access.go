package httpapi

import (
	"context"
	"errors"
	"sync"
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
	feed  *changefeed.Feed
	now   func() time.Time
	mu    sync.RWMutex
	byAcc map[uuid.UUID]accessEntry
	epoch uint64
}

type accessEntry struct {
	models  map[string]struct{}
	expires time.Time
}

func newModelAccess(st *store.Store, feed *changefeed.Feed) *modelAccess {
	a := &modelAccess{store: st, feed: feed, now: time.Now, byAcc: map[uuid.UUID]accessEntry{}}
	if feed != nil {
		feed.Subscribe(changefeed.Handlers{
			ModelAccessChanged: func(id uuid.UUID) {
				a.mu.Lock()
				a.epoch++
				delete(a.byAcc, id)
				a.mu.Unlock()
			},
			Reset: func() {
				a.mu.Lock()
				a.epoch++
				clear(a.byAcc)
				a.mu.Unlock()
			},
		})
	}
	return a
}

// allowed reports whether the account may use the model.
func (a *modelAccess) allowed(ctx context.Context, account uuid.UUID, model string) (bool, error) {
	now := a.now()
	live := a.feed != nil && a.feed.Live()
	if live {
		a.mu.RLock()
		e, ok := a.byAcc[account]
		a.mu.RUnlock()
		if ok && now.Before(e.expires) {
			_, ok = e.models[model]
			return ok, nil
		}
	}
	a.mu.RLock()
	epoch := a.epoch
	a.mu.RUnlock()
	grants, err := a.store.AccountModels(ctx, account)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	e := accessEntry{models: make(map[string]struct{}, len(grants)), expires: now.Add(accessTTL)}
	for _, g := range grants {
		e.models[g.ModelID] = struct{}{}
	}
	if live {
		a.mu.Lock()
		if a.epoch == epoch {
			if len(a.byAcc) > 100_000 {
				clear(a.byAcc)
			}
			a.byAcc[account] = e
		}
		a.mu.Unlock()
	}
	_, ok := e.models[model]
	return ok, nil
}
