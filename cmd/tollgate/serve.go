package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/gateway"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/health"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/pgcluster"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagearchive"
	"github.com/tollgate/tollgate/impl/usagespill"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// The defaults of the shutdown (see runServe and the README): the grace period in-flight
// requests and streams get after SIGTERM, how long the shutdown then waits for the streams it
// ended, and for requests whose connection it closed, to finish and settle, and how long the
// meter's drain may take once they have (drainWait: the last usage records written, the
// process's credit holds returned). Against a database that hangs, what the drain could not
// write is kept in the spill file for the next process (billing.Meter.Close), and the holds
// return when their lease expires.
const (
	defaultShutdownGrace = 20 * time.Second
	endStreamsWait       = 5 * time.Second
	settleWait           = 5 * time.Second
	drainWait            = 5 * time.Second
)

// runServe serves the API until ctx ends (SIGINT/SIGTERM), then shuts down gracefully.
//
// Start-up: the API address is taken first, then the metrics listener serves /healthz
// (liveness) and /readyz (readiness, 503 until the process can serve). When the database is
// unreachable, start-up waits for it with backoff (-database-wait, default for ever) instead of
// exiting. The API listener answers from the start: every request at once 503 with
// Retry-After, in its route's envelope, until the gateway is assembled and takes over
// (apiHandover).
//
// Shutdown: readiness goes not ready at once ("shutting down"); after -shutdown-delay (default
// 0) the API listener closes (new connections are refused) and idle connections are closed.
// In-flight requests and streams get -shutdown-grace (default 20 s) to finish; then the streams
// still running end with their format's in-band error (billed for what they produced), and
// after a further endStreamsWait the connections still open are closed. Once no request is
// running (or settleWait has passed), the meter writes every usage record and returns every
// credit hold (within drainWait; what a database that hangs does not take stays in the spill
// file), and the process exits: in bounded time whatever the database does
// (gateway.Gateway.Run, database.Close). A second SIGINT or SIGTERM ends the delay and the grace
// period at once.
func runServe(ctx context.Context, args []string, dev bool) error {
	name := "serve"
	if dev {
		name = "dev"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (default: TOLLGATE_CONFIG or the built-in configuration)")
	listen := fs.String("listen", "", "API listen address (overrides the config)")
	metricsListen := fs.String("metrics-listen", "", "metrics listen address (overrides the config; \"off\" disables it)")
	maxConns := fs.Int("max-connections", 0, "the API listener's open connections at most (overrides server.max_connections; -1: no bound)")
	maxConnsPerAddr := fs.Int("max-connections-per-address", 0, "one client address's open API connections at most (overrides server.max_connections_per_address; -1: no bound)")
	grace := fs.Duration("shutdown-grace", defaultShutdownGrace, "after SIGTERM, how long in-flight requests and streams may run before the streams are ended with an in-band error")
	delay := fs.Duration("shutdown-delay", 0, "after SIGTERM, how long to keep accepting requests while /readyz says not ready, for load balancers to notice")
	dbWait := fs.Duration("database-wait", 0, "how long start-up waits for an unreachable database before giving up (0: for ever)")
	spillDir := fs.String("usage-spill", usageSpillDir(), "directory of the usage spill files, which keep the usage records the database does not take until it does (\"off\": in memory only, lost with the process)")
	spillMB := fs.Int64("usage-spill-max-mb", usagespill.DefaultMaxBytes>>20, "bound of the process's usage spill file in MiB; when it is full (its last eighth is kept for the requests in flight), new requests get 503")
	maxStale := fs.Duration("max-stale", changefeed.DefaultMaxStale, "how long keys, caps and model grants already known keep serving while the database is unreachable")
	outageCover := fs.Duration("credit-outage-cover", billing.DefaultOutageCover, "how long a database outage the credit holds of active accounts are sized to ride out, at each account's recent spend rate (0: no outage reserve)")
	failureHandling := fs.String("credit-failure-handling", billing.FailureShare.String(), "what a request gets when its account's credit hold is spent while the database is unreachable: share (served on credit up to this process's share, 1/replicas, of the account's last-known available credit, billed when the database is back), refuse (503) or continue (served on credit up to -credit-risk-micros)")
	profiles := fs.Bool("pprof", dev, "serve Go's profiles (/debug/pprof/) on the metrics listener, to whoever reaches it: heap and goroutine dumps, CPU profiles and execution traces of any length (default: on for dev, off for serve)")
	riskMicros := fs.Int64("credit-risk-micros", billing.DefaultRiskMicros, "under -credit-failure-handling continue, the most credit served on credit per account and process before the ledger takes it (1 USD = 1000000)")
	simListen := fs.String("simulator-listen", "127.0.0.1:0", "the built-in upstream simulator's address, a loopback one (default: a free port), when a provider is builtin:simulator")
	devOIDCListen := new(string)
	if dev {
		fs.StringVar(devOIDCListen, "dev-oidc-listen", "127.0.0.1:0", "the development OpenID provider's address, a loopback one (default: a free port), when the configuration names no provider")
	}
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return err
	}
	if *grace < 0 || *delay < 0 || *dbWait < 0 {
		return usageError("-shutdown-grace, -shutdown-delay and -database-wait take durations of 0 or more")
	}
	if *spillMB <= 0 || *spillMB > 1<<20 {
		return usageError("-usage-spill-max-mb takes a size of 1 to 1048576 MiB")
	}
	if *spillDir == "off" {
		*spillDir = ""
	}
	handling, err := billing.ParseFailureHandling(*failureHandling)
	if err != nil {
		return usageError("-credit-failure-handling takes share, refuse or continue")
	}
	if *outageCover < 0 || *riskMicros <= 0 {
		return usageError("-credit-outage-cover takes a duration of 0 or more, -credit-risk-micros a positive amount")
	}
	if !loopbackAddr(*simListen) {
		return usageError("-simulator-listen takes a loopback address and port, such as 127.0.0.1:18090")
	}
	if dev && !loopbackAddr(*devOIDCListen) {
		return usageError("-dev-oidc-listen takes a loopback address and port, such as 127.0.0.1:18091")
	}
	if !dev && os.Getenv("DATABASE_URL") == "" {
		// Said before a listener is taken or a line logged: serve runs on no local cluster.
		return withHelp(usageError("DATABASE_URL is not set: serve runs on the PostgreSQL it names (tollgate dev starts a local one)"),
			"tollgate -h", "the environment it reads")
	}
	creditOutage := billing.OutagePolicy{Cover: *outageCover, FailureHandling: handling, RiskMicros: *riskMicros}
	meterTiming, err := meterTestTimings()
	if err != nil {
		return err
	}
	meterOptions := func(o *billing.Options) {
		o.DrainTimeout = drainWait
		if meterTiming != nil {
			meterTiming(o)
		}
	}
	if *outageCover == 0 {
		creditOutage.Cover = -1 // no outage reserve
	}
	format := "json"
	if dev {
		format = "text"
	}
	log, sink := newBufferedLogger(format)
	defer sink.Close()
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	// dev on its built-in configuration (no -config, no TOLLGATE_CONFIG) of the real providers
	// sends no request without a key: a fusion model's experts on a provider whose key is not
	// set are left out (dropKeylessExperts), and the banner says so.
	builtinConfig := *configPath == "" && os.Getenv("TOLLGATE_CONFIG") == ""
	var droppedExperts map[string][]string
	if dev && builtinConfig {
		droppedExperts = dropKeylessExperts(cfg)
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	if *maxConns != 0 {
		cfg.Server.MaxConnections = *maxConns
	}
	if *maxConnsPerAddr != 0 {
		cfg.Server.MaxConnectionsPerAddress = *maxConnsPerAddr
	}
	cfg.Web.ClientSecret = os.Getenv("TOLLGATE_OIDC_CLIENT_SECRET")
	switch *metricsListen {
	case "":
	case "off":
		cfg.Server.MetricsListen = ""
	default:
		cfg.Server.MetricsListen = *metricsListen
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(cfg.Server.GCPercent)
	}
	applyMemoryLimit(cfg, log)
	log.Info("runtime monitor", "state", monitorAwake)
	// The API address is taken first: when it is busy, nothing else has happened yet (dev has
	// not created its demo account, whose key is shown only once).
	apiLn, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	defer apiLn.Close()
	var connLimiter *connLimit
	if n, perAddress := cfg.Server.ConnectionLimit(), cfg.Server.ConnectionsPerAddress(); n > 0 || perAddress > 0 {
		// Connections held open cannot take every descriptor, nor the memory each holds:
		// beyond n, new ones wait in the kernel's queue (trial h5: 20,000 connections without
		// a key took the process's descriptors, and /readyz with them); nor can one address
		// hold them all (trial h16 D1), but for the load balancers in front.
		trusted, err := cfg.Server.TrustedProxyPrefixes()
		if err != nil {
			return err
		}
		// A proxy on the same host connects from loopback: exempt from the share too (but its
		// X-Forwarded-For is believed only when it is listed: impl/clientaddr).
		trusted = append(trusted, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
		connLimiter = limitConnections(apiLn, n, perAddress, trusted, log)
		apiLn = connLimiter
		log.Info("connection limit", "max_connections", n, "max_connections_per_address", perAddress, "trusted_proxies", cfg.Server.TrustedProxies)
	}

	// Readiness: not ready until the gateway serves, and again from the first signal on.
	ready := health.New(log)
	startup := ready.Condition("startup", health.Down, "starting")
	shutdown := ready.Condition("shutdown", health.OK, "")
	m := metrics.New()
	if connLimiter != nil {
		m.WatchConnectionsRefused(connLimiter.Refused)
	}
	// Traces, when an OTLP endpoint is configured (the telemetry section or OTEL_*): spans the
	// backend cannot take are dropped and counted, never waited for; the rest are flushed at
	// exit, for at most traceFlushWait.
	tracing, err := startTracing(ctx, cfg, m, log)
	if err != nil {
		return err
	}
	defer stopTracing(tracing, log)
	errc := make(chan error, 2)
	// The API answers from the start, while the database is awaited: every request at once 503
	// with Retry-After in its route's envelope, until the gateway's handler takes over
	// (apiHandover, dbwait.go). The API listener is served by h1server: plain HTTP/1.1 requests
	// on its lean path, every other connection by net/http (see impl/h1server). A stalled upload
	// loses its connection after BodyReadTimeout without a byte.
	api := newAPIHandover(startup, m, dev || cfg.Web.Enabled())
	httpSrv := &h1server.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		BodyReadTimeout: 60 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorBody: gateway.HeadErrorBody, RefusedHead: gateway.RefusedHeads(m, log)}
	go func() { errc <- httpSrv.Serve(apiLn) }()
	handedOver := false
	defer func() {
		if !handedOver {
			stopBeforeHandover(httpSrv)
		}
	}()
	// The probes answer from the start, while the database is awaited, until the very end.
	metricsSrv := serveMetrics(cfg.Server.MetricsListen, *profiles, m, ready, log, errc)
	if metricsSrv != nil {
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = metricsSrv.Shutdown(sctx)
		}()
	}

	d, err := openDatabaseWaiting(ctx, dev, log, *dbWait, startup)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("shutting down before the database was reached")
			return nil
		}
		return err
	}
	defer d.Close()

	var demoKey string
	if dev {
		if demoKey, err = seedDemo(ctx, &accounts.Service{Store: d.Store, Config: cfg}); err != nil {
			return fmt.Errorf("seed demo account: %w", err)
		}
	}

	// dev signs in through its own development OpenID provider unless one is configured.
	var devSignIn *devWeb
	if dev {
		if devSignIn, err = startDevWeb(ctx, cfg, d.Store, apiLn.Addr().String(), *devOIDCListen, log); err != nil {
			return err
		}
		defer devSignIn.Close()
	}

	// The replica count shares out each key's rate cap while Redis is down and each account's
	// last-known available credit while the database is (-credit-failure-handling share): the
	// count the Redis limiter learns from its heartbeats, or TOLLGATE_REPLICAS.
	replicas := 1
	if v := os.Getenv("TOLLGATE_REPLICAS"); v != "" {
		if replicas, err = strconv.Atoi(v); err != nil || replicas < 1 {
			return fmt.Errorf("TOLLGATE_REPLICAS: %q is not a positive integer", v)
		}
	}
	creditOutage.Replicas = func() int { return replicas }
	var limiter ratelimit.Limiter = ratelimit.NewLocal(nil)
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		ratelimit.TuneClientOptions(opt)
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		// A Redis that is down, at start-up as later, is an outage: the limiter limits per
		// process, each cap shared out by replica count, until Redis answers again.
		fallback := ratelimit.NewFallback(rdb, "tollgate:rpm:", ratelimit.FallbackOptions{
			Replicas: replicas, Logger: log,
			OnChange: func(down bool) {
				if down {
					m.RateLimiterFallback.Set(1)
				} else {
					m.RateLimiterFallback.Set(0)
				}
			},
		})
		defer fallback.Close()
		limiter = fallback
		creditOutage.Replicas = fallback.Replicas
		log.Info("per-key rate limits are shared through Redis")
	}

	upstreamURL := ""
	if provider.UsesSimulator(cfg) {
		simLn, err := net.Listen("tcp", *simListen)
		if err != nil {
			return err
		}
		simSrv := &http.Server{Handler: sim.New(sim.Options{}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = simSrv.Serve(simLn) }()
		defer simSrv.Close()
		upstreamURL = "http://" + simLn.Addr().String()
		log.Info("built-in upstream simulator serving the builtin:simulator providers", "addr", simLn.Addr().String())
	}
	for _, p := range cfg.Providers {
		if p.BaseURL != config.SimulatorURL && p.APIKey == "" {
			log.Warn("provider has no API key", "provider", p.Name, "env", p.APIKeyEnv)
		}
	}
	for _, id := range sortedKeys(droppedExperts) {
		log.Warn("fusion model routes only to its experts with a key", "model", id, "left_out", droppedExperts[id])
	}
	storage, closeStorage, err := openDatasetStorage(ctx, cfg, "", log)
	if err != nil {
		return fmt.Errorf("dataset storage: %w", err)
	}
	defer closeStorage()
	gw, err := gateway.New(gateway.Options{Store: d.Store, Config: cfg, Logger: log, Limiter: limiter, Metrics: m,
		SimulatorURL: upstreamURL, DatasetStorage: storage, Readiness: ready,
		UsageSpillDir: *spillDir, UsageSpillMaxBytes: *spillMB << 20, ChangeFeed: changefeed.Options{MaxStale: *maxStale},
		CreditOutage: creditOutage, WebRedirectToPublicURL: devSignIn.redirectsToPublicURL(), MeterOptions: meterOptions})
	if err != nil {
		return err
	}
	defer gw.Close()
	if dev {
		if err := seedDemoAgents(ctx, d.Store, gw.Agents, gw.Datasets); err != nil {
			return fmt.Errorf("seed demo agent slot and dataset: %w", err)
		}
	}
	// The background work outlives the HTTP server: the meter drains the last requests' usage.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	bgDone := make(chan error, 1)
	go func() { bgDone <- gw.Run(bg) }()
	// The usage table's partitions ahead and its retention (impl/usagearchive), on every
	// replica: each step is safe to run on several at once.
	uc := cfg.Usage.WithDefaults()
	go usagearchive.New(usagearchive.Options{Usage: usageview.New(d.Store.Pool(), usageview.Options{}), Storage: storage,
		RetentionMonths: uc.RetentionMonths, AheadMonths: uc.PartitionsAhead, Logger: log}).Run(bg, uc.CheckInterval)

	// The gateway serves every request from here on, on the connections already open too.
	if refused := api.handOver(gw.Handler); refused > 0 {
		log.Info("requests answered 503 while starting", "requests", refused)
	}
	handedOver = true
	startup.Set(health.OK, "")
	log.Info("tollgate listening", "addr", apiLn.Addr().String())
	if dev {
		printDevBanner(apiLn.Addr().String(), demoKey, d.where, upstreamsBanner(cfg, builtinConfig, droppedExperts))
		fmt.Fprint(os.Stdout, demoAgentBanner(apiLn.Addr().String(), onlySimulated(cfg)))
		fmt.Fprint(os.Stdout, devSignIn.banner())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	// A second signal cuts the delay and the grace period short; it is listened for before
	// readiness says the shutdown has begun.
	again := make(chan os.Signal, 1)
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(again)
	shutdown.Set(health.Down, "shutting down")
	log.Info("shutting down: finishing in-flight requests", "grace", grace.String(), "delay", delay.String(), "in_flight", gw.InFlight())
	drainAPI(httpSrv, gw, *delay, *grace, again, log)

	// Every request has settled (or settleWait is over): the meter writes the last usage records
	// and returns the process's credit holds.
	stopBackground()
	if err := <-bgDone; err != nil {
		log.Error("shutdown: usage or credit holds not drained (holds return when their lease expires)", "err", err)
	} else {
		log.Info("shutdown: usage written, credit holds returned")
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// drainAPI stops the API server as runServe's doc describes, and returns once no request is
// running or settleWait has passed after the connections were closed. A signal on again cuts
// the delay and the grace period short.
func drainAPI(srv *h1server.Server, gw *gateway.Gateway, delay, grace time.Duration, again <-chan os.Signal, log *slog.Logger) {
	// The goroutine that listens for the second signal ends with drainAPI.
	hurry, hurried := context.WithCancel(context.Background())
	defer hurried()
	go func() {
		select {
		case <-again:
			log.Warn("second signal: ending the shutdown's grace period now")
			hurried()
		case <-hurry.Done():
		}
	}()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-hurry.Done():
			t.Stop()
		}
	}
	graceCtx, cancel := context.WithTimeout(hurry, grace)
	defer cancel()
	err := srv.Shutdown(graceCtx)
	if err == nil {
		// Connections their handler took over (the Responses WebSocket mode) are not the
		// server's any more: its Shutdown closed the idle ones and does not wait for the busy
		// ones, whose requests are still in flight. They get the rest of the grace period too,
		// and then end as the streams do.
		err = gw.WaitIdle(graceCtx)
	}
	if err != nil {
		log.Warn("shutdown: grace period over; ending the streams still in flight with an error", "in_flight", gw.InFlight())
		gw.EndStreams()
		endCtx, cancel := context.WithTimeout(context.Background(), endStreamsWait)
		defer cancel()
		if err := srv.Shutdown(endCtx); err != nil {
			log.Warn("shutdown: closing the connections still open", "in_flight", gw.InFlight())
			_ = srv.Close()
		}
	}
	settleCtx, cancel := context.WithTimeout(context.Background(), settleWait)
	defer cancel()
	if err := gw.WaitIdle(settleCtx); err != nil {
		log.Error("shutdown: requests still running; their usage may not be written", "in_flight", gw.InFlight())
	}
}

// maxMetricsConnections bounds the connections the metrics listener holds at once; more wait
// in the kernel's queue until one closes.
const maxMetricsConnections = 256

// serveMetrics serves the metrics listener at addr, when set: Prometheus /metrics, the
// liveness probe /healthz (the process runs: it says nothing of the database, so that an
// outage does not get every gateway restarted), the readiness probe /readyz (health), and,
// with profiles (-pprof), Go's profiles for operators. It returns the server (nil when addr is
// empty or cannot be listened on, which is logged); its Serve error goes to errc.
func serveMetrics(addr string, profiles bool, m *metrics.Metrics, ready *health.Readiness, log *slog.Logger, errc chan<- error) *http.Server {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	if profiles {
		// On the metrics listener only (never on the API listener), and only when asked for:
		// the listener is one a load balancer reaches (for /readyz), and a profile shows the
		// process's insides and costs its CPU for as long as the caller asks.
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /readyz", ready.Handler())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("metrics listener not started", "addr", addr, "err", err)
		return nil
	}
	// Bounded as the API listener is, though far lower: a client that reaches it could
	// otherwise keep connections open for ever after one request each, until the process had
	// no file descriptor left for the API's (the balancer's probes and a scraper use a few).
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { errc <- srv.Serve(limitConnections(ln, maxMetricsConnections, 0, nil, log)) }()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return srv
}

// seedDemo creates the demo account and its key, and returns the key: on the first run, and
// on a later run that finds the demo account without any key (a run that failed or was
// stopped after making the account and before its key), so that the newcomer still gets a key
// printed. It returns the empty string when the demo account has a key already, revoked or
// not: a key is shown only once, and another is made with `admin key create demo`.
func seedDemo(ctx context.Context, svc *accounts.Service) (string, error) {
	acct, err := svc.Store.GetAccountByName(ctx, "demo")
	if errors.Is(err, store.ErrNotFound) {
		acct, err = svc.CreateAccount(ctx, "demo", "demo")
	}
	if err != nil {
		return "", err
	}
	keys, err := svc.Store.ListAPIKeys(ctx, acct.ID)
	if err != nil {
		return "", err
	}
	if len(keys) > 0 {
		return "", nil
	}
	k, err := svc.CreateKey(ctx, acct.ID, "demo", -1)
	if err != nil {
		return "", err
	}
	return k.Plain, nil
}

// printDevBanner prints devBanner.
func printDevBanner(addr, key string, where pgcluster.Location, upstreams string) {
	fmt.Fprint(os.Stdout, devBanner(addr, key, where, upstreams))
}

// devBanner returns ready-to-paste commands for the local gateway and says which upstreams it
// routes to (upstreams, from upstreamsBanner) and where its local PostgreSQL cluster is (where
// is zero with DATABASE_URL).
func devBanner(addr, key string, where pgcluster.Location, upstreams string) string {
	base := devBaseURL(addr)
	var b strings.Builder
	b.WriteString("\n  tollgate is running on " + base + "\n\n")
	b.WriteString(upstreams)
	if where.DataDir != "" {
		b.WriteString("  Local PostgreSQL cluster: " + where.DataDir + "\n")
		if where.Moved {
			b.WriteString("    (here because " + where.Reason + ";\n")
			b.WriteString("    later runs and admin commands from this checkout find it here)\n")
		}
		b.WriteString("\n")
	}
	if key != "" {
		b.WriteString("  Demo API key (shown once; it is stored only as a hash):\n\n    " + key + "\n\n")
		b.WriteString("  export TOLLGATE_API_KEY=" + key + "\n")
	} else {
		b.WriteString("  The demo account exists already; its key was printed by an earlier run. A new key:\n")
		b.WriteString("    export TOLLGATE_API_KEY=$(" + adminEnvironment(where) + adminCommand(os.Args[0]) + " admin key create demo -quiet)\n")
	}
	b.WriteString("  curl -s " + base + "/v1/models -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/credits -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/chat/completions -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"model\":\"service-flint\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n")
	b.WriteString("  curl -sN " + base + "/v1/messages -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"model\":\"service-sonnet\",\"max_tokens\":64,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n\n")
	b.WriteString("  MCP: " + base + "/api/mcp (the key as a Bearer header, or an OAuth sign-in: docs/mcp-oauth.md)\n\n")
	return b.String()
}

// adminEnvironment is what the banner's admin command needs before it to find this run's local
// cluster from a terminal of its own: TOLLGATE_DATA_DIR, made absolute and quoted for the shell,
// when the run was given one (without it, the command pasted elsewhere looked in ./.data and
// answered that there is no local cluster). Empty without TOLLGATE_DATA_DIR, and with
// DATABASE_URL (where is zero), whose value may hold a password the banner does not print.
func adminEnvironment(where pgcluster.Location) string {
	dir := os.Getenv("TOLLGATE_DATA_DIR")
	if where.DataDir == "" || dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return "TOLLGATE_DATA_DIR=" + connect.ShellWord(dir) + " "
}

// adminCommand returns the command that runs this binary's admin commands from the checkout:
// the path it was started by when that is a built binary (make run's ./bin/tollgate-dev, which
// answers at once), else `go run ./cmd/tollgate` (a binary that go run or go test built in a
// temporary directory, gone when it exits; compiling it again takes a newcomer's machine about
// 18 s, which newcomer trial h1 found the banner made them wait).
func adminCommand(arg0 string) string {
	if !strings.ContainsRune(arg0, '/') || strings.Contains(arg0, "go-build") {
		return "go run ./cmd/tollgate"
	}
	return arg0
}

// meterTestTimings reads the meter's lease, reap interval and stream checkpoint interval from
// TOLLGATE_TEST_BILLING_LEASE, TOLLGATE_TEST_BILLING_REAP_INTERVAL and
// TOLLGATE_TEST_BILLING_CHECKPOINT_INTERVAL (Go durations), for process-level tests that kill a
// process and wait for another to reap and bill what it left (impl/replicas). Deliberately no
// flags: operators keep the defaults (see impl/billing). Nil when none is set.
func meterTestTimings() (func(*billing.Options), error) {
	var lease, reap, checkpoint time.Duration
	for _, v := range []struct {
		name string
		to   *time.Duration
	}{
		{"TOLLGATE_TEST_BILLING_LEASE", &lease},
		{"TOLLGATE_TEST_BILLING_REAP_INTERVAL", &reap},
		{"TOLLGATE_TEST_BILLING_CHECKPOINT_INTERVAL", &checkpoint},
	} {
		if s := os.Getenv(v.name); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%s: %q is not a positive duration", v.name, s)
			}
			*v.to = d
		}
	}
	if lease == 0 && reap == 0 && checkpoint == 0 {
		return nil, nil
	}
	return func(o *billing.Options) {
		o.Lease, o.ReapInterval, o.CheckpointInterval = lease, reap, checkpoint
	}, nil
}

// loopbackAddr reports whether addr is a host and port whose host is a loopback IP address:
// the simulator and the development OpenID provider never listen beyond the machine.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
