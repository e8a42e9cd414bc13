package jaegertest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/jaegertest"
	"github.com/tollgate/tollgate/impl/telemetry"
)

// TestRoundTrip: spans sent over OTLP/HTTP come back from the query API as the tree they
// were (names, kinds, parents, attributes, events, error status); after a restart the
// storage is empty.
func TestRoundTrip(t *testing.T) {
	j := jaegertest.Start(t)
	s, err := telemetry.Resolve(config.Telemetry{Endpoint: j.OTLPHTTP, ServiceName: "roundtrip"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := telemetry.Start(context.Background(), s, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tr.Shutdown(context.Background()) }()

	ctx, root := telemetry.Tracer().Start(context.Background(), "root", trace.WithSpanKind(trace.SpanKindServer))
	_, child := telemetry.Tracer().Start(ctx, "child", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("k", "v"), attribute.Int("n", 3)))
	child.AddEvent("happened", trace.WithAttributes(attribute.String("detail", "x")))
	telemetry.Fail(child, "502", "failed")
	child.End()
	root.End()
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	traceID := telemetry.TraceID(ctx)
	got := j.WaitTrace(t, traceID, 2)
	r, c := got.One(t, "root"), got.One(t, "child")
	if len(got.Roots) != 1 || got.Roots[0] != r || r.Kind != "server" || r.Service != "roundtrip" || r.Error {
		t.Errorf("root:\n%s", got)
	}
	if c.Parent != r || c.ParentID != r.SpanID || c.Kind != "client" || !c.Error || c.Attr("k") != "v" || c.Attr("n") != "3" || c.Attr("error.type") != "502" {
		t.Errorf("child:\n%s", got)
	}
	if ev := c.Event("happened"); ev == nil || ev.Attrs["detail"] != "x" {
		t.Errorf("child's events: %+v", c.Events)
	}

	j.Stop()
	j.Restart(t)
	if _, found, err := j.Trace(context.Background(), traceID); err != nil || found {
		t.Errorf("after a restart: found %v, %v; want an empty storage", found, err)
	}
}
