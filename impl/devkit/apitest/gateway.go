package apitest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/devkit/redistest"
	"github.com/tollgate/tollgate/impl/gateway"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/upstreamkeys"
)

// Main runs a package's tests and then stops the throwaway PostgreSQL cluster and redis-server
// they may have started. Call it from TestMain.
func Main(m *testing.M) {
	redistest.Begin()
	code := m.Run()
	redistest.Shutdown()
	if err := pgtest.Shutdown(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// Options configure a test gateway.
type Options struct {
	// ConnString is the database; empty means a fresh one for this test. Give two gateways the
	// same ConnString to run two instances on one database.
	ConnString string
	// Config defaults to the built-in configuration.
	Config *config.Config
	// Limiter defaults to an in-process limiter on the real clock.
	Limiter ratelimit.Limiter
	// Sim is the upstream simulator the built-in providers point at; nil starts a fresh one.
	Sim *sim.Simulator
	// Retry overrides the upstream retry policy (tests shorten its delays).
	Retry *provider.RetryPolicy
	// UpstreamHeaderTimeout is the gateway's wait for an upstream answer's head (0: the
	// production value, provider.ResponseHeaderTimeout).
	UpstreamHeaderTimeout time.Duration
	// Heartbeat overrides the stream heartbeat interval.
	Heartbeat time.Duration
	// Router is the gateway's router of fusion experts (nil: a fresh one on the real clock); a
	// test that waits out its health windows gives one on a clock of its own.
	Router *routing.Router
	// DatasetsDir is the dataset storage root; empty means a fresh directory for this test.
	DatasetsDir string
	// DatasetStorage, when set, is the dataset storage instead of DatasetsDir (an object
	// store's cache, say).
	DatasetStorage dataset.Storage
	// UsageSpillDir and UsageSpillMaxBytes are the gateway's (none: usage waits in memory).
	UsageSpillDir      string
	UsageSpillMaxBytes int64
	// BodyReadTimeout is the server's h1server.Server.BodyReadTimeout (its default when zero).
	BodyReadTimeout time.Duration
	// ChangeFeed tunes the change feed and degraded mode (its Logger defaults to the test's
	// log, its Metrics to none).
	ChangeFeed changefeed.Options
	// CreditOutage is the gateway's (the zero value: the meter's defaults).
	CreditOutage billing.OutagePolicy
	// Metrics are the gateway's collectors (nil: none).
	Metrics *metrics.Metrics
	// LogHandler also receives the gateway's log records of every level, beside the test's
	// log (which shows warnings and errors); nil: none.
	LogHandler slog.Handler
	// Listener is where the gateway is served (nil: a new one on 127.0.0.1); a test that must
	// know the address before the configuration (the web application's public URL) makes it.
	Listener net.Listener
	// ShortReservations lets requests cost more than their reservation. By default the test
	// fails at its end when one did (charged beyond it out of the credit hold, or waived): every
	// test through the gateway also checks that the reservation covered what the upstream
	// billed, which the charge beyond it would otherwise hide. A test that makes a reservation
	// fall short on purpose sets it.
	ShortReservations bool
}

// Gateway is one running gateway instance.
type Gateway struct {
	URL        string
	Datasets   *dataset.Service
	Sim        *sim.Simulator
	SimURL     string
	Meter      *billing.Meter
	ConnString string
	Store      *store.Store
	Config     *config.Config
	Accounts   *accounts.Service
	Auth       *auth.Authenticator
	// Readiness holds the gateway's readiness conditions.
	Readiness *health.Readiness
	// Agents is the gateway's agent service (impl/agent).
	Agents *agent.Service

	upstreamConns *atomic.Int64
	gw            *gateway.Gateway
}

// EndStreams ends the gateway's shutdown grace period as tollgate serve does when it is over:
// streams in flight end with their format's in-band error, and requests whose upstream has not
// answered yet are told to retry.
func (g *Gateway) EndStreams() { g.gw.EndStreams() }

// Start runs a gateway for the rest of the test and waits until it receives key revocations.
func Start(t testing.TB, o Options) *Gateway {
	t.Helper()
	ctx := context.Background()
	if o.ConnString == "" {
		o.ConnString = pgtest.ConnString(t)
	}
	if o.Config == nil {
		o.Config = config.Default()
	}
	st, err := store.Open(ctx, o.ConnString)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.LogHandler != nil {
		log = slog.New(teeHandler{log.Handler(), o.LogHandler})
	}
	if o.Sim == nil {
		o.Sim = sim.New(sim.Options{})
	}
	simServer := httptest.NewUnstartedServer(o.Sim)
	upstreamConns := new(atomic.Int64)
	simServer.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			upstreamConns.Add(1)
		}
	}
	simServer.Start()
	t.Cleanup(simServer.Close)
	retry := provider.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: 3 * time.Second}
	if o.Retry != nil {
		retry = *o.Retry
	}
	storage := o.DatasetStorage
	if storage == nil {
		if o.DatasetsDir == "" {
			o.DatasetsDir = t.TempDir()
		}
		dir, err := dataset.NewDirStorage(o.DatasetsDir)
		if err != nil {
			t.Fatal(err)
		}
		storage = dir
	}
	gw, err := gateway.New(gateway.Options{Store: st, Config: o.Config, Logger: log, Limiter: o.Limiter,
		UsageSpillDir: o.UsageSpillDir, UsageSpillMaxBytes: o.UsageSpillMaxBytes,
		SimulatorURL: simServer.URL, Retry: &retry, UpstreamHeaderTimeout: o.UpstreamHeaderTimeout, DatasetStorage: storage, Heartbeat: o.Heartbeat, Router: o.Router, ChangeFeed: o.ChangeFeed,
		CreditOutage: o.CreditOutage, Metrics: o.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); gw.Run(runCtx) }()
	// The gateway is served as tollgate serve serves it: by h1server.
	ln := o.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	srv := &h1server.Server{Handler: gw.Handler, BodyReadTimeout: o.BodyReadTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorBody: gateway.HeadErrorBody, RefusedHead: gateway.RefusedHeads(o.Metrics, log)}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	// Cleanups run last-in first-out: the server shuts down (in-flight requests finish), then
	// the background work stops and the meter drains its usage records, then the datasets close.
	t.Cleanup(func() {
		_ = gw.Close()
		if o.ShortReservations {
			return
		}
		if s := gw.Meter.CreditStats(); s.BeyondReservationRequests > 0 || s.WaivedRequests > 0 {
			t.Errorf("%d requests cost %d micro-units beyond their reservation (charged out of the credit hold) and %d were waived %d: a reservation fell short of what the upstream billed (apitest.Options.ShortReservations, if the test means it)",
				s.BeyondReservationRequests, s.BeyondReservationMicros, s.WaivedRequests, s.WaivedMicros)
		}
	})
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("gateway server shutdown: %v", err)
			_ = srv.Close()
		}
		<-served
	})
	deadline := time.Now().Add(10 * time.Second)
	for !gw.Feed.Live() {
		if time.Now().After(deadline) {
			t.Fatal("the key revocation listener did not connect")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &Gateway{
		URL: "http://" + ln.Addr().String(), Datasets: gw.Datasets, Sim: o.Sim, SimURL: simServer.URL, Meter: gw.Meter, ConnString: o.ConnString, Store: st, Config: o.Config,
		Accounts: &accounts.Service{Store: st, Config: o.Config}, Auth: gw.Auth, Readiness: gw.Readiness, Agents: gw.Agents, upstreamConns: upstreamConns, gw: gw,
	}
}

// UpstreamConnections is how many connections the simulator has accepted so far.
func (g *Gateway) UpstreamConnections() int64 { return g.upstreamConns.Load() }

// Tenant is an account with one key.
type Tenant struct {
	Account store.Account
	Key     string
	KeyID   uuid.UUID
}

// NewTenant creates an account on plan with one key capped at rpm (0: none) and credit.
func (g *Gateway) NewTenant(t testing.TB, name string, rpm int, creditMicros int64) Tenant {
	t.Helper()
	ctx := context.Background()
	acct, err := g.Accounts.CreateAccount(ctx, name, "default")
	if err != nil {
		t.Fatalf("create account %s: %v", name, err)
	}
	if creditMicros > 0 {
		if _, _, err := g.Accounts.GrantCredit(ctx, acct.ID, creditMicros, "test-credit", "test"); err != nil {
			t.Fatal(err)
		}
	}
	k, err := g.Accounts.CreateKey(ctx, acct.ID, name+"-key", rpm)
	if err != nil {
		t.Fatal(err)
	}
	acct, err = g.Store.GetAccount(ctx, acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	return Tenant{Account: acct, Key: k.Plain, KeyID: k.Key.ID}
}

// AssignSlot assigns the agent slot name to the account, as `tollgate admin slot assign` does.
func (g *Gateway) AssignSlot(t testing.TB, accountID uuid.UUID, name string) {
	t.Helper()
	if err := g.Agents.AssignSlot(context.Background(), accountID, name); err != nil {
		t.Fatalf("assign slot %s: %v", name, err)
	}
}

// NewKey mints another key for the tenant's account.
func (g *Gateway) NewKey(t testing.TB, accountID uuid.UUID, rpm int) (string, uuid.UUID) {
	t.Helper()
	k, err := g.Accounts.CreateKey(context.Background(), accountID, "extra", rpm)
	if err != nil {
		t.Fatal(err)
	}
	return k.Plain, k.Key.ID
}

// Client returns an HTTP client whose every response is validated against the OpenAPI document.
func (g *Gateway) Client(t testing.TB) *http.Client {
	return &http.Client{Transport: NewValidatingTransport(t, http.DefaultTransport), Timeout: 30 * time.Second}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// teeHandler hands each record to both handlers, each at its own level.
type teeHandler [2]slog.Handler

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h[0].Enabled(ctx, l) || h[1].Enabled(ctx, l)
}

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, x := range h {
		if x.Enabled(ctx, r.Level) {
			if err := x.Handle(ctx, r.Clone()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h[0].WithAttrs(as), h[1].WithAttrs(as)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h[0].WithGroup(name), h[1].WithGroup(name)}
}

// SetUpstreamKey gives the account its own key for the configured provider, sealed and stored
// as `tollgate admin provider-key set` does (from the database's side: every gateway on it
// drops its cached keys of the account when notified).
func (g *Gateway) SetUpstreamKey(t testing.TB, account uuid.UUID, provider, key string) {
	t.Helper()
	ctx := context.Background()
	secret, err := g.Store.Secret(ctx, sealedid.SecretName)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := upstreamkeys.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := sealer.Seal(account, provider, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: account, Provider: provider, Sealed: sealed,
		Hint: upstreamkeys.Hint(key), SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
}

// RemoveUpstreamKey removes the account's own key for the provider, as `tollgate admin
// provider-key remove` does.
func (g *Gateway) RemoveUpstreamKey(t testing.TB, account uuid.UUID, provider string) {
	t.Helper()
	if err := g.Store.RemoveUpstreamKey(context.Background(), account, provider); err != nil {
		t.Fatal(err)
	}
}
