package sim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles a JSON Schema with a real validator (santhosh-tekuri/jsonschema,
// draft 2020-12 unless the schema's $schema names another, formats asserted).
func compileSchema(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	return s
}

// validateJSON checks that text is one JSON value that validates against s.
func validateJSON(t testing.TB, s *jsonschema.Schema, text string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, text)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("%s\ndoes not validate: %v", text, err)
	}
}

// generatorSchemas is the table of the property test: every keyword the generator honours,
// alone and in combination.
var generatorSchemas = []string{
	// Objects, nesting, required, additionalProperties.
	`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"},"none":{"type":"null"}},"required":["name"],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"array","items":{"type":"object","properties":{"d":{"type":"number"}},"required":["d"]}}}}}}}}`,
	`{"type":"object","required":["x","y"],"additionalProperties":{"type":"integer","minimum":3}}`,
	`{"type":"object","minProperties":4,"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"}},"required":["c"],"maxProperties":2}`,
	`{"type":"object","properties":{"id":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"}},"required":["x-count"],"additionalProperties":false}`,
	`{"type":"object","minProperties":2,"patternProperties":{"^[a-z]{3}$":{"type":"string","const":"v"}},"additionalProperties":false}`,
	`{"type":"object","properties":{"card":{"type":"string"},"billing":{"type":"string"}},"required":["card"],"dependentRequired":{"card":["billing"]}}`,
	`{"type":"object"}`,
	`{}`,
	`true`,
	// Arrays.
	`{"type":"array","items":{"type":"string"},"minItems":5,"maxItems":7}`,
	`{"type":"array","items":{"type":"integer"},"maxItems":0}`,
	`{"type":"array","items":{"enum":["a","b","c","d"]},"minItems":3,"uniqueItems":true}`,
	`{"type":"array","items":{"type":"boolean"},"minItems":2,"uniqueItems":true}`,
	`{"type":"array","prefixItems":[{"type":"string","format":"date"},{"type":"integer","minimum":10}],"items":false}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}`,
	`{"type":"array","items":{"type":"integer"},"contains":{"type":"integer","minimum":100},"minContains":2}`,
	`{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"integer","maximum":-5},"minItems":1},"minItems":1},"minItems":1}`,
	// Strings: formats, lengths, patterns.
	`{"type":"object","properties":{"d":{"type":"string","format":"date"},"dt":{"type":"string","format":"date-time"},"t":{"type":"string","format":"time"},"e":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},"h":{"type":"string","format":"hostname"},"v4":{"type":"string","format":"ipv4"},"v6":{"type":"string","format":"ipv6"},"p":{"type":"string","format":"duration"},"jp":{"type":"string","format":"json-pointer"},"re":{"type":"string","format":"regex"},"ur":{"type":"string","format":"uri-reference"}},"required":["d","dt","t","e","u","id","h","v4","v6","p","jp","re","ur"]}`,
	`{"type":"string","minLength":40}`,
	`{"type":"string","maxLength":3}`,
	`{"type":"string","minLength":7,"maxLength":7}`,
	`{"type":"string","maxLength":0}`,
	`{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"}`,
	`{"type":"string","pattern":"^\\+?[1-9][0-9]{7,14}$"}`,
	`{"type":"string","pattern":"^(red|green|blue)$"}`,
	`{"type":"string","pattern":"[a-z]+@[a-z]+\\.com"}`,
	`{"type":"string","pattern":"^\\d{5}(-\\d{4})?$"}`,
	`{"type":"string","pattern":"^[a-z]+$","minLength":10,"maxLength":12}`,
	`{"type":"string","pattern":"^[^\\s\"]+$"}`,
	`{"type":"string","pattern":"^(?i)abc[[:digit:]]\\w*$"}`,
	`{"type":"string","pattern":"^.{3,5}$"}`,
	// Numbers.
	`{"type":"integer","minimum":10,"maximum":12}`,
	`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
	`{"type":"integer","multipleOf":7,"minimum":100,"maximum":200}`,
	`{"type":"number","multipleOf":0.01,"minimum":0.5,"maximum":0.6}`,
	`{"type":"integer","multipleOf":2.5}`,
	`{"type":"integer","exclusiveMinimum":5,"exclusiveMaximum":7}`,
	`{"type":"number","maximum":-10}`,
	`{"type":"number","minimum":1e3}`,
	`{"type":"integer","minimum":-3,"maximum":-3}`,
	`{"type":"number","multipleOf":0.25,"exclusiveMinimum":1,"exclusiveMaximum":1.5}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":2,"exclusiveMaximum":true}`,
	`{"type":"number"}`,
	// const, enum, type arrays.
	`{"const":{"a":[1,"x",null,true]}}`,
	`{"enum":[1,"two",null,{"three":3},[4]]}`,
	`{"type":"string","enum":["a",1,null]}`,
	`{"type":["string","null"]}`,
	`{"type":["null","integer"],"minimum":4}`,
	`{"type":"null"}`,
	`{"type":["string","null"],"enum":["x",null]}`,
	// $ref, $defs, definitions, combinators.
	`{"$defs":{"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"a":{"$ref":"#/$defs/pos"},"b":{"type":"array","items":{"$ref":"#/$defs/pos"}}},"required":["a","b"]}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string","minLength":3}},"type":"object","properties":{"x":{"$ref":"#/definitions/s"}},"required":["x"]}`,
	`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/c"},"c":{"type":"string","format":"email"}},"$ref":"#/$defs/a"}`,
	`{"$defs":{"a/b":{"type":"integer"},"c~d":{"type":"boolean"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a~1b"},"y":{"$ref":"#/$defs/c~0d"}},"required":["x","y"]}`,
	`{"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},"$ref":"#/$defs/base","properties":{"extra":{"type":"string"}},"required":["extra"]}`,
	`{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["value","children"]}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"type":["object","null"],"properties":{"next":{"$ref":"#"}},"required":["next"]}`,
	`{"anyOf":[{"type":"string","minLength":2},{"type":"integer"},{"type":"null"}]}`,
	`{"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number","exclusiveMinimum":0}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},"required":["kind","w","h"],"additionalProperties":false}]}`,
	`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":5}},"required":["b"]},{"properties":{"b":{"maximum":6}}}]}`,
	`{"allOf":[{"type":"number","multipleOf":4},{"multipleOf":6},{"minimum":13}]}`,
	`{"allOf":[{"type":["string","integer"]},{"type":["integer","null"]},{"enum":[3,"x",7]}]}`,
	`{"type":"object","properties":{"p":{"oneOf":[{"type":"string","format":"uuid"},{"type":"integer","minimum":0,"maximum":9}]}},"required":["p"],"anyOf":[{"required":["q"],"properties":{"q":{"type":"boolean"}}},{"required":["r"],"properties":{"r":{"const":"R"}}}]}`,
	`{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/leaf"},{"type":"array","items":{"$ref":"#/$defs/leaf"}}]},"minItems":3,"$defs":{"leaf":{"type":"string","enum":["x","y"]}}}`,
	// A strict OpenAI-style schema and the shape the Anthropic SDK reflects from a struct.
	`{"type":"object","properties":{"title":{"type":"string"},"rating":{"anyOf":[{"type":"integer"},{"type":"null"}]},"genres":{"type":"array","items":{"type":"string","enum":["drama","comedy","horror"]}},"cast":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"role":{"type":["string","null"]}},"required":["name","role"],"additionalProperties":false}}},"required":["title","rating","genres","cast"],"additionalProperties":false}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"Name":{"type":"string"},"Tags":{"type":"array","items":{"type":"string"}},"Inner":{"type":"object","properties":{"N":{"type":"integer"}},"required":["N"],"additionalProperties":false}},"required":["Name","Tags","Inner"],"additionalProperties":false}`,
}

// TestGenerateJSONValidates is the property test: for every schema of the table and many
// seeds, the generated text is JSON that validates against the schema, its tokens join to the
// text, and the same seed gives the same tokens.
func TestGenerateJSONValidates(t *testing.T) {
	for i, schema := range generatorSchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			s := compileSchema(t, schema)
			for seed := uint64(0); seed < 40; seed++ {
				frags, err := generateJSON([]byte(schema), mix(seed))
				if err != nil {
					t.Fatal(err)
				}
				text := strings.Join(frags, "")
				validateJSON(t, s, text)
				again, _ := generateJSON([]byte(schema), mix(seed))
				if strings.Join(again, "\x00") != strings.Join(frags, "\x00") {
					t.Fatalf("seed %d: two runs differ: %q %q", seed, frags, again)
				}
				for j, f := range frags {
					if f == "" && len(frags) > 1 {
						t.Fatalf("empty token %d in %q", j, frags)
					}
				}
			}
		})
	}
}

// FuzzGenerateJSON checks the same property for any seed (run with -fuzz to explore; without
// it, the seed corpus runs as a test).
func FuzzGenerateJSON(f *testing.F) {
	for i := range generatorSchemas {
		f.Add(uint8(i), uint64(i)*0x9e3779b97f4a7c15)
	}
	compiled := make(map[int]*jsonschema.Schema)
	f.Fuzz(func(t *testing.T, idx uint8, seed uint64) {
		i := int(idx) % len(generatorSchemas)
		s, ok := compiled[i]
		if !ok {
			s = compileSchema(t, generatorSchemas[i])
			compiled[i] = s
		}
		frags, err := generateJSON([]byte(generatorSchemas[i]), seed)
		if err != nil {
			t.Fatal(err)
		}
		validateJSON(t, s, strings.Join(frags, ""))
	})
}

// TestGenerateJSONShape checks the tokenisation, the declared property order and that the
// seed varies the answer.
func TestGenerateJSONShape(t *testing.T) {
	schema := `{"type":"object","properties":{"z":{"type":"integer","const":1},"a":{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2},"m":{"type":"string","minLength":12,"maxLength":30}},"required":["z","a","m"]}`
	frags, err := generateJSON([]byte(schema), 7)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(frags, "")
	if !strings.HasPrefix(text, `{"z":1,"a":[`) || frags[0] != `{"z":` || frags[1] != `1,` || frags[2] != `"a":[` {
		t.Errorf("tokens %q", frags)
	}
	var v struct{ M string }
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatal(err)
	}
	if want := 3 + 1 + 2 + len(strings.Fields(v.M)); len(frags) != want {
		t.Errorf("%d tokens, want %d (one a key or scalar, one a word): %q", len(frags), want, frags)
	}

	seen := map[string]bool{}
	for seed := uint64(0); seed < 20; seed++ {
		frags, _ := generateJSON([]byte(generatorSchemas[0]), seed)
		seen[strings.Join(frags, "")] = true
	}
	if len(seen) < 5 {
		t.Errorf("only %d distinct answers from 20 seeds", len(seen))
	}

	if _, err := generateJSON([]byte(`{"type":`), 1); err == nil {
		t.Error("a schema that is not JSON was accepted")
	}
}

// TestGenerateJSONBounded checks that schemas demanding absurd sizes or infinite nesting still
// give a finite answer quickly.
func TestGenerateJSONBounded(t *testing.T) {
	for _, schema := range []string{
		`{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000}}}`,
		`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`,
		`{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}`,
		`{"allOf":[{"$ref":"#"}]}`,
		`{"type":"string","pattern":"^((((a+)+)+)+)+$","minLength":100000}`,
		`{"type":"string","minLength":100000000}`,
	} {
		frags, err := generateJSON([]byte(schema), 1)
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(frags, ""); !json.Valid([]byte(text)) || len(text) > 8<<20 {
			t.Errorf("%s: %d bytes", schema, len(text))
		}
	}
}
