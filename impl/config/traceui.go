package config

import (
	"fmt"
	"net/url"
	"strings"
)

// TraceUI is where a trace can be looked at: the telemetry section's trace_url, a trace
// viewer's address with the placeholder {trace_id}, e.g.
// "http://localhost:16686/trace/{trace_id}" (Jaeger) or a Grafana Explore link. The web
// console's request log links each request to its trace there; without it, the log shows the
// trace id to copy.
type TraceUI struct {
	// URL is the address template; "" when none is configured.
	URL string `yaml:"trace_url"`
}

// traceIDPlaceholder is what TraceUI.URL's trace id stands in for.
const traceIDPlaceholder = "{trace_id}"

// Link is the address of the trace with id traceID (32 lower-case hex digits), or "" when no
// template is configured or the id is empty.
func (t TraceUI) Link(traceID string) string {
	if t.URL == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(t.URL, traceIDPlaceholder, url.PathEscape(traceID))
}

// validate checks that a configured template is an http(s) address with the placeholder.
func (t TraceUI) validate() error {
	if t.URL == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(t.URL, traceIDPlaceholder, "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("telemetry.trace_url: %q is not an http(s) address", t.URL)
	}
	if !strings.Contains(t.URL, traceIDPlaceholder) {
		return fmt.Errorf("telemetry.trace_url: %q has no %s placeholder", t.URL, traceIDPlaceholder)
	}
	return nil
}
