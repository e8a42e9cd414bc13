package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// wrongTypeBase is a valid configuration's head: a provider the models below may name.
const wrongTypeBase = `providers:
  - {name: p, kind: anthropic-messages, base_url: builtin:simulator}
`

// TestConfigErrorsNameTheKeyPath: a configuration file with a value of the wrong type, a
// misspelt key or a key given twice is refused with the key path of each problem (the list's
// index, the nested keys), keeping its line, and what the key takes. Before, yaml.v3's words
// were all there was: "line 6: cannot unmarshal !!str `lots` into int", naming a line and a Go
// type and no key. A number with a fraction where an integer belongs was taken as its whole
// part (a price of 2.5 micros was 2): it is refused too, and a whole number written 1e6 is
// taken.
func TestConfigErrorsNameTheKeyPath(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"a word for an integer", wrongTypeBase + `models:
  - id: m
    family: messages
    max_output_tokens: "lots"
    backend: {provider: p, model: x}
`, `line 6: models[0].max_output_tokens: cannot be "lots" (want an integer)`},
		{"a list for a mapping, and a long word", wrongTypeBase + `models:
  - {id: a, family: messages, max_output_tokens: 5, backend: {provider: p, model: x}}
  - id: b
    max_output_tokens: lots and lots of them, really
    backend: [p, x]
`, "line 6: models[1].max_output_tokens: cannot be \"lots and lots of them, really\" (want an integer)\n" +
			"line 7: models[1].backend: cannot be a list (want a mapping)"},
		{"a mapping for a list", "models: {id: m}\n", `line 1: models: cannot be a mapping (want a list)`},
		{"the file a list", "- a\n- b\n", `line 1: the file: cannot be a list (want a mapping)`},
		{"a bad duration and a list for a string", "server:\n  listen: [\":80\"]\nagents:\n  approval_ttl: 5 minutes\n",
			"line 2: server.listen: cannot be a list (want a string)\n" +
				`line 4: agents.approval_ttl: cannot be "5 minutes" (want a duration such as 30s or 5m)`},
		{"a misspelt key", wrongTypeBase + "models:\n  - {id: m, max_output_token: 5}\n",
			`line 4: models[0].max_output_token: unknown key (want one of backend, context_tokens, display_name, experts, family, id, max_output_tokens, owned_by, price)`},
		{"a misspelt price key", wrongTypeBase + "models:\n  - id: m\n    price: {catalog: x, input_micros_per_mtk: 0}\n",
			`line 5: models[0].price.input_micros_per_mtk: unknown key (want one of cache_read_micros_per_mtok, cache_write_1h_micros_per_mtok, ` +
				`cache_write_5m_micros_per_mtok, catalog, free, input_micros_per_mtok, long_context, output_micros_per_mtok)`},
		{"a price a list", wrongTypeBase + "models:\n  - id: m\n    price: [1, 2]\n", `line 5: models[0].price: cannot be a list (want a mapping)`},
		{"a word in a price", wrongTypeBase + "models:\n  - id: m\n    price:\n      input_micros_per_mtok: cheap\n",
			`line 6: models[0].price.input_micros_per_mtok: cannot be "cheap" (want an integer)`},
		{"a key given twice", "server: {listen: ':80', listen: ':81'}\n", `line 1: server.listen: given twice (first at line 1)`},
		{"an anchor used twice", wrongTypeBase + "models:\n  - &m {id: m, max_output_tokens: x}\n  - *m\n",
			`line 4: models[0].max_output_tokens: cannot be "x" (want an integer)`},
		{"a fraction for an integer", wrongTypeBase + `models:
  - id: m
    family: messages
    max_output_tokens: 1e3
    backend: {provider: p, model: x}
    price: {input_micros_per_mtok: 2.5, output_micros_per_mtok: 10}
`, `line 8: models[0].price.input_micros_per_mtok: cannot be 2.5 (want an integer)`},
		{"a fraction in a plan", "plans:\n  - {name: p, default_rpm: 0.5}\n", `line 2: plans[0].default_rpm: cannot be 0.5 (want an integer)`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v\nwant: %s", c.name, err, c.want)
		}
	}

	// A file's errors begin with its name; a whole number written as a float is taken.
	file := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(file, []byte(cases[0].yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(file); err == nil || err.Error() != file+": "+cases[0].want {
		t.Errorf("Load: %v, want the file's name and %s", err, cases[0].want)
	}
	whole := strings.Replace(cases[0].yaml, `"lots"`, "1e3", 1) + "    price: {free: true}\n"
	c, err := Parse([]byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Model("m"); m.MaxOutputTokens != 1000 {
		t.Errorf("max_output_tokens 1e3: %d, want 1000", m.MaxOutputTokens)
	}
}
