// Package jaegertest runs a real trace backend for tests: Jaeger v2's all-in-one (the
// OpenTelemetry Collector based jaeger binary), built from the module proxy at the version
// pinned in tools/jaeger/go.mod, with in-memory storage, OTLP in over HTTP and gRPC on free
// loopback ports, and its query API read back into span trees.
//
// The stable API, for the gateway's tracing tests and the MCP and agent ones alike:
//
//	j := jaegertest.Start(t)                  // stopped at the end of the test
//	j.OTLPHTTP, j.OTLPGRPC                    // endpoints for OTEL_EXPORTER_OTLP_ENDPOINT
//	tr := j.WaitTrace(t, traceID, 4)          // the trace once it holds at least 4 spans
//	s := tr.One(t, "POST /v1/chat/completions")
//	s.Kind, s.Parent, s.Attr("gen_ai.request.model"), s.Children, s.Events
//	j.Stop(); j.Restart(t)                    // the backend down and back, on the same ports
//
// The binary is built once (BinaryPath) into the Go build cache's directory, keyed by the
// hash of tools/jaeger/go.mod and go.sum, and reused across test processes and runs;
// TOLLGATE_JAEGER names a prebuilt binary instead. A cold build takes minutes; later ones
// take nothing.
package jaegertest
