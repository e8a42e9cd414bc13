package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
	t, err := telemetry.Start(ctx, s, telemetry.Options{OnDrop: m.TraceSpansDropped})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
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
