package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Telemetry is the configuration file's telemetry section: where traces go and what they
// hold. Every field is optional, and the standard OpenTelemetry environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER, ...) win
// over it (impl/telemetry.Resolve). With no endpoint anywhere, tracing is off.
type Telemetry struct {
	// Endpoint is the OTLP endpoint, e.g. "http://localhost:4318" (http/protobuf: /v1/traces
	// is appended) or "http://localhost:4317" (grpc). Empty: tracing off unless the
	// environment names one.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (a hosted backend's API key, say).
	Headers map[string]string `yaml:"headers"`
	// Sampler is an OTEL_TRACES_SAMPLER value (default "parentbased_always_on"); SamplerArg
	// its argument (the ratio of the traceidratio samplers).
	Sampler    string `yaml:"sampler"`
	SamplerArg string `yaml:"sampler_arg"`
	// ServiceName is the service.name resource attribute (default "tollgate").
	ServiceName string `yaml:"service_name"`
	// ResourceAttributes are added to the resource (OTEL_RESOURCE_ATTRIBUTES adds to them).
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	// QueueSize bounds the spans waiting for export (default 8192); a span that finds the
	// queue full is dropped and counted, never waited for.
	QueueSize int `yaml:"queue_size"`
	// ExportTimeout bounds one export (default 10s).
	ExportTimeout time.Duration `yaml:"export_timeout"`
	// CaptureContentAccounts lists the accounts (ids) whose prompts and answers are recorded
	// in span events. Empty (the default): no content is ever recorded.
	CaptureContentAccounts []string `yaml:"capture_content_accounts"`
	// TraceUI is the trace viewer the web console links requests to (trace_url; see TraceUI).
	TraceUI `yaml:",inline"`
}

// validate checks the telemetry section.
func (t Telemetry) validate() error {
	if t.Protocol != "" && !slices.Contains([]string{"http/protobuf", "grpc"}, t.Protocol) {
		return fmt.Errorf("telemetry.protocol: %q is neither http/protobuf nor grpc", t.Protocol)
	}
	if t.QueueSize < 0 || t.ExportTimeout < 0 {
		return fmt.Errorf("telemetry: queue_size and export_timeout may not be negative")
	}
	if err := t.TraceUI.validate(); err != nil {
		return err
	}
	for _, a := range t.CaptureContentAccounts {
		if _, err := uuid.Parse(strings.TrimSpace(a)); err != nil {
			return fmt.Errorf("telemetry.capture_content_accounts: %q is not an account id", a)
		}
	}
	return nil
}
