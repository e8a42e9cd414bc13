package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The decoder's words for a value of the wrong type, a key no field has and a key given twice
// (gopkg.in/yaml.v3's TypeError lines, and Price.UnmarshalYAML's, which words them the same).
var (
	wrongType  = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
	unknownKey = regexp.MustCompile(`^line (\d+): field (.+) not found in type (.+)$`)
	keyTwice   = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
)

// decodeError rewords the decoder's error for the configuration file b so that each problem
// names the key path it is at (models[1].max_output_tokens), keeping its line: yaml.v3 names
// only the line and a Go type. An error that is not about types and keys (the file is not
// YAML) is returned as it is, and so is a line that cannot be placed.
func decodeError(b []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil {
		return err
	}
	nodes := pathsOf(&doc)
	var errs []error
	var seen []string
	for _, line := range te.Errors {
		// A node an alias repeats is reported once for each, all at the anchor's line.
		if text := reword(nodes, line); !slices.Contains(seen, text) {
			seen = append(seen, text)
			errs = append(errs, errors.New(text))
		}
	}
	return errors.Join(errs...)
}

// fractionalIntegers refuses what the decoder takes silently: a number with a fraction (2.5)
// where the configuration takes an integer, which yaml.v3 decodes as its whole part (a price
// of 2.5 micros would be 2). A whole number written as a float (1e6) is taken.
func fractionalIntegers(b []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	var errs []error
	for _, p := range pathsOf(&doc) {
		if p.goType == nil || p.node.Kind != yaml.ScalarNode || p.node.ShortTag() != "!!float" || !isInteger(p.goType) {
			continue
		}
		var f float64
		if err := p.node.Decode(&f); err == nil && f == math.Trunc(f) {
			continue
		}
		errs = append(errs, fmt.Errorf("line %d: %s: cannot be %s (want an integer)", p.node.Line, where(p.path), shown(p.node)))
	}
	return errors.Join(errs...)
}

// isInteger reports whether t is an integer type other than a duration (which a float does not
// decode into at all).
func isInteger(t reflect.Type) bool {
	if t == reflect.TypeFor[time.Duration]() {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// placed is a node of the file, its key path and the Go type it decodes into (pathsOf).
type placed struct {
	node   *yaml.Node
	path   string
	goType reflect.Type // nil: unknown (a key no field has), or node is a key
	inKey  bool         // node is a mapping's key (its path is the key's own)
}

// pathsOf lists the nodes of a document in the file's order, each with its key path and the Go
// type the configuration decodes it into: a mapping's key and its value both have the path of
// the key (top-level keys bare, nested ones after a dot), a list's item its index in brackets.
// An alias is not followed: the decoder names the node the anchor is on.
func pathsOf(doc *yaml.Node) []placed {
	var out []placed
	var walk func(n *yaml.Node, path string, t reflect.Type)
	walk = func(n *yaml.Node, path string, t reflect.Type) {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, t)
			}
		case yaml.SequenceNode:
			out = append(out, placed{node: n, path: path, goType: t})
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]", elemType(t))
			}
		case yaml.MappingNode:
			out = append(out, placed{node: n, path: path, goType: t})
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				out = append(out, placed{node: k, path: p, inKey: true})
				walk(v, p, valueType(t, k.Value))
			}
		default:
			out = append(out, placed{node: n, path: path, goType: t})
		}
	}
	walk(doc, "", reflect.TypeFor[Config]())
	return out
}

// elemType is the type of a list's items decoded into t (nil: unknown).
func elemType(t reflect.Type) reflect.Type {
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}

// valueType is the type of the value of key in a mapping decoded into t: a struct's field by
// its yaml tag, a map's values (nil: unknown).
func valueType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() != reflect.Struct:
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name == key {
			return f.Type
		}
	}
	return nil
}

// reword rewrites one line of the decoder's TypeError, naming the key path of the node it is
// about; a line it does not know, or cannot place, comes back as it was.
func reword(nodes []placed, line string) string {
	if m := wrongType.FindStringSubmatch(line); m != nil {
		// The node of the type the decoder names, else (a type of an UnmarshalYAML method's
		// own) the first of the value.
		value := func(p placed) bool { return !p.inKey && p.node.ShortTag() == m[2] && sameValue(p.node.Value, m[3]) }
		n, ok := find(nodes, m[1], func(p placed) bool { return value(p) && p.goType != nil && p.goType.String() == m[4] })
		if !ok {
			n, ok = find(nodes, m[1], value)
		}
		if !ok {
			return line
		}
		return fmt.Sprintf("line %s: %s: cannot be %s (want %s)", m[1], where(n.path), shown(n.node), wanted(m[4]))
	}
	if m := unknownKey.FindStringSubmatch(line); m != nil {
		n, ok := find(nodes, m[1], func(p placed) bool { return p.inKey && p.node.Value == m[2] })
		if !ok {
			return line
		}
		if keys := keysOf(m[3]); len(keys) > 0 {
			return fmt.Sprintf("line %s: %s: unknown key (want one of %s)", m[1], n.path, strings.Join(keys, ", "))
		}
		return fmt.Sprintf("line %s: %s: unknown key", m[1], n.path)
	}
	if m := keyTwice.FindStringSubmatch(line); m != nil {
		n, ok := find(nodes, m[1], func(p placed) bool { return p.inKey && p.node.Value == m[2] })
		if !ok {
			return line
		}
		return fmt.Sprintf("line %s: %s: given twice (first at line %s)", m[1], n.path, m[3])
	}
	return line
}

// find returns the first node on the line (a decimal number) that match accepts.
func find(nodes []placed, line string, match func(placed) bool) (placed, bool) {
	l, err := strconv.Atoi(line)
	if err != nil {
		return placed{}, false
	}
	for _, p := range nodes {
		if p.node.Line == l && match(p) {
			return p, true
		}
	}
	return placed{}, false
}

// sameValue reports whether a node's value is the one the decoder quoted: whole, or its first
// seven bytes and "..." when it was longer than ten; a list or mapping is quoted as nothing.
func sameValue(value, quoted string) bool {
	if cut, ok := strings.CutSuffix(quoted, "..."); ok && len(value) > 10 {
		return strings.HasPrefix(value, cut)
	}
	return value == quoted
}

// where is a key path as an error shows it: the whole file when it is empty.
func where(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

// shown is a value as an error names it: a list or mapping by its kind, a string quoted (at
// most 40 characters of it), another scalar as written.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	v := n.Value
	if r := []rune(v); len(r) > 40 {
		v = string(r[:37]) + "..."
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}

// configTypes are the Go types of the configuration by their names as the decoder writes them
// (int64, []config.Model, config.Upstream), so that its errors can be told in the file's words.
var configTypes = func() map[string]reflect.Type {
	types := map[string]reflect.Type{}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		if _, seen := types[t.String()]; seen {
			return
		}
		types[t.String()] = t
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			add(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if f := t.Field(i); f.IsExported() {
					add(f.Type)
				}
			}
		}
	}
	add(reflect.TypeFor[Config]())
	return types
}()

// wanted says what a value of the Go type named goType is written as in the file.
func wanted(goType string) string {
	t, ok := configTypes[goType]
	if !ok {
		// A type of an UnmarshalYAML method's own, such as Price's plain, is a struct.
		if strings.HasPrefix(goType, "config.") {
			return "a mapping"
		}
		return goType
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return goType
}

// keysOf lists, sorted, the keys a mapping decoded into the struct type named goType may have
// (nil: not a struct of the configuration).
func keysOf(goType string) []string {
	t, ok := configTypes[goType]
	if !ok || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if tag, ok := t.Field(i).Tag.Lookup("yaml"); ok {
			if name, _, _ := strings.Cut(tag, ","); name != "" && name != "-" {
				keys = append(keys, name)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
