package telemetry

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/config"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestResolve: the standard OTEL_* variables win over the file's section, endpoints get the
// OTLP/HTTP path, and tracing is on only with an endpoint and without OTEL_SDK_DISABLED.
func TestResolve(t *testing.T) {
	account := uuid.New()
	file := config.Telemetry{Endpoint: "http://file:4318", Sampler: "traceidratio", SamplerArg: "0.5", ServiceName: "from-file",
		Headers: map[string]string{"a": "1"}, CaptureContentAccounts: []string{account.String()}}
	cases := []struct {
		name        string
		file        config.Telemetry
		env         map[string]string
		enabled     bool
		url, proto  string
		sampler     string // a substring of the sampler's description
		service     string
		wantErrText string
	}{
		{name: "nothing configured: off", enabled: false, proto: ProtocolHTTP, sampler: "ParentBased{root:AlwaysOnSampler", service: "tollgate"},
		{name: "the file alone", file: file, enabled: true, url: "http://file:4318/v1/traces", proto: ProtocolHTTP, sampler: "TraceIDRatioBased{0.5}", service: "from-file"},
		{name: "the environment wins", file: file, env: map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SERVICE_NAME": "from-env",
		}, enabled: true, url: "http://env:4317", proto: ProtocolGRPC, sampler: "ParentBased{root:TraceIDRatioBased{0.25}", service: "from-env"},
		{name: "a traces endpoint is a full URL", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://x.example/custom"},
			enabled: true, url: "https://x.example/custom", proto: ProtocolHTTP, sampler: "ParentBased", service: "tollgate"},
		{name: "OTEL_SDK_DISABLED turns it off", file: file, env: map[string]string{"OTEL_SDK_DISABLED": "true"},
			enabled: false, url: "http://file:4318/v1/traces", proto: ProtocolHTTP, sampler: "TraceIDRatioBased", service: "from-file"},
		{name: "service.name from the resource attributes", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=billing%20edge,deployment.environment=prod"},
			proto: ProtocolHTTP, sampler: "ParentBased", service: "billing edge"},
		{name: "an unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErrText: "http/json"},
		{name: "an unknown sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, wantErrText: "jaeger_remote"},
		{name: "a ratio out of range", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, wantErrText: "ratio"},
		{name: "an endpoint that is not a URL", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, wantErrText: "URL"},
		{name: "an unknown compression", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, wantErrText: "zstd"},
		// OTEL_TRACES_EXPORTER=none, a deployment's usual kill switch, turns it off (trial h8 D16).
		{name: "OTEL_TRACES_EXPORTER=none turns it off", file: file, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"},
			enabled: false, url: "http://file:4318/v1/traces", proto: ProtocolHTTP, sampler: "TraceIDRatioBased", service: "from-file"},
		{name: "OTEL_TRACES_EXPORTER=otlp", file: file, env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			enabled: true, url: "http://file:4318/v1/traces", proto: ProtocolHTTP, sampler: "TraceIDRatioBased", service: "from-file"},
		{name: "an exporter tollgate has not", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErrText: "zipkin"},
		{name: "a timeout that is not milliseconds", env: map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, wantErrText: "OTEL_EXPORTER_OTLP_TIMEOUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Resolve(tc.file, envOf(tc.env))
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Enabled != tc.enabled || s.EndpointURL != tc.url || s.Protocol != tc.proto || s.ServiceName != tc.service ||
				!strings.Contains(s.Sampler.Description(), tc.sampler) {
				t.Errorf("got enabled %v url %q protocol %q service %q sampler %s", s.Enabled, s.EndpointURL, s.Protocol, s.ServiceName, s.Sampler.Description())
			}
		})
	}
	if d, err := Resolve(file, envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TIMEOUT": "9000",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64"})); err != nil || d.ExportTimeout != 2500*time.Millisecond || d.BatchSize != 64 {
		t.Errorf("export timeout %v and batch size %d from the environment (%v), want 2.5s and 64", d.ExportTimeout, d.BatchSize, err)
	}
	s, err := Resolve(file, envOf(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=k%3D1,b=2,Authorization=Basic%20YWJj+ZGVm/Zz==", "OTEL_BSP_MAX_QUEUE_SIZE": "16"}))
	if err != nil {
		t.Fatal(err)
	}
	// A "+" stays a plus (base64), as the OpenTelemetry Go SDK reads it (trial h8 D2).
	if s.Headers["a"] != "1" || s.Headers["x-honeycomb-team"] != "k=1" || s.Headers["b"] != "2" || s.Headers["Authorization"] != "Basic YWJj+ZGVm/Zz==" ||
		s.QueueSize != 16 || s.BatchSize != 16 {
		t.Errorf("headers %v, queue %d, batch %d", s.Headers, s.QueueSize, s.BatchSize)
	}
	if s.Gzip {
		t.Error("gzip without OTEL_EXPORTER_OTLP_COMPRESSION")
	}
	if d, _ := Resolve(config.Telemetry{Endpoint: "http://file:4318"}, envOf(nil)); d.SamplerName != "parentbased_always_on" {
		t.Errorf("the default sampler is named %q, want parentbased_always_on (the start-up log shows it)", d.SamplerName)
	}
	if s, _ := Resolve(file, envOf(map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "none", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "GZIP"})); !s.Gzip {
		t.Error("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=GZIP did not turn gzip on over the general variable")
	}
	if _, ok := s.CaptureContent[account]; !ok || len(s.CaptureContent) != 1 {
		t.Errorf("capture %v, want only %s", s.CaptureContent, account)
	}
}

// TestPropagation: a trace context written into a job's metadata by InjectInto is continued
// by Extract on the other side, its tracestate kept; an upstream's headers get the traceparent
// alone (Inject).
func TestPropagation(t *testing.T) {
	carrier := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "v=1"}
	ctx := Extract(context.Background(), carrier)
	if TraceID(ctx) != "4bf92f3577b34da6a3ce929d0e0e4736" || SampledTrace(trace.SpanFromContext(ctx)).String() != TraceID(ctx) {
		t.Fatalf("extracted trace %q", TraceID(ctx))
	}
	out := propagation.MapCarrier{}
	InjectInto(ctx, out)
	if out["traceparent"] != carrier["traceparent"] || out["tracestate"] != "v=1" {
		t.Errorf("injected %v, want %v", out, carrier)
	}
	h := http.Header{}
	Inject(ctx, h)
	if h.Get("traceparent") != carrier["traceparent"] || h.Get("tracestate") != "" {
		t.Errorf("upstream headers %v: want the traceparent alone", h)
	}
}
