package config

import (
	"strings"
	"testing"
)

// TestTelemetrySection: the telemetry section is read from the file and checked: a protocol
// the exporter does not speak and an account that is not an id are refused.
func TestTelemetrySection(t *testing.T) {
	base := string(defaultYAML)
	c, err := Parse([]byte(base + `
telemetry:
  endpoint: http://collector:4318
  protocol: grpc
  sampler: parentbased_traceidratio
  sampler_arg: "0.1"
  headers: {x-honeycomb-team: k}
  capture_content_accounts: [0b9a8f4e-3f5c-4a8e-9d3b-2c1e5f6a7b8c]
`))
	if err != nil {
		t.Fatal(err)
	}
	tm := c.Telemetry
	if tm.Endpoint != "http://collector:4318" || tm.Protocol != "grpc" || tm.SamplerArg != "0.1" || tm.Headers["x-honeycomb-team"] != "k" || len(tm.CaptureContentAccounts) != 1 {
		t.Errorf("telemetry %+v", tm)
	}
	for bad, want := range map[string]string{
		"telemetry: {protocol: http/json}":              "http/json",
		"telemetry: {capture_content_accounts: [acme]}": "acme",
	} {
		if _, err := Parse([]byte(base + "\n" + bad + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", bad, err, want)
		}
	}
}
