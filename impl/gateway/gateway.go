// Package gateway assembles one gateway process from its parts: the change feed and the caches
// it drives, authentication, the rate limiter, the upstream providers, metering, the dataset
// engine and the MCP tools, and the HTTP surface. `tollgate serve` and the test harness both
// build the gateway here, so the tests run the wiring that production runs.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/clientaddr"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/httpapi"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/tenanttools"
	"github.com/tollgate/tollgate/impl/usagespill"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/impl/web"
)

// HeadErrorBody gives the Content-Type and body, in the error envelope of the route the
// request target names, of the answers the server that serves Handler writes itself to a
// request head it will not read on (h1server.Server.ErrorBody).
func HeadErrorBody(status int, reason, target string) (contentType string, body []byte) {
	return httpapi.HeadErrorBody(status, reason, target)
}

// RefusedHeads gives what the server that serves Handler tells of each request head it
// refuses before any route (h1server.Server.RefusedHead): counted in m (unless nil) and
// logged to log as a line of the access log (httpapi.RefusedHeads). The server is built before
// the gateway, so it takes the process's metrics and logger, which the gateway is given too.
func RefusedHeads(m *metrics.Metrics, log *slog.Logger) func(h1server.Refusal) {
	return httpapi.RefusedHeads(m, log)
}

// Options are what a gateway is built from.
type Options struct {
	Store  *store.Store
	Config *config.Config
	Logger *slog.Logger
	// Limiter enforces per-key caps (nil: in process).
	Limiter ratelimit.Limiter
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// SimulatorURL is where providers whose base URL is builtin:simulator point.
	SimulatorURL string
	// Retry overrides the upstream retry policy (nil: the defaults).
	Retry *provider.RetryPolicy
	// UpstreamHeaderTimeout bounds the wait for an upstream answer's head (0:
	// provider.ResponseHeaderTimeout); tests shorten it.
	UpstreamHeaderTimeout time.Duration
	// DatasetStorage holds the tenants' datasets.
	DatasetStorage dataset.Storage
	// Heartbeat overrides the stream heartbeat interval (0: the default).
	Heartbeat time.Duration
	// Now is the clock whose day the catalog prices are taken on, by the exchange and the
	// console alike (nil: time.Now; tests move it across a dated price change).
	Now func() time.Time
	// Router orders the fusion models' experts and learns their health (nil: a fresh one on
	// the real clock; tests give one on a clock of their own).
	Router *routing.Router
	// ChangeFeed tunes the change feed and the degraded mode it drives (MaxStale, its
	// heartbeat); its Logger and Metrics default to the gateway's.
	ChangeFeed changefeed.Options
	// Readiness holds the process's readiness conditions, for the parts to register theirs
	// (nil: a private one).
	Readiness *health.Readiness
	// UsageSpillDir is the directory of the usage spill files (impl/usagespill): the meter
	// keeps the usage records the database does not take in the process's file there, and
	// first writes those a process that stopped during an outage left. Empty: they wait in
	// memory only. UsageSpillMaxBytes bounds the file (0: usagespill.DefaultMaxBytes).
	UsageSpillDir      string
	UsageSpillMaxBytes int64
	// CreditOutage is how the meter rides out a database outage: the credit holds' outage
	// reserve, and what it does with the requests they do not cover (the zero value: holds
	// sized for 30 s, the rest refused with 503; see impl/billing).
	CreditOutage billing.OutagePolicy
	// MeterOptions, when set, adjusts the meter's options before the meter is made (`tollgate
	// serve` shortens its lease and intervals for process-level tests: meterTestTimings).
	MeterOptions func(*billing.Options)
	// WebHTTPClient is the web application's client to its OpenID provider (nil: the
	// default); the application is served when Config.Web is enabled.
	WebHTTPClient *http.Client
	// WebRedirectToPublicURL is web.Options.RedirectToPublicURL (`tollgate dev` only).
	WebRedirectToPublicURL bool
}

// Gateway is one assembled gateway process.
type Gateway struct {
	// Handler serves the whole HTTP surface.
	Handler   http.Handler
	Feed      *changefeed.Feed
	Auth      *auth.Authenticator
	Meter     *billing.Meter
	Datasets  *dataset.Service
	Readiness *health.Readiness
	// Agents is the agents service (impl/agent); Run runs its jobs.
	Agents *agent.Service

	agentLog *slog.Logger
	// agentsStopGrace is agents.stop_grace (0 when the jobs are cancelled at once).
	agentsStopGrace time.Duration
	api             *httpapi.Server
	exchange        *exchange.Engine
	web             *web.App // nil when the web application is not configured
	inFlight        inFlight
	spill           *usagespill.Spill
}

// New assembles a gateway; Run starts its background work.
func New(o Options) (*Gateway, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Limiter == nil {
		o.Limiter = ratelimit.NewLocal(nil)
	}
	if o.Readiness == nil {
		o.Readiness = health.New(o.Logger)
	}
	upstreams := provider.FromConfig(o.Config, o.SimulatorURL, provider.NewTransportHeaderTimeout(o.UpstreamHeaderTimeout))
	if o.Retry != nil {
		for _, u := range upstreams {
			u.Retry = *o.Retry
		}
	}
	if o.ChangeFeed.Logger == nil {
		o.ChangeFeed.Logger = o.Logger
	}
	if o.ChangeFeed.Metrics == nil {
		o.ChangeFeed.Metrics = o.Metrics
	}
	feed := changefeed.NewWithOptions(o.Store, o.ChangeFeed)
	// Degraded, not down: a process cut off from its database still serves what it knows.
	o.Readiness.Check("change_feed", func() (health.State, string) {
		if degraded, _ := feed.Degraded(); degraded {
			return health.Degraded, "database notifications lost: known keys served from memory"
		}
		return health.OK, ""
	})
	authn := auth.New(o.Store, feed, auth.Options{Logger: o.Logger})
	var spill *usagespill.Spill
	if o.UsageSpillDir != "" {
		var err error
		if spill, err = usagespill.OpenDir(o.UsageSpillDir, usagespill.Options{MaxBytes: o.UsageSpillMaxBytes}); err != nil {
			return nil, err
		}
	}
	// Holds of up to 100 worst cases keep the database off the hot path at high request rates.
	meterOpts := billing.Options{Logger: o.Logger, ChunkMultiplier: 100, Spill: spill, Outage: o.CreditOutage}
	if o.MeterOptions != nil {
		o.MeterOptions(&meterOpts)
	}
	meter := billing.New(o.Store, meterOpts)
	if o.Metrics != nil {
		o.Metrics.WatchUsageWriter(func() metrics.UsageWriterStats { return metrics.UsageWriterStats(meter.WriterStats()) })
		o.Metrics.WatchCredit(func() metrics.CreditStats { return metrics.CreditStats(meter.CreditStats()) })
	}
	// Usage waiting for the database leaves the process serving; a full backlog does not (the
	// meter refuses every request), so other replicas should take the traffic.
	o.Readiness.Check("usage_writer", func() (health.State, string) {
		switch s := meter.WriterStats(); {
		case s.Full:
			return health.Down, "usage backlog full: requests refused"
		case s.Backlog > 0:
			return health.Degraded, "usage waiting for the database"
		}
		return health.OK, ""
	})
	datasets := dataset.New(o.Store, o.DatasetStorage, dataset.Options{Logger: o.Logger, EngineMemoryBytes: o.Config.Datasets.EngineMemoryBytes()})
	// The one exchange: the HTTP routes and the agents' steps both call it.
	exch := exchange.New(exchange.Options{Config: o.Config, Store: o.Store, Feed: feed, Upstreams: upstreams, Meter: meter,
		Metrics: o.Metrics, Logger: o.Logger, Heartbeat: o.Heartbeat, Router: o.Router, Now: o.Now})
	agents, err := agent.New(agent.Options{Store: o.Store, Config: o.Config, Tools: tenanttools.Tools(datasets),
		Exchange: exch, KeyPrincipal: authn.KeyPrincipal, Logger: o.Logger})
	// fail releases what was built so far when the gateway cannot be built.
	fail := func(err error) (*Gateway, error) {
		exch.Close()
		_ = datasets.Close()
		if spill != nil {
			_ = spill.Close()
		}
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	if o.Metrics != nil {
		o.Metrics.WatchAgents(agents.EndingsLeft, agents.SessionsLeft)
	}
	// With the web console, MCP clients may sign in with OAuth: the console is the
	// authorization server of /api/mcp (impl/mcpauth).
	var oauth *mcpauth.Server
	if o.Config.Web.Enabled() {
		if oauth, err = mcpauth.New(mcpauth.Options{Store: o.Store, PublicURL: o.Config.Web.PublicURL, Logger: o.Logger, Agents: agents}); err != nil {
			return fail(err)
		}
	}
	// The web application (when configured) serves its own paths; the rest stay the API's,
	// which shows a browser the console's "not found" page for a path nobody serves.
	var app *web.App
	var pageNotFound http.Handler
	if o.Config.Web.Enabled() {
		if app, err = web.New(web.Options{Store: o.Store, Config: o.Config, Logger: o.Logger, HTTPClient: o.WebHTTPClient,
			Datasets: datasets, Agents: agents, OAuth: oauth, Meter: meter, Models: exch.Model, UnreachableModels: exch.UnreachableModels, RedirectToPublicURL: o.WebRedirectToPublicURL,
			UsageArchive: usageArchiveFiles(o.DatasetStorage)}); err != nil {
			return fail(err)
		}
		pageNotFound = app.NotFoundPage()
	}
	srv, err := httpapi.New(httpapi.Options{
		Store: o.Store, Config: o.Config, Auth: authn, Limiter: o.Limiter, Metrics: o.Metrics, Logger: o.Logger,
		Exchange: exch, Meter: meter, Agents: agents, OAuth: oauth, PageNotFound: pageNotFound,
		MCP: mcp.NewHandler(mcp.Options{Tools: slices.Concat(tenanttools.Tools(datasets), tenanttools.AgentTools(agents), tenanttools.CreditTools(meter)), Logger: o.Logger,
			AllowedOrigins: mcpOrigins(o.Config), Metrics: o.Metrics}),
	})
	if err != nil {
		return fail(err)
	}
	agentsCfg := o.Config.Agents
	agentsCfg.ApplyDefaults()
	g := &Gateway{Feed: feed, Auth: authn, Meter: meter, Datasets: datasets, Readiness: o.Readiness, api: srv, exchange: exch, spill: spill,
		Agents: agents, agentLog: o.Logger, agentsStopGrace: max(agentsCfg.StopGrace, 0)}
	g.inFlight.next = srv.Handler()
	if app != nil {
		g.web = app
		g.inFlight.next = web.Mount(app, g.inFlight.next)
	}
	// Behind the load balancers of server.trusted_proxies, the limits per client address
	// (sign-ins, OAuth registrations) see each client's address, not the balancer's.
	trusted, err := o.Config.Server.TrustedProxyPrefixes()
	if err != nil {
		_ = g.Close()
		return nil, err
	}
	g.Handler = clientaddr.Handler(&g.inFlight, trusted)
	return g, nil
}

// The bounds of Run's stop, which a database that hangs (connections accepted, nothing
// answered) would otherwise stretch to the timeouts of every call in flight.
const (
	// agentsQuietWait is how long the meter's drain waits for the agents' job runner to stop
	// while none of its jobs runs: its own calls to a hung database (a fetch, its leader's
	// resignation) end only at their timeouts, and no usage waits on them.
	agentsQuietWait = 500 * time.Millisecond
	// agentsStopSlack is how long past agents.stop_grace (when the runner cancels the jobs still
	// running) the drain waits for them: a job stuck on a hung database is left, and its model
	// call, if it settles after the drain, has its record written at once or kept in the spill
	// file (billing.Reservation.Settle).
	agentsStopSlack = 2 * time.Second
	// restStopWait bounds the wait, once the meter has drained, for the change feed and the
	// keys' last-use times (both told to stop when the drain began): neither holds usage.
	restStopWait = time.Second
)

// Run runs the background work until ctx ends: change notifications, last-use times of keys,
// the agents' jobs and the meter. Then the agents' running jobs finish (or are cancelled, to
// run again on another process), and the meter drains: it writes every usage record still
// queued and returns every credit hold of the process to its account (so end ctx once the HTTP
// server has finished its requests: see WaitIdle). The rest stops, and Run returns the drain's
// error (usage not written or holds not returned, which the reaper of another process then
// returns when their lease expires).
//
// Run returns in bounded time whatever the database does: the drain waits for the agents'
// jobs at most until agents.stop_grace and agentsStopSlack have passed, and for the job runner
// at most agentsQuietWait once none of its jobs runs (a runner not stopped by then is left to
// the process's exit); the drain takes at most the meter's DrainTimeout, keeping in the spill
// file what the database does not take; the rest is waited for at most restStopWait.
func (g *Gateway) Run(ctx context.Context) error {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { g.Feed.Run(bg) })
	wg.Go(func() { g.Auth.Run(bg) })
	// The agents' jobs stop first (see awaitAgents); then the meter drains.
	meterCtx, endMeter := context.WithCancel(context.WithoutCancel(ctx))
	defer endMeter()
	agentsDone := make(chan struct{})
	go func() {
		defer close(agentsDone)
		g.runAgents(ctx)
	}()
	go func() {
		<-ctx.Done()
		g.awaitAgents(agentsDone)
		endMeter()
		// The change feed and the keys' last-use times stop while the meter drains.
		stop()
	}()
	err := g.Meter.Run(meterCtx)
	stop()
	rest := make(chan struct{})
	go func() {
		wg.Wait()
		close(rest)
	}()
	select {
	case <-rest:
	case <-time.After(restStopWait):
		g.agentLog.Warn("shutdown: the change feed or the keys' last-use times still stopping (the database does not answer); leaving them", "waited", restStopWait.String())
	}
	return err
}

// awaitAgents waits, once the gateway is stopping, until the agents' job runner has stopped
// (done is closed), or none of its jobs has run for agentsQuietWait from the start of the
// wait, or agents.stop_grace and agentsStopSlack have passed: the meter drains then (a runner
// not stopped by then is left to the process's exit).
func (g *Gateway) awaitAgents(done <-chan struct{}) {
	began := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		waited, working := time.Since(began), g.Agents.Working()
		if (working == 0 && waited >= agentsQuietWait) || waited >= g.agentsStopGrace+agentsStopSlack {
			g.agentLog.Warn("shutdown: the agents' job runner has not stopped (the database does not answer?); the meter drains without waiting for it",
				"jobs_running", working, "waited", waited.Round(time.Millisecond).String())
			return
		}
	}
}

// EndStreams ends every stream still in flight with its format's in-band error, billing what
// each produced: a shutdown calls it when its grace period is over.
// The web application's live tails of agent sessions end too (their browsers reconnect).
func (g *Gateway) EndStreams() {
	g.api.EndStreams()
	if g.web != nil {
		g.web.EndStreams()
	}
}

// InFlight is the number of requests the Handler is serving.
func (g *Gateway) InFlight() int64 { return g.inFlight.n.Load() }

// WaitIdle waits until the Handler serves no request, or ctx ends (then it returns ctx's
// error). After the HTTP server has shut down, a request may still be running: one whose
// connection was closed under it finishes (and settles its cost) only when its handler notices.
func (g *Gateway) WaitIdle(ctx context.Context) error {
	const pollMax = 100 * time.Millisecond
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for g.inFlight.n.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, pollMax)
			timer.Reset(wait)
		}
	}
	return nil
}

// inFlight counts the requests its handler is serving: two atomic additions a request, so that
// a shutdown can wait for the last settlement before the meter drains.
type inFlight struct {
	n    atomic.Int64
	next http.Handler
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.n.Add(1)
	defer f.n.Add(-1)
	f.next.ServeHTTP(w, r)
}

// Close releases the dataset engine and the usage spill file; call it after Run has returned.
func (g *Gateway) Close() error {
	g.exchange.Close()
	err := g.Datasets.Close()
	if g.spill != nil {
		err = errors.Join(err, g.spill.Close())
	}
	return err
}

// usageArchiveFiles is the dataset store as the files of archived usage months (the Usage
// page reads them through DuckDB): nil when the store has no local files to read.
func usageArchiveFiles(s dataset.Storage) usageview.ArchiveFiles {
	if ls, ok := s.(dataset.LocalStorage); ok {
		return ls
	}
	return nil
}

// mcpOrigins are the browser origins the MCP endpoint serves besides the request's own host:
// server.mcp_allowed_origins, and web.public_url's origin (the gateway's address as browsers
// see it, which a proxy in front may not pass on as the Host).
func mcpOrigins(cfg *config.Config) []string {
	origins := slices.Clone(cfg.Server.MCPAllowedOrigins)
	if u, err := url.Parse(cfg.Web.PublicURL); err == nil && u.Scheme != "" && u.Host != "" {
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	return origins
}
