package metrics

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// TestObserveRequest: requests are counted per route and status and their durations observed
// per route, through the cached collectors as through the vectors.
func TestObserveRequest(t *testing.T) {
	m := New()
	for range 3 {
		m.ObserveRequest("POST /v1/chat/completions", 200, time.Millisecond, trace.TraceID{})
	}
	m.ObserveRequest("POST /v1/chat/completions", 402, time.Millisecond, trace.TraceID{})
	m.ObserveRequest("GET /v1/models", 200, time.Millisecond, trace.TraceID{})
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	histograms := 0
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			switch f.GetName() {
			case "tollgate_http_requests_total":
				counts[labels] = mt.GetCounter().GetValue()
			case "tollgate_http_request_duration_seconds":
				histograms++
				if labels == "route=POST /v1/chat/completions " && mt.GetHistogram().GetSampleCount() != 4 {
					t.Errorf("chat durations: %d", mt.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	if counts["route=POST /v1/chat/completions status=200 "] != 3 || counts["route=POST /v1/chat/completions status=402 "] != 1 || counts["route=GET /v1/models status=200 "] != 1 {
		t.Errorf("counts %v", counts)
	}
	if histograms != 2 {
		t.Errorf("%d duration series, want 2", histograms)
	}
}
