package config

import (
	"strings"
	"testing"
)

// TestTraceURL: telemetry.trace_url is read from the file, makes a trace's link, and a template
// that is not an http(s) address with the {trace_id} placeholder is refused.
func TestTraceURL(t *testing.T) {
	const models = "models:\n  - {id: a, family: chat, max_output_tokens: 5, price: {free: true}, backend: {provider: p, model: m}}\nproviders:\n  - {name: p, kind: openai-chat, base_url: http://x}\n"
	c, err := Parse([]byte(models + "telemetry:\n  trace_url: \"http://localhost:16686/trace/{trace_id}\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	id := "4bf92f3577b34da6a3ce929d0e0e4736"
	if got := c.Telemetry.TraceUI.Link(id); got != "http://localhost:16686/trace/"+id {
		t.Errorf("link %q", got)
	}
	if got := c.Telemetry.TraceUI.Link(""); got != "" {
		t.Errorf("link of no trace %q", got)
	}
	if got := (TraceUI{}).Link(id); got != "" {
		t.Errorf("link without a template %q", got)
	}
	for _, bad := range []string{"localhost:16686/trace/{trace_id}", "http://localhost:16686/trace/", "javascript:alert(1)//{trace_id}"} {
		_, err := Parse([]byte(models + "telemetry:\n  trace_url: \"" + bad + "\"\n"))
		if err == nil || !strings.Contains(err.Error(), "telemetry.trace_url") {
			t.Errorf("%q: %v, want a telemetry.trace_url error", bad, err)
		}
	}
}
