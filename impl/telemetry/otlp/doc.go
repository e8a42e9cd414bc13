// Package otlp exports the OpenTelemetry SDK's ended spans over OTLP/HTTP in protobuf,
// encoding each span straight from the SDK's read-only span into the wire bytes.
//
// What it buys, measured (impl/telemetry BenchmarkExportBatch and BenchmarkEncodeBatch, one
// full batch of 510 spans of 102 traced chat requests, 2 cores): the OpenTelemetry library's
// OTLP/HTTP exporter first copies every span into the generated protobuf structs
// (otlptrace/internal/tracetransform: a struct per attribute, value and span) and then
// marshals them by reflection, 7.4–8.7 µs, 1.7 KB and 22 allocations per span; this package
// takes 2.4–2.9 µs per span including the post (0.9–1.0 µs to encode), 80 bytes and a third
// of an allocation. With tracing at 100 % the library exporter was 15.5 % of the gateway's CPU in the
// flat-out profile, this one 4.6 % (docs/speed.md).
//
// What it gives up: nothing the gateway used. The request is the library's, message for
// message (TestEncoderMatchesTheLibrary, TestEncoderMatchesTheLibraryOnRandomSpans and
// TestEncoderMatchesTheLibraryOnOddSpans decode both and compare them: every attribute type,
// events, links, statuses, dropped counts, resources and scopes, a batch over 2 MiB, and the
// bytes as long as the decoded request re-encoded); retries stay off as they were (a failed
// batch is counted as dropped); a partial success is a PartialSuccessError naming the spans
// rejected (the library counted the whole batch); gzip, extra headers and TLS roots and client
// certificates are HTTPOptions, set from the standard OTEL_EXPORTER_OTLP_* variables by
// impl/telemetry. The body buffer is reused from batch to batch only once the transport has
// closed it (a backend may answer before reading it all: TestExporterBackendAnsweringEarly,
// under the race detector). OTLP over gRPC keeps the library's exporter.
package otlp
