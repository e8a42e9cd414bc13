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
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/gateway"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/pgcluster"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
)

// runServe serves the API until ctx ends (SIGINT/SIGTERM), then shuts down gracefully:
// in-flight requests finish, background writers drain.
func runServe(ctx context.Context, args []string, dev bool) error {
	name := "serve"
	if dev {
		name = "dev"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	configPath := fs.String("config", "", "config file (default: TOLLGATE_CONFIG or the built-in configuration)")
	listen := fs.String("listen", "", "API listen address (overrides the config)")
	metricsListen := fs.String("metrics-listen", "", "metrics listen address (overrides the config; \"off\" disables it)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
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
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
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
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.Server.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(int64(cfg.Server.MemoryLimitMB) << 20)
	}
	// The API address is taken first: when it is busy, nothing else has happened yet (dev has
	// not created its demo account, whose key is shown only once).
	apiLn, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	defer apiLn.Close()
	d, err := openDatabase(ctx, dev, log)
	if err != nil {
		return err
	}
	defer d.Close()

	var demoKey string
	if dev {
		if demoKey, err = seedDemo(ctx, &accounts.Service{Store: d.Store, Config: cfg}); err != nil {
			return fmt.Errorf("seed demo account: %w", err)
		}
	}

	m := metrics.New()
	var limiter ratelimit.Limiter = ratelimit.NewLocal(nil)
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		replicas := 1
		if v := os.Getenv("TOLLGATE_REPLICAS"); v != "" {
			if replicas, err = strconv.Atoi(v); err != nil || replicas < 1 {
				return fmt.Errorf("TOLLGATE_REPLICAS: %q is not a positive integer", v)
			}
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
		log.Info("per-key rate limits are shared through Redis")
	}

	upstreamURL := ""
	if provider.UsesSimulator(cfg) {
		simLn, err := net.Listen("tcp", "127.0.0.1:0")
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
	storage, err := dataset.NewDirStorage(datasetsDir())
	if err != nil {
		return fmt.Errorf("dataset storage: %w", err)
	}
	gw, err := gateway.New(gateway.Options{Store: d.Store, Config: cfg, Logger: log, Limiter: limiter, Metrics: m,
		SimulatorURL: upstreamURL, DatasetStorage: storage})
	if err != nil {
		return err
	}
	defer gw.Close()
	// The background work outlives the HTTP server: the meter drains the last requests' usage.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan struct{})
	go func() { defer close(bgDone); gw.Run(bg) }()

	// The API listener is served by h1server: plain HTTP/1.1 requests on its lean path, every
	// other connection by net/http (see impl/h1server).
	httpSrv := &h1server.Server{Handler: gw.Handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 2)
	go func() { errc <- httpSrv.Serve(apiLn) }()
	var metricsSrv *http.Server
	if cfg.Server.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Handler())
		// Profiles for operators, on the metrics listener only (never on the API listener).
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
			if err := d.Store.Ping(r.Context()); err != nil {
				http.Error(w, "database unavailable", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		metricsLn, err := net.Listen("tcp", cfg.Server.MetricsListen)
		if err != nil {
			log.Warn("metrics listener not started", "addr", cfg.Server.MetricsListen, "err", err)
		} else {
			metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go func() { errc <- metricsSrv.Serve(metricsLn) }()
			log.Info("metrics listening", "addr", metricsLn.Addr().String())
		}
	}
	log.Info("tollgate listening", "addr", apiLn.Addr().String())
	if dev {
		printDevBanner(apiLn.Addr().String(), demoKey, d.where)
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests")
	case serveErr = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		log.Warn("graceful shutdown incomplete", "err", err)
	}
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(shutdownCtx)
	}
	stopBackground()
	<-bgDone
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// seedDemo creates the demo account and its key on first run and returns the key (empty when
// the account already existed: a key is shown only once).
func seedDemo(ctx context.Context, svc *accounts.Service) (string, error) {
	_, err := svc.Store.GetAccountByName(ctx, "demo")
	if err == nil {
		return "", nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	acct, err := svc.CreateAccount(ctx, "demo", "demo")
	if err != nil {
		return "", err
	}
	k, err := svc.CreateKey(ctx, acct.ID, "demo", -1)
	if err != nil {
		return "", err
	}
	return k.Plain, nil
}

// printDevBanner prints devBanner.
func printDevBanner(addr, key string, where pgcluster.Location) {
	fmt.Fprint(os.Stdout, devBanner(addr, key, where))
}

// devBanner returns ready-to-paste commands for the local gateway and says where its local
// PostgreSQL cluster is (where is zero with DATABASE_URL).
func devBanner(addr, key string, where pgcluster.Location) string {
	host := addr
	if h, port, err := net.SplitHostPort(addr); err == nil && (h == "::" || h == "0.0.0.0" || h == "") {
		host = "localhost:" + port
	}
	base := "http://" + host
	var b strings.Builder
	b.WriteString("\n  tollgate is running on " + base + "\n\n")
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
		b.WriteString("  The demo account exists already; its key was printed on the first run. A new key:\n")
		b.WriteString("    export TOLLGATE_API_KEY=$(go run ./cmd/tollgate admin key create demo -quiet)\n")
	}
	b.WriteString("  curl -s " + base + "/v1/models -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/credits -H \"Authorization: Bearer $TOLLGATE_API_KEY\"\n")
	b.WriteString("  curl -s " + base + "/v1/chat/completions -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"model\":\"service-flint\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n")
	b.WriteString("  curl -sN " + base + "/v1/messages -H \"Authorization: Bearer $TOLLGATE_API_KEY\" \\\n")
	b.WriteString("    -d '{\"model\":\"service-sonnet\",\"max_tokens\":64,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n\n")
	return b.String()
}
