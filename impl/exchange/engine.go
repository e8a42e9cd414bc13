package exchange

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/store"
)

// DefaultHeartbeat is how long a stream may stay silent before its caller sends a keep-alive
// when Options.Heartbeat is not set.
const DefaultHeartbeat = 15 * time.Second

// Options are what an Engine is built from.
type Options struct {
	// Config holds the models the gateway offers (the registry is built from it).
	Config *config.Config
	// Store and Feed back the cache of which models each account may use: the store reads an
	// account's grants, the feed pushes their changes. Feed may be nil (the cache then trusts an
	// entry for its TTL).
	Store *store.Store
	Feed  *changefeed.Feed
	// Upstreams are the configured providers by name, ready to call.
	Upstreams map[string]*provider.Upstream
	// Meter reserves and settles the cost of every exchange.
	Meter *billing.Meter
	// Router orders a fusion model's experts; nil means a fresh one.
	Router *routing.Router
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Logger may be nil (slog.Default).
	Logger *slog.Logger
	// Heartbeat is the keep-alive interval of streamed answers (DefaultHeartbeat when not
	// set): a caller writing a stream sends a keep-alive after this long without an event, and
	// an upstream silent for MaxSilentHeartbeats of them in a row is cut off.
	Heartbeat time.Duration
	// Now is the clock whose day the catalog prices are taken on (nil: time.Now).
	Now func() time.Time
}

// Engine runs inference exchanges for every caller: the HTTP routes, the Responses WebSocket
// and the agents. It is safe for concurrent use.
type Engine struct {
	// registry holds the models, priced for the current day (prices.go).
	registry  atomic.Pointer[routing.Registry]
	config    *config.Config
	now       func() time.Time
	priceMu   sync.Mutex
	priceTime *time.Timer // fires when a catalog price the configuration names changes
	closed    bool        // Close was called: the prices are not renewed
	priceNext time.Time   // when it fires (zero: no change ahead)
	router    *routing.Router
	upstreams map[string]*provider.Upstream
	meter     *billing.Meter
	access    *modelAccess
	metrics   *metrics.Metrics
	log       *slog.Logger
	heartbeat time.Duration
	// streamsEnd ends when EndStreams is called: every stream still in flight then ends with
	// its format's in-band error (see Stream).
	streamsEnd context.Context
	endStreams context.CancelFunc
}

// New builds an Engine; it starts nothing.
func New(o Options) *Engine {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Router == nil {
		o.Router = routing.NewRouter(nil)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	streamsEnd, endStreams := context.WithCancel(context.Background())
	eng := &Engine{
		config: o.Config, now: o.Now, router: o.Router, upstreams: o.Upstreams, meter: o.Meter,
		access: newModelAccess(o.Store, o.Feed, o.Upstreams, o.Logger), metrics: o.Metrics, log: o.Logger, heartbeat: o.Heartbeat,
		streamsEnd: streamsEnd, endStreams: endStreams,
	}
	eng.reprice()
	return eng
}

// EndStreams ends every stream in flight, and any that starts later, with its format's in-band
// error (the gateway is shutting down; retry), billing what each produced. A shutdown calls it
// when its grace period is over.
func (eng *Engine) EndStreams() { eng.endStreams() }

// errShuttingDown is the error of a request whose upstream had not begun its answer when a
// shutdown's grace period ended: the client retries, on another process.
var errShuttingDown = &apierror.Error{Kind: apierror.KindOverloaded, Message: "the gateway is shutting down; retry the request"}

// upstreamContext is ctx for an exchange's upstream calls, also cancelled when EndStreams is
// called, until unlink cuts that link (which it reports it did before EndStreams, as
// context.AfterFunc's stop does). It costs a context and a registration a request.
func (eng *Engine) upstreamContext(ctx context.Context) (callCtx context.Context, unlink func() bool) {
	callCtx, cancel := context.WithCancel(ctx)
	return callCtx, context.AfterFunc(eng.streamsEnd, cancel)
}

// StreamsEnd is done once EndStreams has been called: the callers' own long-lived streams end
// with it too.
func (eng *Engine) StreamsEnd() context.Context { return eng.streamsEnd }

// Heartbeat is the keep-alive interval of streamed answers (Options.Heartbeat).
func (eng *Engine) Heartbeat() time.Duration { return eng.heartbeat }

// Grants returns the account's model grants from the cache every exchange reads (kept current
// by the change feed): during a database outage, an account's list already in memory answers
// within the feed's staleness bound. Its error is a dependency failure (apierror.Unavailable).
func (eng *Engine) Grants(ctx context.Context, account uuid.UUID) (*Grants, error) {
	return eng.access.grants(ctx, account)
}

// Reachable reports whether the account whose grants are g may be sent to some expert of model
// m: one on a provider that serves every account, or on one that takes only accounts with a
// key of their own (account_keys: required) for which the account has one, even one that does
// not open (its requests then get the 503 saying so). A model it may not be sent to is not
// listed to it (the models route), as a provider lists only the models a key can use; a
// request to it still gets the 403 naming the provider and what the operator must do, and so
// do the routes that name it without calling it (ResolveModel). It reads the keys of the same
// cache entry as the grants, so it follows a key set or removed as soon as they do.
func (eng *Engine) Reachable(g *Grants, m *routing.Model) bool {
	return eng.keyRequiredBy(g, m) == ""
}

// RequireReachable is nil when the account may be sent to some expert of the model with id
// (Reachable), and otherwise the 403 upstream_key_required its requests get, for a caller that
// settles on a model before any call to it (an agent session's spawn); an unknown model is
// nil, for the caller's own check to name.
func (eng *Engine) RequireReachable(ctx context.Context, account uuid.UUID, id string) error {
	m, ok := eng.registry.Load().Model(id)
	if !ok {
		return nil
	}
	g, err := eng.access.grants(ctx, account)
	if err != nil {
		return err
	}
	if provider := eng.keyRequiredBy(g, m); provider != "" {
		return upstreamKeyRequired(provider)
	}
	return nil
}

// UnreachableModels are the models granted to the account that it may not be sent to
// (Reachable is false), each with the provider whose upstream key of its own the account lacks:
// the one a request's 403 names. A model the configuration no longer has is left out. It is for
// the console, which offers a model only where it can be called and says why the others cannot;
// it reads the same cache entry as the requests (Grants), so it follows a key set or removed as
// they do. nil when every granted model is reachable.
func (eng *Engine) UnreachableModels(ctx context.Context, account uuid.UUID) (map[string]string, error) {
	g, err := eng.access.grants(ctx, account)
	if err != nil {
		return nil, err
	}
	reg := eng.registry.Load()
	var out map[string]string
	for _, grant := range g.list {
		m, ok := reg.Model(grant.ModelID)
		if !ok {
			continue
		}
		if provider := eng.keyRequiredBy(g, m); provider != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[grant.ModelID] = provider
		}
	}
	return out, nil
}

// keyRequiredBy is "" when the account whose grants are g may be sent to some expert of model
// m (Reachable); otherwise the provider of m's last expert in the configuration's order, every
// one of which takes only accounts with a key of their own, which the account has none of (a
// request names the last its router's order tried, the same one for a model on one provider).
func (eng *Engine) keyRequiredBy(g *Grants, m *routing.Model) string {
	last := ""
	for _, e := range m.Experts {
		up, ok := eng.upstreams[e.Provider]
		if !ok || !up.AccountKeysRequired {
			return ""
		}
		if _, ok := g.upstreamKeys[e.Provider]; ok {
			return ""
		}
		last = e.Provider
	}
	return last
}

// Model is the configured model id as the engine holds it today: its experts priced for the
// current day, the registry its reservations and bills read (the models route shows these
// prices); false for an id the configuration does not have. It does not check access.
func (eng *Engine) Model(id string) (*routing.Model, bool) {
	return eng.registry.Load().Model(id)
}

// logger returns a logger carrying the request id (built only when something is logged).
func (eng *Engine) logger(requestID string) *slog.Logger {
	if requestID == "" {
		return eng.log
	}
	return eng.log.With("request_id", requestID)
}
