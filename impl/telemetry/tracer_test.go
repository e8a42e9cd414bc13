package telemetry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/telemetry/otlp"
)

// spanView is what a span tells a tracing backend, with what differs between two runs (the
// random ids, the times taken from the clock) replaced by what they mean: the parent as the
// index of the parent among the spans ended before (or the remote span context's id), event
// times as whether they are the time the scenario gave.
type spanView struct {
	Name              string
	Kind              trace.SpanKind
	Parent            string
	SameTraceAsParent bool
	TraceState        string
	Flags             trace.TraceFlags
	Start, End        string
	Attributes        []attribute.KeyValue
	DroppedAttributes int
	Events            []eventView
	DroppedEvents     int
	Links             []linkView
	DroppedLinks      int
	Status            sdktrace.Status
	Scope             string
	Resource          string
}

type linkView struct {
	Target     string
	Context    string
	Attributes []attribute.KeyValue
	Dropped    int
}

type eventView struct {
	Name       string
	GivenTime  bool
	Attributes []attribute.KeyValue
	Dropped    int
}

// fixedTime is the time the scenarios give where they give one.
var fixedTime = time.Date(2026, 12, 6, 1, 2, 3, 4, time.UTC)

// remote is the span context of a caller's trace (sampled, with a tracestate).
func remote(t *testing.T, sampled bool) trace.SpanContext {
	t.Helper()
	ts, err := trace.ParseTraceState("vendor=opaque,other=1")
	if err != nil {
		t.Fatal(err)
	}
	flags := trace.TraceFlags(0)
	if sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: flags, TraceState: ts, Remote: true,
	})
}

// views reads spans (in the order they ended) as spanViews.
func views(spans []otlp.Span) []spanView {
	out := make([]spanView, len(spans))
	for i, s := range spans {
		v := spanView{
			Name: s.Name(), Kind: s.SpanKind(), TraceState: s.SpanContext().TraceState().String(),
			Flags: s.SpanContext().TraceFlags(), Attributes: s.Attributes(), DroppedAttributes: s.DroppedAttributes(),
			DroppedEvents: s.DroppedEvents(), DroppedLinks: s.DroppedLinks(), Status: s.Status(),
			Scope: fmt.Sprintf("%+v", s.InstrumentationScope()),
		}
		if r := s.Resource(); r != nil {
			v.Resource = r.String()
		}
		if s.StartTime().Equal(fixedTime) {
			v.Start = "given"
		}
		if s.EndTime().Equal(fixedTime.Add(time.Second)) {
			v.End = "given"
		} else if s.EndTime().Before(s.StartTime()) {
			v.End = "before the start"
		}
		p := s.Parent()
		v.Parent = "none"
		if p.IsValid() {
			v.Parent = "remote " + p.SpanID().String()
			v.SameTraceAsParent = p.TraceID() == s.SpanContext().TraceID()
			for j := range spans {
				if spans[j].SpanContext().SpanID() == p.SpanID() {
					v.Parent = fmt.Sprintf("span %d", j)
				}
			}
		}
		for _, l := range s.Links() {
			lc := l.SpanContext
			lv := linkView{Target: "span " + lc.SpanID().String(), Context: fmt.Sprintf("%s %s %v", lc.TraceID(), lc.TraceState(), lc.TraceFlags()),
				Attributes: l.Attributes, Dropped: l.DroppedAttributeCount}
			if lc.IsRemote() || !lc.SpanID().IsValid() {
				lv.Target = "remote " + lc.SpanID().String()
			} else {
				// A span of this run: named by what it is, its id being random.
				lv.Target, lv.Context = "a span of this run", fmt.Sprintf("%s %v", lc.TraceState(), lc.TraceFlags())
			}
			v.Links = append(v.Links, lv)
		}
		for _, e := range s.Events() {
			v.Events = append(v.Events, eventView{Name: e.Name, GivenTime: e.Time.Equal(fixedTime), Attributes: e.Attributes, Dropped: e.DroppedAttributeCount})
		}
		out[i] = v
	}
	return out
}

// scenario makes spans through tracer; each is run through the SDK and through tracer.go.
type scenario struct {
	name    string
	sampler sdktrace.Sampler
	limits  func(*sdktrace.SpanLimits)
	run     func(t *testing.T, tracer trace.Tracer)
}

// TestTracerMatchesTheSDK: the gateway's tracer and the OpenTelemetry SDK, given the same
// spans to make (the gateway's own request, attributes set twice and invalid, statuses in
// every order, renames, events with and without times, errors, links, remote parents with a
// tracestate, new roots, given times, every limit exceeded, sampled out), end the same spans:
// the same names, kinds, parents, flags, tracestates, attributes (in order), events, links,
// dropped counts, statuses, scopes and resource.
func TestTracerMatchesTheSDK(t *testing.T) {
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tollgate"))
	scenarios := []scenario{
		{name: "a traced request", run: func(_ *testing.T, tr trace.Tracer) { makeRequestSpans(tr) }},
		{name: "attributes and statuses", run: func(_ *testing.T, tr trace.Tracer) {
			ctx, s := tr.Start(context.Background(), "first", trace.WithAttributes(attribute.Int("a", 1), attribute.Int("b", 2)))
			s.SetAttributes(attribute.Int("a", 3), attribute.KeyValue{}, attribute.String("c", "x"), attribute.Int("a", 4))
			s.SetStatus(codes.Error, "boom")
			s.SetStatus(codes.Unset, "")
			s.SetName("renamed")
			_, c := tr.Start(ctx, "ok then error", trace.WithSpanKind(trace.SpanKindProducer))
			c.SetStatus(codes.Ok, "an ok has no description")
			c.SetStatus(codes.Error, "too late")
			c.End()
			_, e := tr.Start(ctx, "error then ok", trace.WithSpanKind(trace.SpanKind(42)))
			e.SetStatus(codes.Error, "first")
			e.SetStatus(codes.Ok, "")
			e.End()
			s.End()
			s.SetAttributes(attribute.Int("after the end", 1))
			s.SetName("after the end")
			s.End()
		}},
		{name: "events and errors", run: func(_ *testing.T, tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "events")
			s.AddEvent("given", trace.WithTimestamp(fixedTime), trace.WithAttributes(attribute.Int("x", 1), attribute.Int("y", 1), attribute.Int("x", 2)))
			s.AddEvent("now")
			s.RecordError(nil)
			s.RecordError(errors.New("it broke"), trace.WithAttributes(attribute.String("where", "here")))
			s.RecordError(fmt.Errorf("wrapped: %w", context.Canceled))
			s.End()
		}},
		{name: "links, remote parent, new root", run: func(t *testing.T, tr trace.Tracer) {
			parent := remote(t, true)
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
			ctx, s := tr.Start(ctx, "child of remote", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithLinks(trace.Link{SpanContext: parent, Attributes: []attribute.KeyValue{attribute.String("why", "caller")}}, trace.Link{}))
			s.AddLink(trace.Link{})
			s.AddLink(trace.Link{Attributes: []attribute.KeyValue{attribute.Bool("no context", true)}})
			_, root := tr.Start(ctx, "new root", trace.WithNewRoot(), trace.WithLinks(trace.LinkFromContext(ctx)))
			root.End()
			_, c := tr.Start(ctx, "grandchild", trace.WithTimestamp(fixedTime))
			c.End(trace.WithTimestamp(fixedTime.Add(time.Second)))
			s.End()
		}},
		{name: "limits", limits: func(l *sdktrace.SpanLimits) {
			l.AttributeCountLimit, l.AttributeValueLengthLimit = 3, 4
			l.EventCountLimit, l.AttributePerEventCountLimit = 2, 1
			l.LinkCountLimit, l.AttributePerLinkCountLimit = 1, 1
		}, run: func(t *testing.T, tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "limited", trace.WithAttributes(attribute.String("long", "abcdefgh"), attribute.Int("a", 1)))
			s.SetAttributes(attribute.Int("a", 2), attribute.StringSlice("list", []string{"123456", "1"}), attribute.Int("over", 1))
			s.SetAttributes(attribute.Int("a", 3), attribute.Int("over too", 1), attribute.KeyValue{})
			for i := range 3 {
				s.AddEvent(fmt.Sprintf("event %d", i), trace.WithTimestamp(fixedTime), trace.WithAttributes(attribute.Int("p", 1), attribute.Int("q", 2)))
			}
			for i := range 2 {
				s.AddLink(trace.Link{SpanContext: remote(t, i == 0), Attributes: []attribute.KeyValue{attribute.Int("p", i), attribute.Int("q", i)}})
			}
			s.End()
		}},
		{name: "no attributes allowed", limits: func(l *sdktrace.SpanLimits) {
			l.AttributeCountLimit, l.EventCountLimit, l.LinkCountLimit = 0, 0, 0
		}, run: func(t *testing.T, tr trace.Tracer) {
			_, s := tr.Start(context.Background(), "bare", trace.WithAttributes(attribute.Int("a", 1)))
			s.SetAttributes(attribute.Int("b", 1))
			s.AddEvent("e")
			s.AddLink(trace.Link{SpanContext: remote(t, true)})
			s.End()
		}},
		{name: "sampled out", sampler: sdktrace.ParentBased(sdktrace.AlwaysSample()), run: func(t *testing.T, tr trace.Tracer) {
			parent := remote(t, false)
			ctx, s := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "unsampled child")
			if s.IsRecording() || s.SpanContext().IsSampled() || s.SpanContext().TraceID() != parent.TraceID() || s.SpanContext().SpanID() == parent.SpanID() {
				t.Errorf("a child of an unsampled parent: recording %v, span context %+v", s.IsRecording(), s.SpanContext())
			}
			s.SetAttributes(attribute.Int("a", 1))
			s.End()
			_, c := tr.Start(ctx, "grandchild")
			c.End()
			_, r := tr.Start(ctx, "new root", trace.WithNewRoot())
			r.End()
		}},
		{name: "never sampled", sampler: sdktrace.NeverSample(), run: func(_ *testing.T, tr trace.Tracer) {
			ctx, s := tr.Start(context.Background(), "dropped")
			if s.IsRecording() || !s.SpanContext().IsValid() || !trace.SpanContextFromContext(ctx).Equal(s.SpanContext()) {
				t.Errorf("a dropped span: recording %v, span context %+v", s.IsRecording(), s.SpanContext())
			}
			s.End()
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			sampler := sc.sampler
			if sampler == nil {
				sampler = sdktrace.AlwaysSample()
			}
			limits := sdktrace.NewSpanLimits()
			if sc.limits != nil {
				sc.limits(&limits)
			}
			rec := tracetest.NewSpanRecorder()
			sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithRawSpanLimits(limits),
				sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec))
			sc.run(t, sdk.Tracer(instrumentation, trace.WithInstrumentationVersion("1.2.3")))
			want := views(otlp.FromSDK(rec.Ended()))

			var mu sync.Mutex
			var ended []otlp.Span
			ours := newProvider(sampler, limits, res, func(s *span) {
				mu.Lock()
				ended = append(ended, s)
				mu.Unlock()
			})
			sc.run(t, ours.Tracer(instrumentation, trace.WithInstrumentationVersion("1.2.3")))
			got := views(ended)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the tracer's spans differ from the SDK's:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}
