// Package telemetry owns tollgate's traces: the OpenTelemetry tracer provider, set up from the
// standard OTEL_* environment and the configuration file's telemetry section, its bounded
// export queue, and the small API the request path and the agents use to make spans.
//
// Tracing is off by default. Off, no exporter runs, Enabled reports false and every helper
// below returns at once: the request path checks Enabled (one atomic load) before it makes
// any span, so tracing costs it nothing measurable. On, spans are batched in a bounded queue
// that never blocks a request: a span that finds the queue full, or whose batch the backend
// refuses or does not take in time, is dropped and counted (Options.OnDrop, which the gateway
// turns into tollgate_trace_spans_dropped_total{reason}).
//
// The stable API, for the HTTP routes, MCP and the agents alike:
//
//   - Resolve and Start set the process's tracing up (cmd/tollgate serve does it once);
//     Tracing.Shutdown flushes with a deadline.
//   - Enabled reports whether spans are being made; Tracer is the tracer to make them with
//     (a no-op tracer while off).
//   - StartServer begins a request's SERVER span, continuing an incoming W3C traceparent
//     (tracestate kept), and EndServer names and ends it; Inject writes the current span's
//     traceparent into outgoing headers, InjectInto into any carrier (a River job's metadata
//     as a propagation.MapCarrier, say); Extract reads one back from a carrier.
//   - Fail marks a span failed with its error.type.
//   - TraceID is the current trace's id as 32 hex digits ("" when none).
//   - CaptureContent says whether an account opted in to prompts and answers in spans.
//   - The attribute keys (the GenAI semantic conventions' and tollgate.*'s) are constants here.
//
// # The tracer
//
// The spans are made by a tracer of this package's own (tracer.go), not the SDK's
// TracerProvider: a span records its name, times, attributes, events, links and status
// straight into the form the exporter (impl/telemetry/otlp) encodes, and the export queue
// takes it when it ends. It keeps the SDK's parts that decide what a trace is: the sampler
// (sdktrace.Sampler, from OTEL_TRACES_SAMPLER), the span limits (sdktrace.NewSpanLimits, from
// OTEL_SPAN_*), the resource, the W3C propagator; over gRPC the library's exporter gets the
// spans as the SDK's (tracetest.SpanStub snapshots).
//
// What it buys, measured (BenchmarkSampledRequestSpans: the five spans of a traced chat
// request and their attributes, the export left out; and `make bench -tracing sink`, in
// docs/speed.md): see docs/speed.md, "tracing at 100 %". The SDK's span is a general
// read-write object: each one takes a de-duplication map when it ends, a snapshot copy for
// the processors, and attribute slices grown call by call.
//
// What it gives up: the SDK's features the gateway never used: span processors other than
// the export queue, the SDK's self-observability metrics (OTEL_GO_X_OBSERVABILITY), the
// exception event the SDK adds when End runs during a panic, the child span count (OTLP does
// not carry it), attribute depth limits for nested map values, and runtime/trace regions.
// What a backend receives is the SDK's, span for span: TestTracerMatchesTheSDK makes the same
// spans through both (the gateway's own request; attributes set twice and invalid; statuses
// in every order; renames; events with and without times; errors; links; remote parents with
// a tracestate; new roots; given times; every limit exceeded, and set to zero; sampled out)
// and compares everything the exporter reads, ids and clock times aside.
package telemetry
