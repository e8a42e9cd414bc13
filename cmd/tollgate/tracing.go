package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// traceFlushWait bounds the export of the last spans when the process ends.
const traceFlushWait = 5 * time.Second

// startTracing turns tracing on when the configuration's telemetry section or the standard
// OTEL_* environment names an endpoint (nil, nil when neither does).
func startTracing(ctx context.Context, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*telemetry.Tracing, error) {
	s, err := telemetry.Resolve(cfg.Telemetry, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if !s.Enabled {
		return nil, nil
	}
	t, err := telemetry.Start(ctx, s, telemetry.Options{OnDrop: m.TraceSpansDropped, Version: buildVersion()})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// Every reason's series exists from the start, at 0, so that rate() and increase() see the
	// first drops of an outage (trial h8 D11: the series appeared with them).
	for _, reason := range []string{telemetry.DropQueueFull, telemetry.DropExportFailed, telemetry.DropRejected, telemetry.DropShutdown} {
		m.TraceSpansDropped(reason, 0)
	}
	log.Info("tracing on", "endpoint", s.EndpointURL, "protocol", s.Protocol, "sampler", s.SamplerName, "service", s.ServiceName)
	return t, nil
}

// stopTracing exports the spans still queued, for at most traceFlushWait.
func stopTracing(t *telemetry.Tracing, log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), traceFlushWait)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: the last spans were not all exported", "err", err)
	}
}

// buildVersion is the service.version of the gateway's traces (trial h8 D15: none was set): the
// module version it was built at, else the VCS revision the go command stamped (twelve hex
// digits, "-dirty" when the tree had changes), else "" (left out).
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
