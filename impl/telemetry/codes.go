package telemetry

import (
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// codesError is the span status of a failure.
const codesError = codes.Error

// Fail marks span as failed with errType (its error.type) and a short description, which must
// hold nothing a tenant's request should not show the operator's backend.
func Fail(span trace.Span, errType, description string) {
	span.SetStatus(codes.Error, description)
	span.SetAttributes(ErrorType.String(errType))
}
