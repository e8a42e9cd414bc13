package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate/tollgate/impl/telemetry/otlp"
)

// instrumentation is the name of tollgate's tracer.
const instrumentation = "github.com/tollgate/tollgate"

// Options are Start's collaborators.
type Options struct {
	// OnDrop is told of every span dropped and why (DropQueueFull, DropExportFailed, DropRejected,
	// DropShutdown); nil: drops are not reported. It must not block.
	OnDrop func(reason string, n int)
	// Version is the service.version resource attribute ("" leaves it out).
	Version string
}

// Tracing is the process's tracing while it is on.
type Tracing struct {
	provider *sdktrace.TracerProvider
	previous *state
}

// state is what the package-level helpers read: swapped as a whole by Start and Shutdown.
type state struct {
	tracer  trace.Tracer
	capture map[uuid.UUID]struct{}
}

var (
	// current is nil while tracing is off.
	current atomic.Pointer[state]
	// propagator reads and writes W3C traceparent and tracestate.
	propagator = propagation.TraceContext{}
	noopTracer = noop.NewTracerProvider().Tracer(instrumentation)
)

// Start turns tracing on as s says, for the whole process (the OpenTelemetry global tracer
// provider and W3C propagator too, for libraries that use them), and returns it; with
// s.Enabled unset it does nothing and returns nil. Call Shutdown on the result when the
// process ends.
func Start(ctx context.Context, s Settings, o Options) (*Tracing, error) {
	if !s.Enabled {
		return nil, nil
	}
	exp, err := newExporter(ctx, s, o.Version)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(s.ServiceName)}
	if o.Version != "" {
		attrs = append(attrs, semconv.ServiceVersion(o.Version))
	}
	for k, v := range s.ResourceAttributes {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil {
		res = resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(s.Sampler),
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(newQueue(exp, s, o.OnDrop)),
	)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := &Tracing{provider: tp, previous: current.Load()}
	current.Store(&state{tracer: tp.Tracer(instrumentation), capture: s.CaptureContent})
	return t, nil
}

// newExporter returns the exporter s asks for. Over http/protobuf it is impl/telemetry/otlp's,
// which encodes the SDK's spans straight into protobuf (a third of the OpenTelemetry library
// exporter's time and a twentieth of its allocations per batch; docs/speed.md); over gRPC the
// library's (which reads the OTEL_EXPORTER_OTLP_* TLS and compression variables itself).
func newExporter(ctx context.Context, s Settings, version string) (sdktrace.SpanExporter, error) {
	if s.Protocol == ProtocolGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(s.EndpointURL), otlptracegrpc.WithTimeout(s.ExportTimeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		exp, err := otlptrace.New(ctx, otlptracegrpc.NewClient(opts...))
		if err != nil {
			return nil, fmt.Errorf("OTLP exporter: %w", err)
		}
		return exp, nil
	}
	tlsConfig, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil && !strings.HasPrefix(s.EndpointURL, "https://") {
		return nil, fmt.Errorf("OTLP endpoint %s: certificates are set (OTEL_EXPORTER_OTLP_CERTIFICATE or _CLIENT_CERTIFICATE) for an endpoint that is not https", s.EndpointURL)
	}
	agent := "tollgate"
	if version != "" {
		agent += "/" + version
	}
	return otlp.NewHTTPExporter(otlp.HTTPOptions{URL: s.EndpointURL, Headers: s.Headers, Gzip: s.Gzip, TLS: tlsConfig,
		UserAgent: agent + " (OTLP/HTTP exporter)"}), nil
}

// Flush exports every span ended so far, or gives up when ctx ends.
func (t *Tracing) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown turns tracing off (the helpers go back to doing nothing) and exports the spans
// still queued, within ctx's deadline: those it cannot are dropped and counted.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	current.Store(t.previous)
	err := t.provider.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("traces not all exported before the deadline: %w", err)
	}
	return err
}

// Enabled reports whether tracing is on: one atomic load, for the request path to check
// before it makes a span.
func Enabled() bool { return current.Load() != nil }

// Recording reports whether the span of ctx records: false for a request of a trace the
// sampler left out, whose child spans would record nothing either, so the request path makes
// none (their attributes, ids and contexts cost CPU on every request at a low sampling ratio).
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Tracer is tollgate's tracer: a no-op one while tracing is off.
func Tracer() trace.Tracer {
	if st := current.Load(); st != nil {
		return st.tracer
	}
	return noopTracer
}

// CaptureContent reports whether the account opted in (telemetry.capture_content_accounts)
// to its prompts and answers being recorded in span events. Never while tracing is off.
func CaptureContent(account uuid.UUID) bool {
	st := current.Load()
	if st == nil || len(st.capture) == 0 {
		return false
	}
	_, ok := st.capture[account]
	return ok
}

// StartServer begins the SERVER span of an HTTP request, continuing the trace of an incoming
// W3C traceparent (its tracestate kept). It is named by the method until the route is known;
// its attributes are all set when it ends (EndServer), in one call: each call of the SDK's
// SetAttributes grows the span's attribute slice, and a span's attributes given at its start
// are copied three times (the option, the start configuration, the span). Call it only when
// Enabled.
//
// A request the sampler leaves out pays only for its span context (the trace id the response
// header and the upstream's traceparent carry): without an incoming traceparent the headers
// are not searched.
func StartServer(r *http.Request) (context.Context, trace.Span) {
	ctx := r.Context()
	if _, ok := r.Header[headerTraceparent]; ok {
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	return Tracer().Start(ctx, r.Method, serverKind)
}

// StartInternal begins an INTERNAL child span of ctx's (authentication, admission,
// settlement); call it only when Enabled. The gateway's spans get their attributes when they
// end, in one SetAttributes call each (or Fail's): the SDK copies a span's start attributes
// three times (the option, the start configuration, the span) and grows the span's slice at
// every call, which made a traced request's spans cost 52 allocations rather than 34
// (BenchmarkSampledRequestSpans). The samplers the gateway takes (OTEL_TRACES_SAMPLER) do not
// read attributes.
func StartInternal(ctx context.Context, name string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name)
}

// headerTraceparent is the canonical form of W3C's traceparent header, as net/http and
// h1server store it.
const headerTraceparent = "Traceparent"

// serverKind is StartServer's one option, made once.
var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// StartSocketTurn begins the SERVER span of one request made on a WebSocket (a
// response.create of the Responses API's WebSocket mode): the root of a trace of its own,
// linked to the socket's span (ctx's), so that each turn is one trace, as each POST is, with
// its own trace id in its usage record, rather than every turn of an hours-long socket in one
// trace that never completes (trial h8 D20). Call it only when tracing is on.
func StartSocketTurn(ctx context.Context, name, route string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithLinks(trace.LinkFromContext(ctx)), trace.WithAttributes(semconv.HTTPRouteKey.String(route)))
}

// ServerEnd is what a request's SERVER span reports when it ends.
type ServerEnd struct {
	// Method and Path are the request's (http.request.method, url.path); Route is its
	// route's pattern ("/v1/chat/completions"; "" when no route matched).
	Method, Path, Route string
	// Status is the response's status code.
	Status int
	// RequestID is the request's x-request-id (tollgate.request.id).
	RequestID string
	// Account and Key are the authenticated caller's ("" when the request was not
	// authenticated).
	Account, Key string
}

// EndServer names the server span after its route ("POST /v1/chat/completions", after the
// HTTP conventions), sets its attributes (the method, path, route, status, request id and the
// caller's account and key) and ends it; a 5xx is an error.
func EndServer(span trace.Span, e ServerEnd) {
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(e.Method), semconv.URLPath(e.Path),
		AttrRequestID.String(e.RequestID), semconv.HTTPResponseStatusCodeKey.Int(e.Status))
	if e.Route != "" {
		span.SetName(e.Method + " " + e.Route)
		attrs = append(attrs, semconv.HTTPRouteKey.String(e.Route))
	}
	if e.Account != "" {
		attrs = append(attrs, AttrAccount.String(e.Account), AttrKey.String(e.Key))
	}
	if e.Status >= 500 {
		span.SetStatus(codesError, http.StatusText(e.Status))
		attrs = append(attrs, ErrorType.String(strconv.Itoa(e.Status)))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// Inject writes the traceparent of ctx's span into h, the headers of a request to an upstream
// provider, which continues the trace. The tracestate is not written: it holds what the
// caller's tracing vendors put there for the caller's own systems, and the provider is a third
// party called with the gateway's credentials (a job's carrier keeps it: InjectInto).
func Inject(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, traceparentOnly(h))
}

// traceparentOnly is a header carrier that takes the traceparent and drops the tracestate.
type traceparentOnly http.Header

func (c traceparentOnly) Get(key string) string { return http.Header(c).Get(key) }
func (c traceparentOnly) Keys() []string        { return propagation.HeaderCarrier(c).Keys() }
func (c traceparentOnly) Set(key, value string) {
	if !strings.EqualFold(key, "tracestate") {
		http.Header(c).Set(key, value)
	}
}

// InjectInto writes the trace context of ctx's span into any carrier: a job's metadata
// (propagation.MapCarrier), say, for the replica that runs it to continue the trace.
func InjectInto(ctx context.Context, carrier propagation.TextMapCarrier) {
	propagator.Inject(ctx, carrier)
}

// Extract returns ctx carrying the remote span context found in carrier (a traceparent and
// tracestate), for a job or message that continues a trace.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return propagator.Extract(ctx, carrier)
}

// TraceID is the id of ctx's trace as 32 hex digits, "" when ctx has no valid span context.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.TraceID().IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// SampledTrace is the id of span's trace when it is sampled (the zero TraceID otherwise):
// what an exemplar links. The metrics format it only for the exemplars they take (about one a
// second per histogram bucket), not for every request.
func SampledTrace(span trace.Span) trace.TraceID {
	sc := span.SpanContext()
	if !sc.IsSampled() {
		return trace.TraceID{}
	}
	return sc.TraceID()
}
