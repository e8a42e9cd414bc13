// Package changefeed delivers the database's change notifications to the in-memory caches of a
// gateway process: revoked or re-capped API keys, and changed model lists of accounts. It holds
// one LISTEN connection (reconnecting when lost) and tells subscribers when it is live, so a
// cache can stop trusting itself while changes might be missed.
package changefeed

import (
	"context"
	"encoding/hex"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// Handlers are a subscriber's callbacks; any may be nil. They run on the feed's goroutine and
// must not block.
type Handlers struct {
	// KeyChanged receives the SHA-256 of a key that was revoked or re-capped.
	KeyChanged func(hash [32]byte)
	// ModelAccessChanged receives an account whose model list changed.
	ModelAccessChanged func(account uuid.UUID)
	// Reset says that changes may have been missed (the feed (re)connected or was lost): drop
	// everything cached.
	Reset func()
}

// Feed fans notifications out to subscribers.
type Feed struct {
	store *store.Store
	log   *slog.Logger
	live  atomic.Bool
	mu    sync.RWMutex
	subs  []Handlers
}

// New returns a feed over st; Run starts it.
func New(st *store.Store, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.Default()
	}
	return &Feed{store: st, log: log}
}

// Subscribe registers handlers; call it before Run.
func (f *Feed) Subscribe(h Handlers) {
	f.mu.Lock()
	f.subs = append(f.subs, h)
	f.mu.Unlock()
}

// Live reports whether notifications are being received now. Caches must not serve from memory
// while it is false.
func (f *Feed) Live() bool { return f.live.Load() }

// Run listens until ctx ends. It blocks; its owner cancels ctx and waits for it.
func (f *Feed) Run(ctx context.Context) {
	f.store.Listen(ctx, store.Subscription{
		Connected: func() {
			f.reset()
			f.live.Store(true)
		},
		Disconnected: func(err error) {
			f.live.Store(false)
			f.reset()
			f.log.Warn("change notifications lost; caches are bypassed until they reconnect", "err", err)
		},
		Notify: f.notify,
	})
	f.live.Store(false)
}

func (f *Feed) reset() {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, s := range f.subs {
		if s.Reset != nil {
			s.Reset()
		}
	}
}

func (f *Feed) notify(channel, payload string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch channel {
	case store.ChannelAPIKeyChanged:
		var h [32]byte
		b, err := hex.DecodeString(payload)
		if err != nil || len(b) != len(h) {
			f.log.Warn("unreadable key notification; resetting caches", "payload", payload)
			for _, s := range f.subs {
				if s.Reset != nil {
					s.Reset()
				}
			}
			return
		}
		copy(h[:], b)
		for _, s := range f.subs {
			if s.KeyChanged != nil {
				s.KeyChanged(h)
			}
		}
	case store.ChannelModelAccessChanged:
		id, err := uuid.Parse(payload)
		for _, s := range f.subs {
			switch {
			case err != nil && s.Reset != nil:
				s.Reset()
			case err == nil && s.ModelAccessChanged != nil:
				s.ModelAccessChanged(id)
			}
		}
	}
}
