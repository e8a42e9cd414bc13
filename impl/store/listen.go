package store

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/gen/db"
)

// Notification channels announced by database triggers.
const (
	// ChannelAPIKeyChanged carries the hex SHA-256 of a key that was revoked or re-capped.
	ChannelAPIKeyChanged = "tollgate_api_key_changed"
	// ChannelModelAccessChanged carries the id of an account whose model list changed.
	ChannelModelAccessChanged = "tollgate_model_access_changed"
	// ChannelCreditRelease carries the gateway processes' requests to release their idle
	// credit holds of an account, and the answers (impl/billing); no trigger sends on it.
	ChannelCreditRelease = "tollgate_credit_release"
)

// Subscription receives notifications; see Listen.
type Subscription struct {
	// Notify is called for each notification, on the listening goroutine.
	Notify func(channel, payload string)
	// Connected is called each time the listener is (re)connected and listening, before any
	// notification from that connection. Whatever was missed while disconnected must be treated
	// as changed.
	Connected func()
	// Disconnected is called when the listening connection is lost.
	Disconnected func(err error)
}

// Listen holds one connection that listens on both notification channels and reconnects when it
// is lost, until ctx ends. It blocks; run it on a goroutine whose owner cancels ctx.
func (s *Store) Listen(ctx context.Context, sub Subscription) {
	s.listen(ctx, sub, func(ctx context.Context, q *db.Queries) error {
		if err := q.ListenAPIKeyChanged(ctx); err != nil {
			return err
		}
		return q.ListenModelAccessChanged(ctx)
	})
}

// ListenCreditRelease is Listen for ChannelCreditRelease alone, on a connection of its own.
func (s *Store) ListenCreditRelease(ctx context.Context, sub Subscription) {
	s.listen(ctx, sub, func(ctx context.Context, q *db.Queries) error { return q.ListenCreditRelease(ctx) })
}

// NotifyCreditRelease sends payload on ChannelCreditRelease to every listening process.
func (s *Store) NotifyCreditRelease(ctx context.Context, payload string) error {
	return s.q.NotifyCreditRelease(ctx, payload)
}

// NotifyAPIKeyChannel sends payload on ChannelAPIKeyChanged, from a connection of the pool (as a
// key's trigger sends from the transaction that changed it). The change feed's heartbeat uses it
// to see its notifications arrive; a payload that is no key's hash must be one every listener
// skips (see impl/changefeed).
func (s *Store) NotifyAPIKeyChannel(ctx context.Context, payload string) error {
	return s.q.NotifyAPIKeyChannel(ctx, payload)
}

// listen holds one connection that subscribes with subscribe and reconnects when it is lost,
// until ctx ends.
func (s *Store) listen(ctx context.Context, sub Subscription, subscribe func(context.Context, *db.Queries) error) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, sub, subscribe)
		if ctx.Err() != nil {
			return
		}
		if sub.Disconnected != nil {
			sub.Disconnected(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, sub Subscription, subscribe func(context.Context, *db.Queries) error) error {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening connection is never handed back to the pool: it carries LISTEN state.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if err := subscribe(ctx, db.New(conn)); err != nil {
		return err
	}
	if sub.Connected != nil {
		sub.Connected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if sub.Notify != nil {
			sub.Notify(n.Channel, n.Payload)
		}
	}
}
