package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// makeRequestSpans makes the spans of one traced JSON chat request as the gateway does
// (impl/httpapi's server and authentication spans, impl/exchange's admission, upstream attempt
// and settlement), with the attributes they carry, for the benchmarks and the exporter's
// differential test. tracer must be sampling.
func makeRequestSpans(tracer trace.Tracer) {
	ctx, server := tracer.Start(context.Background(), "POST", serverKind)
	_, auth := tracer.Start(ctx, "authenticate")
	auth.SetAttributes(AttrAuthOutcome.String("ok"))
	auth.End()
	_, admission := tracer.Start(ctx, "admission")
	admission.SetAttributes(AttrReservationMicros.Int64(12800), AttrAdmission.String(AdmissionAdmitted))
	admission.End()
	_, attempt := tracer.Start(ctx, OperationChat+" gpt-4o-mini", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		GenAIOperationName.String(OperationChat),
		GenAIProviderName.String("openai"),
		GenAIRequestModel.String("gpt-4o-mini"),
		ServerAddress.String("api.openai.com"), ServerPort.Int(443)))
	attempt.SetAttributes(
		GenAIRequestMaxTokens.Int(1024),
		AttrExpert.String("openai/gpt-4o-mini"),
		AttrModel.String("gpt-4o-mini"),
		AttrUpstreamAttempts.Int(1),
		GenAIUsageInputTokens.Int64(1200), GenAIUsageOutputTokens.Int64(340),
		GenAIUsageCacheRead.Int64(1024), GenAIResponseFinishReason.StringSlice([]string{"stop"}),
		GenAIResponseID.String("chatcmpl-AbCdEf0123456789"), GenAIResponseModel.String("gpt-4o-mini-2024-07-18"))
	attempt.End()
	_, settle := tracer.Start(ctx, "settle")
	settle.SetAttributes(AttrCostMicros.Int64(384), AttrSettlementStatus.String("ok"))
	settle.End()
	EndServer(server, ServerEnd{Method: "POST", Path: "/v1/chat/completions", Route: "/v1/chat/completions", Status: 200,
		RequestID: "req_01JEXAMPLE0000000000000000",
		Account:   "7f9c2a4e-3b1d-4c6a-9e8f-0a1b2c3d4e5f", Key: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"})
}
