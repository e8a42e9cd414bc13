package httpapi

import (
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
)

// The HTTP edge's tracing glue: the request's SERVER span is made by the edge (pipeline.go),
// authentication's span here; the exchange's own spans (admission, each upstream attempt,
// settlement) and the GenAI metrics are impl/exchange's.

// headerTraceResponse carries the request's trace (W3C Trace Context Level 2 traceresponse:
// "00-<trace id>-<server span id>-<flags>") while tracing is on.
const headerTraceResponse = "Traceresponse"

// traceResponse is the traceresponse header's value for the span context sc.
func traceResponse(sc trace.SpanContext) string {
	// One allocation, the string, where the ids' String methods would make three more.
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// authOutcome names an authentication's refusal for the span ("ok" when it passed).
func authOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	switch {
	case errors.Is(err, auth.ErrMissing):
		return "missing"
	case errors.Is(err, auth.ErrScheme), errors.Is(err, auth.ErrMalformed):
		return "malformed"
	case errors.Is(err, auth.ErrUnknown):
		return "unknown"
	case errors.Is(err, auth.ErrDisabled):
		return "disabled"
	case errors.As(err, new(*auth.ExpiredError)):
		return "expired"
	case apierror.IsUnavailable(err):
		return "unavailable"
	}
	return "error"
}

// addUpstreamWait adds d to the time the request waited for the upstream, which the edge
// takes from its duration for tollgate_added_seconds.
func addUpstreamWait(w http.ResponseWriter, d time.Duration) {
	for {
		switch v := w.(type) {
		case *recorder:
			v.upstreamWait += d
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return
		}
	}
}
