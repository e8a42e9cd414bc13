package telemetry

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tollgate/tollgate/impl/config"
)

// Protocols of the OTLP exporter.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Defaults of the export queue.
const (
	DefaultQueueSize     = 8192
	DefaultBatchSize     = 512
	DefaultBatchTimeout  = time.Second
	DefaultExportTimeout = 10 * time.Second
)

// Settings are the resolved tracing settings: the configuration file's telemetry section with
// the standard environment variables applied over it (see Resolve).
type Settings struct {
	// Enabled is set when an endpoint is named and OTEL_SDK_DISABLED is not true.
	Enabled bool
	// Protocol is ProtocolHTTP or ProtocolGRPC; EndpointURL the full URL spans go to (for
	// http/protobuf, with its /v1/traces path).
	Protocol    string
	EndpointURL string
	Headers     map[string]string
	// Gzip compresses each batch (OTEL_EXPORTER_OTLP_COMPRESSION=gzip).
	Gzip bool
	// CertificateFile (PEM) holds the roots the backend's certificate is checked against
	// instead of the system's; ClientCertificateFile and ClientKeyFile (PEM) the certificate
	// tollgate shows it (mutual TLS). All three empty: the system's roots, no client certificate.
	CertificateFile, ClientCertificateFile, ClientKeyFile string
	// Sampler decides which traces are recorded; SamplerName is what was asked for
	// (parentbased_always_on when nothing was).
	Sampler     sdktrace.Sampler
	SamplerName string
	// ServiceName and ResourceAttributes describe the process in every trace.
	ServiceName        string
	ResourceAttributes map[string]string
	// QueueSize, BatchSize, BatchTimeout and ExportTimeout shape the export queue.
	QueueSize     int
	BatchSize     int
	BatchTimeout  time.Duration
	ExportTimeout time.Duration
	// CaptureContent holds the accounts whose prompts and answers go into span events.
	CaptureContent map[uuid.UUID]struct{}
}

// Resolve applies the standard OpenTelemetry environment (read through getenv, which cmd/
// passes: nothing under impl/ reads the environment) over the configuration file's section:
// OTEL_SDK_DISABLED, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full URL) or
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL), OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL,
// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, OTEL_EXPORTER_OTLP_(TRACES_)COMPRESSION (gzip or none),
// OTEL_EXPORTER_OTLP_(TRACES_)CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY (PEM files),
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_SCHEDULE_DELAY
// (the milliseconds between exports, default 1000), OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
// OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT and OTEL_BSP_EXPORT_TIMEOUT (milliseconds), and
// OTEL_TRACES_EXPORTER (otlp, or none: off, the usual kill switch of a deployment's manifest).
func Resolve(file config.Telemetry, getenv func(string) string) (Settings, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	s := Settings{
		Protocol: file.Protocol, ServiceName: file.ServiceName, QueueSize: file.QueueSize,
		BatchSize: DefaultBatchSize, BatchTimeout: DefaultBatchTimeout, ExportTimeout: file.ExportTimeout,
		Headers: map[string]string{}, ResourceAttributes: map[string]string{}, CaptureContent: map[uuid.UUID]struct{}{},
	}
	for k, v := range file.Headers {
		s.Headers[k] = v
	}
	for k, v := range file.ResourceAttributes {
		s.ResourceAttributes[k] = v
	}
	for _, a := range file.CaptureContentAccounts {
		id, err := uuid.Parse(strings.TrimSpace(a))
		if err != nil {
			return Settings{}, fmt.Errorf("telemetry.capture_content_accounts: %q is not an account id", a)
		}
		s.CaptureContent[id] = struct{}{}
	}
	if v := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); v != "" {
		s.Protocol = v
	}
	if s.Protocol == "" {
		s.Protocol = ProtocolHTTP
	}
	if s.Protocol != ProtocolHTTP && s.Protocol != ProtocolGRPC {
		return Settings{}, fmt.Errorf("OTLP protocol %q: tollgate exports over http/protobuf or grpc", s.Protocol)
	}
	base, full := file.Endpoint, ""
	if v := env("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		base = v
	}
	full = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	switch {
	case full != "":
		s.EndpointURL = full
	case base != "":
		s.EndpointURL = base
		if s.Protocol == ProtocolHTTP {
			s.EndpointURL = strings.TrimSuffix(base, "/") + "/v1/traces"
		}
	}
	if s.EndpointURL != "" {
		u, err := url.Parse(s.EndpointURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Settings{}, fmt.Errorf("OTLP endpoint %q: want a URL such as http://localhost:4318", s.EndpointURL)
		}
	}
	for _, h := range []string{env("OTEL_EXPORTER_OTLP_HEADERS"), env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")} {
		for k, v := range parsePairs(h) {
			s.Headers[k] = v
		}
	}
	switch c := env("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"); strings.ToLower(c) {
	case "gzip":
		s.Gzip = true
	case "", "none":
	default:
		return Settings{}, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: %q is not gzip or none", c)
	}
	s.CertificateFile = env("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE")
	s.ClientCertificateFile = env("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
	s.ClientKeyFile = env("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY")
	if (s.ClientCertificateFile == "") != (s.ClientKeyFile == "") {
		return Settings{}, errors.New("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY go together: name both files or neither")
	}
	for k, v := range parsePairs(env("OTEL_RESOURCE_ATTRIBUTES")) {
		s.ResourceAttributes[k] = v
	}
	if v := env("OTEL_SERVICE_NAME"); v != "" {
		s.ServiceName = v
	}
	if s.ServiceName == "" {
		if v, ok := s.ResourceAttributes["service.name"]; ok {
			s.ServiceName = v
		} else {
			s.ServiceName = "tollgate"
		}
	}
	if v := env("OTEL_BSP_MAX_QUEUE_SIZE"); v != "" {
		n, err := positiveInt("OTEL_BSP_MAX_QUEUE_SIZE", v)
		if err != nil {
			return Settings{}, err
		}
		s.QueueSize = n
	}
	if s.QueueSize <= 0 {
		s.QueueSize = DefaultQueueSize
	}
	if v := env("OTEL_BSP_SCHEDULE_DELAY"); v != "" {
		ms, err := positiveInt("OTEL_BSP_SCHEDULE_DELAY", v)
		if err != nil {
			return Settings{}, err
		}
		s.BatchTimeout = time.Duration(ms) * time.Millisecond
	}
	if v := env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"); v != "" {
		n, err := positiveInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", v)
		if err != nil {
			return Settings{}, err
		}
		s.BatchSize = n
	}
	s.BatchSize = min(s.BatchSize, s.QueueSize)
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_BSP_EXPORT_TIMEOUT"} {
		if v := env(name); v != "" {
			ms, err := positiveInt(name, v)
			if err != nil {
				return Settings{}, err
			}
			s.ExportTimeout = time.Duration(ms) * time.Millisecond
			break
		}
	}
	if s.ExportTimeout <= 0 {
		s.ExportTimeout = DefaultExportTimeout
	}
	name, arg := file.Sampler, file.SamplerArg
	if v := env("OTEL_TRACES_SAMPLER"); v != "" {
		name, arg = v, env("OTEL_TRACES_SAMPLER_ARG")
	}
	sampler, err := parseSampler(name, arg)
	if err != nil {
		return Settings{}, err
	}
	if name == "" {
		name = "parentbased_always_on"
	}
	s.Sampler, s.SamplerName = sampler, name
	disabled := strings.EqualFold(env("OTEL_SDK_DISABLED"), "true")
	switch exporter := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exporter {
	case "", "otlp":
	case "none":
		disabled = true
	default:
		return Settings{}, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not otlp or none (tollgate exports over OTLP)", exporter)
	}
	s.Enabled = s.EndpointURL != "" && !disabled
	return s, nil
}

// positiveInt reads the variable name's value v, a positive integer (a count, or milliseconds).
func positiveInt(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive integer", name, v)
	}
	return n, nil
}

// parseSampler reads an OTEL_TRACES_SAMPLER value and its argument.
func parseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio between 0 and 1", arg)
		}
		return f, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		f, err := ratio()
		return sdktrace.TraceIDRatioBased(f), err
	case "parentbased_traceidratio":
		f, err := ratio()
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f)), err
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not a sampler tollgate knows (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", name)
}

// parsePairs reads "k1=v1,k2=v2" (W3C baggage-like, values percent-encoded), as the OTEL_*
// headers and resource attributes are written. A "+" is a plus, as in W3C Baggage and the
// OpenTelemetry Go SDK's own reading (url.PathUnescape), not a space: base64 credentials carry
// it (trial h8 D2: Grafana Cloud's Basic authorization was corrupted most of the time).
func parsePairs(s string) map[string]string {
	out := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if u, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			v = u
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}
