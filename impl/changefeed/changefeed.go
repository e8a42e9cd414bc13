// Package changefeed delivers the database's change notifications to the in-memory caches of a
// gateway process (revoked or re-capped API keys, changed model lists of accounts), and owns
// the process's degraded mode: what those caches may still answer while the notifications are
// lost.
//
// The feed holds one LISTEN connection, reconnecting when it is lost, and proves that its
// notifications arrive: at each connection and then every Heartbeat it sends a notification of
// its own (pg_notify from the pool, another connection, as a change would come) and waits for it
// on the listening connection. So a process cut off from the database without a broken
// connection to show it (a network partition) notices, and so does one whose LISTEN succeeds
// but delivers nothing (a connection pooler in transaction mode, a proxy): an answer of the
// database proves nothing about its notifications. The feed is live only from its first proof
// on a connection, and while the proofs keep arriving; a cache trusts its entries only then (a
// change is pushed to it within a notification's delay). Otherwise the process is degraded: a
// cache answers from an entry it already holds as long as that entry was known to be current
// less than MaxStale ago, without waiting for the database, and only what it has never seen (or
// has held too long) goes to the database, whose failure the caller answers with 503; an entry
// read more than a Heartbeat ago is re-checked in the background meanwhile, so that, when the
// database answers although its notifications are lost, a revoked key is refused within about
// a Heartbeat. Each (re)connection starts a new
// generation: an entry from an earlier one may have missed a change, so it is re-checked with
// the database on its first use once the new connection is live (and still answered, within
// MaxStale, when that check cannot reach the database). The feed logs one line per change of
// state, shows the state in tollgate_degraded and reports it with Degraded for readiness.
//
// The proofs travel on ChannelAPIKeyChanged with a payload no key has (heartbeatMarker and a
// nonce, in the 64 hex digits of a key's hash): every listening process receives every other's,
// skips them by their marker, and a process of a version before the proofs reads them as the
// change of a key no one holds (it drops nothing and logs nothing).
package changefeed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/store"
)

// Defaults of Options.
const (
	DefaultMaxStale      = 5 * time.Minute
	DefaultHeartbeat     = 5 * time.Second
	DefaultHeartbeatWait = 5 * time.Second
	DefaultLookupTimeout = 5 * time.Second
)

// Options tune a Feed; the zero value of each field means its default.
type Options struct {
	// MaxStale bounds how long a cache keeps answering from an entry it cannot re-check with
	// the database (default 5 minutes): while the notifications are lost, an entry answers
	// until MaxStale after the last moment it was known to be current; after that, and for
	// anything the process has never seen, a lookup fails with a dependency error (503).
	MaxStale time.Duration
	// Heartbeat is how often the feed checks, while it listens, that its notifications arrive
	// (default 5 seconds): it sends one from the pool and waits for it on the listening
	// connection. A check whose notification cannot be sent, or does not arrive, within
	// HeartbeatWait (default 5 seconds) counts as the notifications lost: the process goes
	// degraded and listens again on a new connection (after a pause of Heartbeat when the
	// database answered but delivered nothing), which is live once a check succeeds on it.
	// While degraded, it is also how old an entry a cache answers from memory may be before
	// that answer starts a background re-check of it with the database (see Cache).
	Heartbeat     time.Duration
	HeartbeatWait time.Duration
	// LookupTimeout bounds a cache's database lookup (default 5 seconds), so that a database
	// that does not answer at all costs a request a 503, not a hang.
	LookupTimeout time.Duration
	// Logger receives one line per change of state (nil: slog.Default()).
	Logger *slog.Logger
	// Metrics, when set, shows the state (tollgate_degraded) and counts the answers given
	// from memory while degraded (tollgate_stale_cache_served_total).
	Metrics *metrics.Metrics
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MaxStale <= 0 {
		o.MaxStale = DefaultMaxStale
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.HeartbeatWait <= 0 {
		o.HeartbeatWait = DefaultHeartbeatWait
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = DefaultLookupTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Handlers are a subscriber's callbacks; any may be nil. They run on the feed's goroutine and
// must not block.
type Handlers struct {
	// KeyChanged receives the SHA-256 of a key that was revoked or re-capped.
	KeyChanged func(hash [32]byte)
	// ModelAccessChanged receives an account whose model list changed.
	ModelAccessChanged func(account uuid.UUID)
	// Reset says that a notification could not be read: drop everything cached. (A lost or
	// new connection is not a reset: the caches see it in the feed's state.)
	Reset func()
}

// Feed fans notifications out to subscribers and keeps the state of the notifications.
type Feed struct {
	store *store.Store
	opts  Options

	// state is the current state; it is replaced whole (under transition), never changed.
	state atomic.Pointer[state]
	// confirmed is the last moment (Unix nanoseconds) the notifications were known to flow:
	// a notification received, the sending of a heartbeat's that arrived.
	confirmed  atomic.Int64
	transition sync.Mutex
	// wasLive (guarded by transition) says the feed has been live once: its next live state is
	// a restoration.
	wasLive bool
	// undeliveredLogged (guarded by transition) says that the warning about notifications that
	// are not delivered was logged since the feed was last live: it is logged once, not at
	// every connection that fails the same way.
	undeliveredLogged bool

	// proof is the heartbeat's notification awaited now (nil between checks).
	proof atomic.Pointer[proof]
	// prove wakes the heartbeat when a connection listens, to prove it at once.
	prove chan struct{}

	mu   sync.RWMutex
	subs []Handlers
}

// state is one situation of the feed.
type state struct {
	// live says that the notifications of this generation's connection are known to arrive.
	live bool
	// listening says that this generation's connection listens (live or not yet proven); it
	// ends when the connection is lost or its proof fails.
	listening bool
	// gen grows at every connection: a cached entry of an older generation may have missed a
	// change and is re-checked before it is trusted again.
	gen uint64
	// since is when this state began: connected, or the loss was noticed.
	since time.Time
	// knownUntil, while not live, is the last moment the notifications were known to flow.
	knownUntil time.Time
	// past holds the earlier generations that still matter (one reconnected less than MaxStale
	// ago), oldest first.
	past []pastGen
}

// pastGen is a generation that was lost: its entries were known current until knownUntil.
type pastGen struct {
	gen                  uint64
	knownUntil, replaced time.Time
}

// knownUntilOf returns when the entries of the past generation gen were last known current.
func (s *state) knownUntilOf(gen uint64) (time.Time, bool) {
	for _, p := range s.past {
		if p.gen == gen {
			return p.knownUntil, true
		}
	}
	return time.Time{}, false
}

// New returns a feed over st with the default options; Run starts it.
func New(st *store.Store, log *slog.Logger) *Feed {
	return NewWithOptions(st, Options{Logger: log})
}

// NewWithOptions returns a feed over st; Run starts it. Until it first connects the process
// knows nothing, so it reports itself degraded.
func NewWithOptions(st *store.Store, opts Options) *Feed {
	f := &Feed{store: st, opts: opts.withDefaults(), prove: make(chan struct{}, 1)}
	f.state.Store(&state{since: f.opts.Now()})
	if f.opts.Metrics != nil {
		f.opts.Metrics.Degraded.Set(1)
	}
	return f
}

// Subscribe registers handlers; call it before Run.
func (f *Feed) Subscribe(h Handlers) {
	f.mu.Lock()
	f.subs = append(f.subs, h)
	f.mu.Unlock()
}

// Live reports whether notifications are being received now: the listening connection has
// received the feed's own notification, and keeps receiving them every Heartbeat.
func (f *Feed) Live() bool { return f.state.Load().live }

// Degraded reports whether the process is degraded (its notifications are lost, or were never
// received yet), and since when. Readiness shows it: a degraded process still serves.
func (f *Feed) Degraded() (bool, time.Time) {
	s := f.state.Load()
	return !s.live, s.since
}

// MaxStale is the bound on how long a cache answers from an entry it cannot re-check.
func (f *Feed) MaxStale() time.Duration { return f.opts.MaxStale }

func (f *Feed) now() time.Time { return f.opts.Now() }

// Run listens until ctx ends. It blocks; its owner cancels ctx and waits for it.
func (f *Feed) Run(ctx context.Context) {
	for ctx.Err() == nil {
		// One listening session: the listener reconnects by itself when its connection
		// breaks; the heartbeat ends the session when the database stops answering without
		// the connection showing it, and the next session listens on a new connection.
		session, end := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.store.Listen(session, store.Subscription{
				Connected:    f.connected,
				Disconnected: func(err error) { f.lost(f.state.Load().gen, err) },
				Notify:       f.notify,
			})
		}()
		undelivered := f.heartbeat(session, end)
		end()
		<-done
		if undelivered {
			// The database answers but delivers nothing (a pooler, a proxy): a new connection
			// is tried, but not at once, so that such a path costs the database one
			// connection and one notification per Heartbeat, not a loop.
			select {
			case <-ctx.Done():
			case <-time.After(f.opts.Heartbeat):
			}
		}
	}
	f.transition.Lock()
	old := f.state.Load()
	f.state.Store(&state{gen: old.gen, since: f.now(), knownUntil: f.knownUntil(old), past: old.past})
	f.transition.Unlock()
}

// errUndelivered is the failure of a heartbeat whose notification was sent (the database
// answered) but did not reach the listening connection.
var errUndelivered = errors.New("the database answered, but the feed's own notification, sent from the pool, did not reach its listening connection within heartbeat_wait: " +
	"the notifications are not delivered, most likely because a connection pooler in transaction mode (PgBouncer's pool_mode = transaction) or a proxy stands between the gateway and PostgreSQL " +
	"(docs/operations.md, \"Behind a connection pooler\": use session pooling or a direct URL)")

// heartbeat proves the delivery of the notifications at each connection and then every
// Heartbeat while the feed listens (see roundTrip); when a proof fails, the feed is lost and
// the session ended. It returns when session ends, saying whether the last proof failed for
// want of delivery alone.
func (f *Feed) heartbeat(session context.Context, end context.CancelFunc) (undelivered bool) {
	t := time.NewTicker(f.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-session.Done():
			return false
		case <-t.C:
		case <-f.prove:
		}
		s := f.state.Load()
		if !s.listening {
			continue // the listener is reconnecting
		}
		began := f.now()
		err := f.roundTrip(session)
		if session.Err() != nil {
			return false
		}
		if err == nil {
			f.proved(s.gen, began)
			continue
		}
		f.lost(s.gen, err)
		end()
		return errors.Is(err, errUndelivered)
	}
}

// heartbeatMarker opens the payload of every heartbeat's notification: the first 16 bytes of
// the 32 of a key's hash (hex of "tgfeedheartbeat!"), which a key's SHA-256 has with a chance
// of 2^-128. The other 16 are a nonce.
const heartbeatMarker = "74676665656468656172746265617421"

// isHeartbeat reports whether payload, received on ChannelAPIKeyChanged, is a heartbeat's.
func isHeartbeat(payload string) bool {
	return len(payload) == 2*len(heartbeatMarker) && payload[:len(heartbeatMarker)] == heartbeatMarker
}

// proof is a heartbeat's notification: arrived is closed when the listener receives payload.
type proof struct {
	payload string
	arrived chan struct{}
	once    sync.Once
}

// roundTrip sends a notification of the feed's own from the pool and waits for the listening
// connection to receive it, within HeartbeatWait in all. It fails with the database's error
// when the notification cannot be sent, and with errUndelivered when it was sent but did not
// arrive.
func (f *Feed) roundTrip(session context.Context) error {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	p := &proof{payload: heartbeatMarker + hex.EncodeToString(nonce[:]), arrived: make(chan struct{})}
	f.proof.Store(p)
	defer f.proof.CompareAndSwap(p, nil)
	ctx, cancel := context.WithTimeout(session, f.opts.HeartbeatWait)
	defer cancel()
	if err := f.store.NotifyAPIKeyChannel(ctx, p.payload); err != nil {
		return err
	}
	select {
	case <-p.arrived:
		return nil
	case <-ctx.Done():
		if session.Err() != nil {
			return session.Err()
		}
		return errUndelivered
	}
}

// confirm records that the notifications were known to flow at t.
func (f *Feed) confirm(t time.Time) {
	n := t.UnixNano()
	for {
		old := f.confirmed.Load()
		if n <= old || f.confirmed.CompareAndSwap(old, n) {
			return
		}
	}
}

// knownUntil is the last moment the notifications of state s were known to flow.
func (f *Feed) knownUntil(s *state) time.Time {
	if !s.live {
		return s.knownUntil
	}
	return time.Unix(0, f.confirmed.Load())
}

// connected starts a new generation, listening but not live until the heartbeat proves that
// its notifications arrive (it is woken to do so at once); entries cached before it are
// re-checked on their first use once it is live.
func (f *Feed) connected() {
	f.transition.Lock()
	defer f.transition.Unlock()
	old := f.state.Load()
	now := f.now()
	past := make([]pastGen, 0, len(old.past)+1)
	for _, p := range old.past {
		if now.Sub(p.replaced) <= f.opts.MaxStale {
			past = append(past, p)
		}
	}
	past = append(past, pastGen{gen: old.gen, knownUntil: f.knownUntil(old), replaced: now})
	since := old.since // still degraded, since the loss (or the start)
	if old.live {
		since = now
	}
	f.state.Store(&state{listening: true, gen: old.gen + 1, since: since, knownUntil: f.knownUntil(old), past: past})
	if f.opts.Metrics != nil {
		f.opts.Metrics.Degraded.Set(1)
	}
	select {
	case f.prove <- struct{}{}:
	default:
	}
}

// proved records that generation gen's notifications were known to arrive at t (a heartbeat's
// sent then arrived), making it live if it is not yet.
func (f *Feed) proved(gen uint64, t time.Time) {
	f.transition.Lock()
	defer f.transition.Unlock()
	old := f.state.Load()
	if old.gen != gen || !old.listening {
		return
	}
	f.confirm(t)
	if old.live {
		return
	}
	now := f.now()
	f.state.Store(&state{live: true, listening: true, gen: gen, since: now, past: old.past})
	if f.opts.Metrics != nil {
		f.opts.Metrics.Degraded.Set(0)
	}
	f.undeliveredLogged = false
	if !f.wasLive {
		f.wasLive = true
		f.opts.Logger.Info("change notifications live")
		return
	}
	f.opts.Logger.Info("change notifications restored: degraded mode over; keys and model access cached before are re-checked with the database on their next use",
		"degraded_for", now.Sub(old.since).Round(time.Millisecond).String())
}

// lost ends generation gen's listening (and live) state, if it is still the current one. It
// logs the loss of a live feed, and the first failure for want of delivery since the feed was
// last live (whose error names the likely cause).
func (f *Feed) lost(gen uint64, err error) {
	f.transition.Lock()
	defer f.transition.Unlock()
	old := f.state.Load()
	if !old.listening || old.gen != gen {
		return
	}
	now := f.now()
	since := old.since
	if old.live {
		since = now
	}
	f.state.Store(&state{gen: old.gen, since: since, knownUntil: f.knownUntil(old), past: old.past})
	if f.opts.Metrics != nil {
		f.opts.Metrics.Degraded.Set(1)
	}
	undelivered := errors.Is(err, errUndelivered)
	if !old.live && (!undelivered || f.undeliveredLogged) {
		return
	}
	if undelivered {
		f.undeliveredLogged = true
		f.opts.Logger.Warn("change notifications lost: not delivered to this process although the database answers; degraded mode: keys and model access already known are served from memory, re-checked with the database in the background once older than heartbeat, for up to max_stale",
			"max_stale", f.opts.MaxStale.String(), "heartbeat", f.opts.Heartbeat.String(), "heartbeat_wait", f.opts.HeartbeatWait.String(), "err", err)
		return
	}
	f.opts.Logger.Warn("change notifications lost: degraded mode; keys and model access already known are served from memory for up to max_stale, anything else gets 503 until the database is back",
		"max_stale", f.opts.MaxStale.String(), "err", err)
}

// notify hands a notification to the subscribers. A heartbeat's is no change: the feed's own
// completes its proof, another process's is skipped.
func (f *Feed) notify(channel, payload string) {
	f.confirm(f.now())
	if channel == store.ChannelAPIKeyChanged && isHeartbeat(payload) {
		if p := f.proof.Load(); p != nil && p.payload == payload {
			p.once.Do(func() { close(p.arrived) })
		}
		return
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch channel {
	case store.ChannelAPIKeyChanged:
		var h [32]byte
		b, err := hex.DecodeString(payload)
		if err != nil || len(b) != len(h) {
			f.opts.Logger.Warn("unreadable key notification; resetting caches", "payload", payload)
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
