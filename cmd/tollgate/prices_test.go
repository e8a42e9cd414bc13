package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPricesCommand: `tollgate prices` lists catalog entries with their dates and rates per
// kind, and the price of each configured upstream: of -config's file, else of the built-in
// configuration.
func TestPricesCommand(t *testing.T) {
	var out bytes.Buffer
	if err := runPrices([]string{"-date", "2026-12-01", "claude-sonnet-4-5", "gpt-4.1-mini", "no-such"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"$3.00", "$0.30", "$3.75", "$6.00", "$15.00", "above 200000 tokens", "$0.40", "$0.10", "$1.60", "no-such", "no entry in force"} {
		if !strings.Contains(s, want) {
			t.Errorf("the listing lacks %q:\n%s", want, s)
		}
	}
	// Without -config, the configuration `make run` serves: the simulator's models.
	t.Setenv("TOLLGATE_CONFIG", "")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	out.Reset()
	if err := runPrices([]string{"gpt-5"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "service-flint-base") || !strings.Contains(s, "MODEL") {
		t.Errorf("the built-in configuration's prices are missing:\n%s", s)
	}
	out.Reset()
	if err := runPrices([]string{"-config", "../../impl/config/example.yaml", "gpt-5"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "service-sonnet") || !strings.Contains(s, "anthropic/claude-sonnet-4-5") || !strings.Contains(s, "claude-sonnet-4-5 20") {
		t.Errorf("the configuration's prices are missing:\n%s", s)
	}
	if dollars(25_000) != "$0.025" || dollars(300_000) != "$0.30" || dollars(0) != "$0.00" {
		t.Errorf("dollars: %s %s %s", dollars(25_000), dollars(300_000), dollars(0))
	}
}
