package telemetry

import (
	"context"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// makeRequestSpans makes the spans of one traced JSON chat request as the gateway does
// (impl/httpapi's server and authentication spans, impl/exchange's admission, upstream attempt
// and settlement), with the attributes they carry, for the benchmarks and the exporter's
// differential test. tracer must be sampling.
func makeRequestSpans(tracer trace.Tracer) {
	ctx, server := tracer.Start(context.Background(), "POST", serverKind)
	server.SetAttributes(semconv.HTTPRequestMethodKey.String("POST"), semconv.URLPath("/v1/chat/completions"))
	server.SetAttributes(AttrRequestID.String("req_01JEXAMPLE0000000000000000"))
	_, auth := tracer.Start(ctx, "authenticate")
	auth.SetAttributes(AttrAuthOutcome.String("ok"))
	auth.End()
	server.SetAttributes(AttrAccount.String("7f9c2a4e-3b1d-4c6a-9e8f-0a1b2c3d4e5f"), AttrKey.String("1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"))
	_, admission := tracer.Start(ctx, "admission", trace.WithAttributes(AttrReservationMicros.Int64(12800)))
	admission.SetAttributes(AttrAdmission.String(AdmissionAdmitted))
	admission.End()
	_, attempt := tracer.Start(ctx, OperationChat+" gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			GenAIOperationName.String(OperationChat),
			GenAIProviderName.String("openai"),
			GenAIRequestModel.String("gpt-4o-mini"),
			GenAIRequestMaxTokens.Int(1024),
			AttrExpert.String("openai/gpt-4o-mini"),
			AttrModel.String("gpt-4o-mini"),
			AttrUpstreamAttempts.Int(1),
		))
	attempt.SetAttributes(GenAIUsageInputTokens.Int64(1200), GenAIUsageOutputTokens.Int64(340),
		GenAIUsageCacheRead.Int64(1024), GenAIResponseFinishReason.StringSlice([]string{"stop"}),
		GenAIResponseID.String("chatcmpl-AbCdEf0123456789"), GenAIResponseModel.String("gpt-4o-mini-2024-07-18"))
	attempt.End()
	_, settle := tracer.Start(ctx, "settle", trace.WithAttributes(AttrCostMicros.Int64(384), AttrSettlementStatus.String("ok")))
	settle.End()
	EndServer(server, "POST", "/v1/chat/completions", 200)
}
