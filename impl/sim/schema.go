package sim

import (
	"encoding/json"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// maxRefHops bounds the $ref, allOf, anyOf and oneOf indirections followed while one schema is
// flattened, so that a reference cycle ends.
const maxRefHops = 64

// flatten returns schema s as one object with its $ref, allOf, anyOf and oneOf resolved: the
// referenced schema and every allOf member are merged in, and one anyOf or oneOf branch is
// chosen and merged in. It returns nil for the schema false, which nothing validates against.
func (g *generator) flatten(s any, hops int) *jsonObject {
	switch x := s.(type) {
	case bool:
		if !x {
			return nil
		}
		return &jsonObject{}
	case *jsonObject:
		if hops > maxRefHops {
			return x.without("$ref", "allOf", "anyOf", "oneOf")
		}
		out := x.without("$ref", "allOf", "anyOf", "oneOf")
		if ref := x.str("$ref"); ref != "" {
			if target, ok := g.lookup(ref); ok {
				out = mergeSchemas(g.flatten(target, hops+1), out)
			}
		}
		for _, member := range x.array("allOf") {
			out = mergeSchemas(out, g.flatten(member, hops+1))
		}
		for _, k := range [...]string{"anyOf", "oneOf"} {
			if branches := x.array(k); len(branches) > 0 {
				out = mergeSchemas(out, g.flatten(g.branch(branches), hops+1))
			}
		}
		return out
	default:
		return &jsonObject{}
	}
}

// branch chooses one of the branches of an anyOf or oneOf by the generator's seed, preferring
// those that allow a value other than null, except in minimal mode, where a branch that allows
// only null wins (it ends recursive structures).
func (g *generator) branch(branches []any) any {
	var valued []any
	for _, b := range branches {
		switch {
		case b == false:
		case g.nullOnly(b):
			if g.minimal(g.depth) {
				return b
			}
		default:
			valued = append(valued, b)
		}
	}
	if len(valued) == 0 {
		valued = branches
	}
	return valued[g.below(len(valued))]
}

// nullOnly reports whether schema s (after its $ref chain) allows only null by its own type,
// const or enum. It looks no deeper, so that choosing a branch stays cheap.
func (g *generator) nullOnly(s any) bool {
	for hops := 0; hops <= maxRefHops; hops++ {
		obj, ok := s.(*jsonObject)
		if !ok {
			return false
		}
		if c, ok := obj.get("const"); ok {
			return c == nil
		}
		if e := obj.array("enum"); len(e) > 0 {
			return !slices.ContainsFunc(e, func(v any) bool { return v != nil })
		}
		if ts := typeList(obj); len(ts) > 0 {
			return len(ts) == 1 && ts[0] == "null"
		}
		ref := obj.str("$ref")
		if ref == "" {
			return false
		}
		if s, ok = g.lookup(ref); !ok {
			return false
		}
	}
	return false
}

// lookup resolves a $ref that is a JSON pointer into the root schema ("#", "#/$defs/x",
// "#/definitions/x", "#/properties/a/items", …).
func (g *generator) lookup(ref string) (any, bool) {
	if ref == "#" {
		return g.root, true
	}
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	cur := g.root
	for _, tok := range strings.Split(ptr, "/") {
		if u, err := url.PathUnescape(tok); err == nil {
			tok = u
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *jsonObject:
			v, ok := c.get(tok)
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// typeList returns the schema's type keyword as a list ("string" or ["string","null"]).
func typeList(s *jsonObject) []string {
	v, _ := s.get("type")
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// mergeSchemas returns a schema that demands what both a and b demand, as far as the generator
// needs: properties, required and types are combined, bounds take the stricter value, and
// subschemas present in both become an allOf of the two. Either being nil (false) gives nil.
func mergeSchemas(a, b *jsonObject) *jsonObject {
	if a == nil || b == nil {
		return nil
	}
	out := &jsonObject{vals: make(map[string]any, len(a.keys)+len(b.keys))}
	for _, k := range a.keys {
		out.set(k, a.vals[k])
	}
	for _, k := range b.keys {
		bv := b.vals[k]
		if av, ok := out.get(k); ok {
			out.set(k, mergeKeyword(k, av, bv))
		} else {
			out.set(k, bv)
		}
	}
	return out
}

// mergeKeyword combines two values of keyword k.
func mergeKeyword(k string, a, b any) any {
	switch k {
	case "properties", "patternProperties", "dependentSchemas":
		ao, aok := a.(*jsonObject)
		bo, bok := b.(*jsonObject)
		if !aok || !bok {
			return a
		}
		out := &jsonObject{}
		for _, key := range ao.keys {
			out.set(key, ao.vals[key])
		}
		for _, key := range bo.keys {
			if av, ok := out.get(key); ok {
				out.set(key, both(av, bo.vals[key]))
			} else {
				out.set(key, bo.vals[key])
			}
		}
		return out
	case "required":
		as, _ := a.([]any)
		bs, _ := b.([]any)
		out := slices.Clone(as)
		for _, v := range bs {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	case "type":
		at := typeList(&jsonObject{vals: map[string]any{"type": a}})
		bt := typeList(&jsonObject{vals: map[string]any{"type": b}})
		var out []any
		for _, x := range at {
			for _, y := range bt {
				switch {
				case x == y:
					out = append(out, x)
				case x == "integer" && y == "number", x == "number" && y == "integer":
					out = append(out, "integer")
				}
			}
		}
		if len(out) == 0 {
			return a
		}
		return out
	case "minimum", "minLength", "minItems", "minProperties", "minContains", "exclusiveMinimum":
		return pickBound(a, b, true)
	case "maximum", "maxLength", "maxItems", "maxProperties", "maxContains", "exclusiveMaximum":
		return pickBound(a, b, false)
	case "enum":
		as, _ := a.([]any)
		bs, _ := b.([]any)
		var out []any
		for _, x := range as {
			if slices.ContainsFunc(bs, func(y any) bool { return jsonEqual(x, y) }) {
				out = append(out, x)
			}
		}
		if len(out) == 0 {
			return a
		}
		return out
	case "multipleOf":
		ra, rb := ratOf(a), ratOf(b)
		if ra == nil || rb == nil || ra.Sign() <= 0 || rb.Sign() <= 0 {
			return a
		}
		num := new(big.Int).Mul(ra.Num(), rb.Num())
		num.Quo(num, new(big.Int).GCD(nil, nil, ra.Num(), rb.Num()))
		den := new(big.Int).GCD(nil, nil, ra.Denom(), rb.Denom())
		return json.Number(ratString(new(big.Rat).SetFrac(num, den)))
	case "uniqueItems":
		return a == true || b == true
	case "items", "additionalProperties", "additionalItems", "contains", "propertyNames",
		"unevaluatedProperties", "unevaluatedItems":
		return both(a, b)
	}
	return a
}

// both returns a schema that demands what schemas a and b demand.
func both(a, b any) any {
	switch {
	case a == false || b == false:
		return false
	case a == true:
		return b
	case b == true:
		return a
	}
	return &jsonObject{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{a, b}}}
}

// pickBound returns the larger (lower is set) or smaller of two numeric bounds; a boolean
// (draft-04 exclusiveMinimum / exclusiveMaximum) is true when either is.
func pickBound(a, b any, lower bool) any {
	if ab, ok := a.(bool); ok {
		bb, _ := b.(bool)
		return ab || bb
	}
	ra, rb := ratOf(a), ratOf(b)
	switch {
	case ra == nil:
		return b
	case rb == nil:
		return a
	case (ra.Cmp(rb) < 0) == lower:
		return b
	}
	return a
}

// ratOf returns a JSON number as an exact rational, or nil when v is not a number.
func ratOf(v any) *big.Rat {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	return r
}

// ratString formats r as a JSON number: an integer, or a decimal with as many places as it
// needs (a JSON number's multiples and midpoints have finite decimal expansions).
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	scaled := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	for places := 1; places <= 64; places++ {
		scaled.Mul(scaled, ten)
		if scaled.IsInt() {
			return r.FloatString(places)
		}
	}
	return r.FloatString(20)
}
