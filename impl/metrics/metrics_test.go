package metrics

import (
	"maps"
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

// TestObserveRefusedHead: refused heads are counted by status, each known status shown at 0
// before its first, any other status under "other", so that the label stays bounded, and a
// refused HTTP/2 preface under "h2c".
func TestObserveRefusedHead(t *testing.T) {
	m := New()
	counts := func() map[string]float64 {
		families, err := m.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			if f.GetName() != "tollgate_http_refused_heads_total" {
				continue
			}
			for _, mt := range f.GetMetric() {
				out[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			}
		}
		return out
	}
	if got := counts(); !maps.Equal(got, map[string]float64{"400": 0, "431": 0, "501": 0, "505": 0, "h2c": 0, "other": 0}) {
		t.Errorf("before any refusal: %v, want each status at 0", got)
	}
	for _, status := range []int{400, 400, 431, 505, 417, 999} {
		m.ObserveRefusedHead(status)
	}
	m.ObserveRefusedHTTP2()
	if got := counts(); !maps.Equal(got, map[string]float64{"400": 2, "431": 1, "501": 0, "505": 1, "h2c": 1, "other": 2}) {
		t.Errorf("after the refusals: %v", got)
	}
}
