package config

import (
	"strings"
	"testing"
)

func TestDefaultAndExampleAreValid(t *testing.T) {
	c := Default()
	for _, id := range []string{"service-flint", "service-flint-base"} {
		if m, ok := c.Model(id); !ok || m.Family != FamilyChat {
			t.Errorf("default config: %s missing or not chat family", id)
		}
	}
	messages := 0
	for _, m := range c.Models {
		if m.Family == FamilyMessages {
			messages++
		}
	}
	if messages == 0 {
		t.Error("default config has no messages-family model")
	}
	if _, err := Load("example.yaml"); err != nil {
		t.Fatalf("example.yaml: %v", err)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	_, err := Parse([]byte(`
providers:
  - {name: p, kind: carrier-pigeon, base_url: ftp://x}
models:
  - {id: a, family: chat, max_output_tokens: 0, backend: {provider: nope, model: m}}
  - {id: a, family: weird, max_output_tokens: 5, price: {input_micros_per_mtok: -1}}
plans:
  - {name: default, models: [zzz]}
`))
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{"kind must be", "base_url", "max_output_tokens", "unknown provider", "duplicate id", "family must be", "negative price", "exactly one of backend or experts", `unknown model "zzz"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	if _, err := Parse([]byte("modles: []\n")); err == nil {
		t.Fatal("a misspelt key must be an error")
	}
}

func TestResolveSecrets(t *testing.T) {
	c, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.ResolveSecrets(func(name string) (string, bool) { return "secret-" + name, true })
	for _, p := range c.Providers {
		if p.APIKey != "secret-"+p.APIKeyEnv {
			t.Errorf("provider %s key %q", p.Name, p.APIKey)
		}
	}
}
