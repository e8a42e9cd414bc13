package sim

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
)

// Limits of generated values. Below genSoftDepth nesting levels, or once genBudget tokens have
// been written, objects carry only their required properties and arrays their minimum number
// of items, so recursive schemas end and answers stay small. Below genHardDepth levels, or
// after genMaxTokens tokens, a value is null whatever the schema says (only a schema that
// requires infinite nesting, or minimum sizes multiplying beyond reason, gets there). Counts
// and lengths a schema demands are capped at genMaxItems and genMaxLength.
const (
	genSoftDepth = 6
	genHardDepth = 48
	genBudget    = 256
	genMaxTokens = 1 << 16
	genMaxItems  = 1024
	genMaxLength = 1 << 16
)

// generator produces a JSON value that validates against a JSON Schema. Every choice it makes
// (which branch, which enum member, which words and numbers) is drawn from a splitmix64
// sequence started at its seed, so the same schema and seed always give the same text.
type generator struct {
	root  any // the whole schema, for $ref
	state uint64
	depth int // the nesting depth of the value being generated
	f     fragmenter
}

// generateJSON returns a value for the JSON Schema schema (JSON text), split into its output
// tokens (see fragmenter). It fails only when schema is not JSON.
func generateJSON(schema []byte, seed uint64) ([]string, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, err
	}
	g := &generator{root: root, state: seed}
	g.gen(root, 0)
	return g.f.fragments(), nil
}

// next returns the next pseudo-random number of the generator's sequence.
func (g *generator) next() uint64 {
	g.state = mix(g.state)
	return g.state
}

// below returns a number in [0, n) (0 when n <= 0).
func (g *generator) below(n int) int {
	if n <= 0 {
		return 0
	}
	return int(g.next() % uint64(n))
}

// word returns a vocabulary word.
func (g *generator) word() string { return vocabulary[g.below(len(vocabulary))] }

// minimal reports whether a value at depth should be as small as its schema allows.
func (g *generator) minimal(depth int) bool {
	return depth >= genSoftDepth || g.f.scalars >= genBudget
}

// gen writes a value for schema s at nesting depth depth.
func (g *generator) gen(s any, depth int) {
	if depth > genHardDepth || g.f.scalars > genMaxTokens {
		g.f.literal("null")
		return
	}
	g.depth = depth
	fs := g.flatten(s, 0)
	if fs == nil {
		g.f.literal("null") // the schema false: no value validates
		return
	}
	if c, ok := fs.get("const"); ok {
		g.f.value(c)
		return
	}
	if e := fs.array("enum"); len(e) > 0 {
		g.f.value(g.enumMember(fs, e))
		return
	}
	switch g.kind(fs, depth) {
	case "object":
		g.object(fs, depth)
	case "array":
		g.array(fs, depth)
	case "integer":
		g.number(fs, true)
	case "number":
		g.number(fs, false)
	case "boolean":
		if g.below(2) == 0 {
			g.f.literal("true")
		} else {
			g.f.literal("false")
		}
	case "null":
		g.f.literal("null")
	default:
		g.stringValue(fs)
	}
}

// kind chooses the JSON type of the value: the first type the schema allows other than null
// (null itself, when allowed, in minimal mode, which ends recursive structures), null when
// that is all it allows, and otherwise the type its keywords imply (an object at the top
// level, a string elsewhere, when nothing hints).
func (g *generator) kind(fs *jsonObject, depth int) string {
	if ts := typeList(fs); len(ts) > 0 {
		if g.minimal(depth) && slices.Contains(ts, "null") {
			return "null"
		}
		for _, t := range ts {
			if t != "null" {
				return t
			}
		}
		return "null"
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := fs.get(k); ok {
				return true
			}
		}
		return false
	}
	switch {
	case has("properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties", "dependentRequired"):
		return "object"
	case has("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"):
		return "array"
	case has("minLength", "maxLength", "pattern", "format"):
		return "string"
	case has("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
		return "number"
	case depth == 0:
		return "object"
	}
	return "string"
}

// enumMember picks a member of enum, preferring those of a type the schema allows.
func (g *generator) enumMember(fs *jsonObject, enum []any) any {
	if ts := typeList(fs); len(ts) > 0 {
		var fit []any
		for _, v := range enum {
			if valueHasType(v, ts) {
				fit = append(fit, v)
			}
		}
		if len(fit) > 0 {
			enum = fit
		}
	}
	return enum[g.below(len(enum))]
}

// valueHasType reports whether the decoded value v is of one of the JSON Schema types ts.
func valueHasType(v any, ts []string) bool {
	for _, t := range ts {
		switch x := v.(type) {
		case *jsonObject:
			if t == "object" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case json.Number:
			if t == "number" {
				return true
			}
			if r := ratOf(x); t == "integer" && r != nil && r.IsInt() {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case nil:
			if t == "null" {
				return true
			}
		}
	}
	return false
}

// intKeyword returns a non-negative integer keyword such as minLength, capped at limit.
func intKeyword(fs *jsonObject, k string, limit int) (int, bool) {
	r := ratOf(func() any { v, _ := fs.get(k); return v }())
	if r == nil || r.Sign() < 0 {
		return 0, false
	}
	f, _ := r.Float64()
	if f > float64(limit) {
		return limit, true
	}
	return int(f), true
}

// object writes an object: its declared properties in schema order (only the required ones in
// minimal mode), then required names it does not declare, then the properties that
// dependentRequired brings in, within maxProperties, and extra ones up to minProperties.
func (g *generator) object(fs *jsonObject, depth int) {
	props := fs.object("properties")
	required := map[string]bool{}
	for _, v := range fs.array("required") {
		if k, ok := v.(string); ok {
			required[k] = true
		}
	}
	var keys []string
	in := map[string]bool{}
	add := func(k string) {
		if !in[k] {
			in[k] = true
			keys = append(keys, k)
		}
	}
	minimal := g.minimal(depth)
	if props != nil {
		for _, k := range props.keys {
			if !minimal || required[k] {
				add(k)
			}
		}
	}
	for _, v := range fs.array("required") {
		if k, ok := v.(string); ok {
			add(k)
		}
	}
	if dr := fs.object("dependentRequired"); dr != nil {
		for i := 0; i < len(keys); i++ {
			deps, _ := dr.vals[keys[i]].([]any)
			for _, d := range deps {
				if k, ok := d.(string); ok {
					required[k] = true
					add(k)
				}
			}
		}
	}
	if maxP, ok := intKeyword(fs, "maxProperties", genMaxItems); ok && len(keys) > maxP {
		optional := maxP - countRequired(keys, required)
		kept := keys[:0]
		for _, k := range keys {
			if required[k] {
				kept = append(kept, k)
			} else if optional > 0 {
				kept = append(kept, k)
				optional--
			}
		}
		keys = kept
	}
	if minP, ok := intKeyword(fs, "minProperties", genMaxItems); ok && len(keys) < minP {
		if props != nil {
			for _, k := range props.keys {
				if len(keys) < minP {
					add(k)
				}
			}
		}
		for i := 1; len(keys) < minP && i <= 4*minP; i++ {
			if k, ok := g.extraKey(fs, i); ok {
				add(k)
			}
		}
	}
	g.f.raw("{")
	for i, k := range keys {
		if i > 0 {
			g.f.raw(",")
		}
		g.f.str(k)
		g.f.raw(":")
		g.gen(g.propertySchema(fs, k), depth+1)
	}
	g.f.raw("}")
}

// countRequired counts the required names among keys.
func countRequired(keys []string, required map[string]bool) int {
	n := 0
	for _, k := range keys {
		if required[k] {
			n++
		}
	}
	return n
}

// extraKey names the i-th undeclared property added to reach minProperties: "key<i>" where
// additional properties are allowed, else a name made from a patternProperties pattern.
func (g *generator) extraKey(fs *jsonObject, i int) (string, bool) {
	if v, ok := fs.get("additionalProperties"); !ok || v != false {
		return "key" + strconv.Itoa(i), true
	}
	pp := fs.object("patternProperties")
	if pp == nil || len(pp.keys) == 0 {
		return "", false
	}
	return g.patternString(pp.keys[i%len(pp.keys)], 1, 0, false)
}

// propertySchema returns the schema a property named k must satisfy: its declaration (or
// additionalProperties when it has none and no pattern matches it) and every
// patternProperties schema whose pattern matches k.
func (g *generator) propertySchema(fs *jsonObject, k string) any {
	var s any = true
	var matched []any
	if pp := fs.object("patternProperties"); pp != nil {
		for _, pat := range pp.keys {
			if re, err := regexp.Compile(pat); err == nil && re.MatchString(k) {
				matched = append(matched, pp.vals[pat])
			}
		}
	}
	if p, ok := fs.object("properties").get(k); ok {
		s = p
	} else if ap, ok := fs.get("additionalProperties"); ok && len(matched) == 0 {
		s = ap
	}
	for _, m := range matched {
		s = both(s, m)
	}
	if s == false {
		return true // a required name the schema forbids: nothing can satisfy both
	}
	return s
}

// array writes an array: two items (none in minimal mode), at least its prefixItems, within
// minItems and maxItems; the first minContains items also satisfy contains, and with
// uniqueItems an item equal to an earlier one is generated again.
func (g *generator) array(fs *jsonObject, depth int) {
	prefix := fs.array("prefixItems")
	items, hasItems := fs.get("items")
	if tuple, ok := items.([]any); ok { // draft-07 tuple form
		prefix = tuple
		items, hasItems = fs.get("additionalItems")
	}
	if !hasItems {
		items = true
	}
	n := 2
	if g.minimal(depth) {
		n = 0
	} else if len(prefix) > n {
		n = len(prefix)
	}
	contains, hasContains := fs.get("contains")
	minContains := 0
	if hasContains {
		minContains = 1
		if m, ok := intKeyword(fs, "minContains", genMaxItems); ok {
			minContains = m
		}
	}
	minI, _ := intKeyword(fs, "minItems", genMaxItems)
	n = max(n, minI, minContains)
	if maxI, ok := intKeyword(fs, "maxItems", genMaxItems); ok {
		n = min(n, maxI)
	}
	if items == false {
		n = min(n, len(prefix))
	}
	n = min(n, genMaxItems)
	unique := fs.vals["uniqueItems"] == true
	var seen [][]byte
	g.f.raw("[")
	for i := 0; i < n; i++ {
		if i > 0 {
			g.f.raw(",")
		}
		item := items
		if i < len(prefix) {
			item = prefix[i]
		}
		if i < minContains {
			item = both(item, contains)
		}
		m := g.f.mark()
		for try := 0; ; try++ {
			g.gen(item, depth+1)
			if !unique || try == 32 || !containsBytes(seen, g.f.since(m)) {
				break
			}
			g.f.reset(m)
		}
		if unique {
			seen = append(seen, bytes.Clone(g.f.since(m)))
		}
	}
	g.f.raw("]")
}

// containsBytes reports whether list holds b.
func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}
