package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// bodyCatcher is an OTLP/HTTP endpoint that keeps the bodies posted to it.
type bodyCatcher struct {
	mu     sync.Mutex
	bodies [][]byte
	srv    *httptest.Server
}

func newBodyCatcher(t testing.TB) *bodyCatcher {
	c := &bodyCatcher{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// last returns the body posted last.
func (c *bodyCatcher) last(t testing.TB) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		t.Fatal("nothing was posted")
	}
	return c.bodies[len(c.bodies)-1]
}

// libraryRequest is what the OpenTelemetry library's OTLP/HTTP exporter posts for spans.
func libraryRequest(t testing.TB, spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	c := newBodyCatcher(t)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(c.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	return decode(t, c.last(t))
}

// ourRequest is what HTTPExporter posts for spans.
func ourRequest(t testing.TB, spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	c := newBodyCatcher(t)
	exp := NewHTTPExporter(HTTPOptions{URL: c.srv.URL + "/v1/traces"})
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	return decode(t, c.last(t))
}

func decode(t testing.TB, b []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("not an ExportTraceServiceRequest: %v", err)
	}
	// The library orders resources as a map gives them: compare in one order.
	slices.SortStableFunc(req.ResourceSpans, func(a, b *tracepb.ResourceSpans) int {
		return strings.Compare(prototext.Format(a.GetResource()), prototext.Format(b.GetResource()))
	})
	return &req
}

// sameRequest fails t unless the library's exporter and ours post the same request for spans.
func sameRequest(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	want, got := libraryRequest(t, spans), ourRequest(t, spans)
	if !proto.Equal(want, got) {
		t.Fatalf("the requests differ\nlibrary:\n%s\nours:\n%s", prototext.Format(want), prototext.Format(got))
	}
	if n := spanCount(got); n != len(spans) {
		t.Fatalf("%d spans posted, want %d", n, len(spans))
	}
	// Decoding merges a singular message written twice, which the comparison above cannot
	// see: the bytes are as long as the decoded request re-encoded (fields once each, in order,
	// shortest lengths).
	var enc Encoder
	raw := enc.Append(nil, spans)
	if n := proto.Size(decode(t, raw)); n != len(raw) {
		t.Fatalf("%d bytes encoded, %d when decoded and encoded again", len(raw), n)
	}
}

func spanCount(r *coltracepb.ExportTraceServiceRequest) int {
	n := 0
	for _, rs := range r.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n
}

// recorder returns a tracer provider recording into rec, with res and limits.
func recorder(rec *tracetest.SpanRecorder, res *resource.Resource, limits sdktrace.SpanLimits) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(res), sdktrace.WithRawSpanLimits(limits))
}

// everyValue is one attribute of each value type, zero values and long and multi-byte strings
// among them.
func everyValue() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Bool("bool.true", true), attribute.Bool("bool.false", false),
		attribute.Int64("int.zero", 0), attribute.Int64("int.negative", -42), attribute.Int64("int.max", math.MaxInt64),
		attribute.Float64("float.zero", 0), attribute.Float64("float", 3.25), attribute.Float64("float.nan", math.NaN()),
		attribute.String("string.empty", ""), attribute.String("string.unicode", "prix: 3 € — 価格"),
		attribute.String("string.long", strings.Repeat("x", 200)), attribute.String("string.longer", strings.Repeat("y", 20000)),
		attribute.BoolSlice("bools", []bool{true, false}), attribute.Int64Slice("ints", []int64{0, 1, -1}),
		attribute.Float64Slice("floats", []float64{0, 1.5}), attribute.StringSlice("strings", []string{"stop", ""}),
		attribute.StringSlice("strings.empty", nil), attribute.ByteSlice("bytes", []byte{0, 1, 2}),
		attribute.Slice("slice", attribute.StringValue("a"), attribute.Int64Value(2), attribute.SliceValue(attribute.BoolValue(true))),
		attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Int("n", 1))),
		{Key: "empty"},
	}
}

// TestEncoderMatchesTheLibrary: for spans of every shape (each span kind; attributes of every
// value type, zero values, long and multi-byte strings; events, links, statuses, trace state,
// remote parents, counts of what the limits dropped; two resources and several
// instrumentation scopes), HTTPExporter posts the request the OpenTelemetry library's
// OTLP/HTTP exporter posts, compared message by message once both are decoded.
func TestEncoderMatchesTheLibrary(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	resA := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.43.0", attribute.String("service.name", "tollgate"), attribute.String("service.version", "1.2.3"))
	resB := resource.NewSchemaless(attribute.String("service.name", "other"))
	tpA := recorder(rec, resA, sdktrace.NewSpanLimits())
	tpB := recorder(rec, resB, sdktrace.SpanLimits{AttributeCountLimit: 3, EventCountLimit: 1, LinkCountLimit: 1, AttributePerEventCountLimit: 1, AttributePerLinkCountLimit: 1, AttributeValueLengthLimit: 5})
	tpEmpty := recorder(rec, resource.Empty(), sdktrace.NewSpanLimits())

	plain := tpA.Tracer("github.com/tollgate/tollgate")
	versioned := tpA.Tracer("lib", trace.WithInstrumentationVersion("v0.9.0"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.26.0"),
		trace.WithInstrumentationAttributes(attribute.String("scope.attr", "x")))
	limited := tpB.Tracer("limited")
	unnamed := tpEmpty.Tracer("")

	remoteTS, _ := trace.ParseTraceState("vendor=opaque,other=1")
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled, TraceState: remoteTS, Remote: true})
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})

	ctx, root := plain.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "POST /v1/chat/completions",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(everyValue()...))
	for _, k := range []trace.SpanKind{trace.SpanKindInternal, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindUnspecified} {
		_, s := versioned.Start(ctx, "kind "+k.String(), trace.WithSpanKind(k), trace.WithLinks(trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("link", "yes")}}, trace.Link{SpanContext: remote}))
		s.AddEvent("event", trace.WithAttributes(attribute.Int("n", 1), attribute.String("s", "v")), trace.WithTimestamp(time.Unix(1700000000, 5)))
		s.AddEvent("bare")
		s.End()
	}
	_, failed := plain.Start(ctx, "failed")
	failed.SetStatus(codes.Error, "the upstream try failed")
	failed.SetAttributes(attribute.String("error.type", "502"))
	failed.End()
	_, ok := plain.Start(ctx, "ok")
	ok.SetStatus(codes.Ok, "")
	ok.End()
	_, over := limited.Start(ctx, "over the limits", trace.WithLinks(trace.Link{SpanContext: linked}, trace.Link{SpanContext: remote, Attributes: everyValue()[:3]}))
	over.SetAttributes(everyValue()...)
	over.AddEvent("one", trace.WithAttributes(everyValue()[:4]...))
	over.AddEvent("two")
	over.End()
	_, early := unnamed.Start(context.Background(), "before 1970", trace.WithTimestamp(time.Unix(-5, 0)))
	early.End(trace.WithTimestamp(time.Unix(-1, 0)))
	root.End()

	spans := rec.Ended()
	sameRequest(t, spans)
	sameRequest(t, spans[:1])
	// Interleaved resources and scopes: each group still in the order its spans came.
	mixed := slices.Clone(spans)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
	sameRequest(t, mixed)
}

// TestEncoderMatchesTheLibraryOnRandomSpans: the same comparison over random spans (names,
// attribute counts, types and lengths, events and links), from a fixed seed; one Encoder,
// reused across the rounds, writes what a new one writes.
func TestEncoderMatchesTheLibraryOnRandomSpans(t *testing.T) {
	r := rand.New(rand.NewPCG(20261203, 1))
	values := everyValue()
	var reused Encoder
	var buf []byte
	for round := range 20 {
		rec := tracetest.NewSpanRecorder()
		tps := []*sdktrace.TracerProvider{
			recorder(rec, resource.NewSchemaless(attribute.Int("round", round)), sdktrace.NewSpanLimits()),
			recorder(rec, resource.NewSchemaless(attribute.String("service.name", fmt.Sprint("s", round))), sdktrace.SpanLimits{AttributeCountLimit: 4, EventCountLimit: 2, LinkCountLimit: 2, AttributePerEventCountLimit: 2, AttributePerLinkCountLimit: 2, AttributeValueLengthLimit: -1}),
		}
		for range 1 + r.IntN(60) {
			tr := tps[r.IntN(2)].Tracer(fmt.Sprint("scope", r.IntN(3)))
			attrs := make([]attribute.KeyValue, r.IntN(8))
			for i := range attrs {
				attrs[i] = values[r.IntN(len(values))]
				if r.IntN(2) == 0 {
					attrs[i] = attribute.String(fmt.Sprint("k", r.IntN(5)), strings.Repeat("é", r.IntN(300)))
				}
			}
			_, s := tr.Start(context.Background(), strings.Repeat("n", r.IntN(200)), trace.WithSpanKind(trace.SpanKind(r.IntN(6))), trace.WithAttributes(attrs...))
			for range r.IntN(3) {
				s.AddEvent(fmt.Sprint("e", r.IntN(9)), trace.WithAttributes(attrs...))
			}
			for range r.IntN(3) {
				s.AddLink(trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{byte(r.IntN(256)), 1}, SpanID: trace.SpanID{2}, Remote: r.IntN(2) == 0}), Attributes: attrs})
			}
			if r.IntN(4) == 0 {
				s.SetStatus(codes.Error, strings.Repeat("m", r.IntN(150)))
			}
			s.End()
		}
		spans := rec.Ended()
		sameRequest(t, spans)
		var fresh Encoder
		if buf = reused.Append(buf[:0], spans); !bytes.Equal(buf, fresh.Append(nil, spans)) {
			t.Fatalf("round %d: the reused encoder wrote other bytes than a new one", round)
		}
	}
}

// TestEncoderMatchesTheLibraryOnOddSpans: spans the SDK's own tracers do not make (a zero
// instrumentation scope, no resource, an unknown kind and status code, an attribute with no
// key) and a batch over 2 MiB (whose lengths take four bytes) come out as the library's.
func TestEncoderMatchesTheLibraryOnOddSpans(t *testing.T) {
	tid, sid := trace.TraceID{7}, trace.SpanID{7}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	stubs := tracetest.SpanStubs{
		{Name: "zero scope, no resource", SpanContext: sc, SpanKind: trace.SpanKind(9), Status: sdktrace.Status{Code: codes.Code(7), Description: "odd"},
			Attributes: []attribute.KeyValue{{Key: "", Value: attribute.StringValue("no key")}}, StartTime: time.Unix(1, 0), EndTime: time.Unix(2, 0)},
		{Name: "empty resource", SpanContext: sc, Resource: resource.Empty(), StartTime: time.Unix(3, 0), EndTime: time.Unix(4, 0)},
	}
	sameRequest(t, stubs.Snapshots())

	rec := tracetest.NewSpanRecorder()
	tr := recorder(rec, resource.NewSchemaless(attribute.String("service.name", "big")), sdktrace.NewSpanLimits()).Tracer("big")
	long := strings.Repeat("z", 20000)
	for range 110 {
		_, s := tr.Start(context.Background(), "long", trace.WithAttributes(attribute.String("payload", long)))
		s.End()
	}
	var enc Encoder
	if n := len(enc.Append(nil, rec.Ended())); n <= 2<<20 {
		t.Fatalf("the batch is %d bytes, want over 2 MiB", n)
	}
	sameRequest(t, rec.Ended())
}
