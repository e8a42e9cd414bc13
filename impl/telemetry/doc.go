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
package telemetry
