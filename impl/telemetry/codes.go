package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// codesError is the span status of a failure.
const codesError = codes.Error

// Fail marks span as failed with errType (its error.type) and a short description, which must
// hold nothing a tenant's request should not show the operator's backend; attrs, the span's
// other attributes, are set in the same call (each call of the SDK's SetAttributes grows the
// span's slice: see StartInternal).
func Fail(span trace.Span, errType, description string, attrs ...attribute.KeyValue) {
	span.SetStatus(codes.Error, description)
	span.SetAttributes(append(attrs, ErrorType.String(errType))...)
}
