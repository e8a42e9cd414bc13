package reqschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Operation is the compiled request side of one operation of the document.
type Operation struct {
	// Method is the operation's HTTP method in upper case, e.g. "POST".
	Method string
	// Path is the operation's path template as the document writes it, e.g. "/v1/models/{model}".
	Path string

	parameters []parameter
	body       *node   // the request body's schema; nil when the operation declares no body
	nodes      []*node // every compiled node, by id
}

// HasBody reports whether the operation declares a request body.
func (o *Operation) HasBody() bool { return o.body != nil }

// kind is the JSON type a schema accepts; kindAny when the schema names no type.
type kind uint8

const (
	kindAny kind = iota
	kindString
	kindNumber
	kindInteger
	kindBoolean
	kindArray
	kindObject
)

// kindNames are the OpenAPI names of the kinds.
var kindNames = map[string]kind{
	"string": kindString, "number": kindNumber, "integer": kindInteger, "boolean": kindBoolean,
	"array": kindArray, "object": kindObject,
}

// node is one compiled schema: what validation needs of it, with its error texts formatted.
type node struct {
	// id is the node's index in Operation.nodes.
	id int32
	// where locates the schema in the document, for compile errors.
	where string
	// empty: the schema constrains nothing, so every value but null passes (kin-openapi's
	// Schema.IsEmpty). locallyEmpty is the same judged on the schema's own keywords only.
	empty, locallyEmpty bool

	nullable   bool
	kind       kind
	typeReason string // the reason given for a value of another type

	enum       []string // nil when any value is allowed
	enumReason string

	hasMinimum, hasMaximum       bool
	minimum, maximum             float64
	minimumReason, maximumReason string

	minLength uint64
	// hasMaxLength says that maxLength applies (a string of at most maxLength characters).
	hasMaxLength bool
	maxLength    uint64
	minItems     uint64
	items        *node // nil when items are not constrained

	// names is the sorted union of the declared and the required property names: the order in
	// which kin-openapi judges properties, and the index of each name's slot while an object is
	// walked. properties[i] is the schema of names[i], nil for a name that is only required.
	names      []string
	properties []*node
	slotIndex  map[string]int // the slot of each name, when there are many names
	required   []int          // slots of the required names, in the document's order
}

// permits reports whether the schema's type admits strings, booleans, arrays or objects, as k
// says. (Numbers are judged on their value: see walker.number.)
func (n *node) permits(k kind) bool { return n.kind == kindAny || n.kind == k }

// isPlainString reports whether the schema is {type: string} and nothing else.
func (n *node) isPlainString() bool {
	return n.kind == kindString && !n.nullable && n.enum == nil && !n.hasMinimum && !n.hasMaximum &&
		n.minLength == 0 && !n.hasMaxLength && n.minItems == 0 && n.items == nil && len(n.names) == 0
}

// Compile compiles the request side of every operation of doc, a document loaded (and its
// references resolved) by kin-openapi. It fails on any schema keyword, parameter or body media
// type it does not support, naming it.
func Compile(doc *openapi3.T) ([]*Operation, error) {
	if doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("reqschema: OpenAPI %s is not supported, only 3.0", doc.OpenAPI)
	}
	if doc.Paths == nil {
		return nil, nil
	}
	c := &compiler{nodes: map[*openapi3.Schema]*node{}}
	var ops []*Operation
	paths := doc.Paths.Map()
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item := paths[path]
		methods := item.Operations()
		for _, method := range slices.Sorted(maps.Keys(methods)) {
			op, err := c.operation(path, item, method, methods[method])
			if err != nil {
				return nil, fmt.Errorf("reqschema: %s %s: %w", method, path, err)
			}
			ops = append(ops, op)
		}
	}
	if err := c.settle(); err != nil {
		return nil, fmt.Errorf("reqschema: %w", err)
	}
	for _, op := range ops {
		op.nodes = c.all
	}
	return ops, nil
}

// compiler holds the schemas compiled so far, so that each is compiled once and a recursive
// schema refers back to its own node.
type compiler struct {
	nodes map[*openapi3.Schema]*node
	all   []*node // in order of creation
}

func (c *compiler) operation(path string, item *openapi3.PathItem, method string, o *openapi3.Operation) (*Operation, error) {
	op := &Operation{Method: strings.ToUpper(method), Path: path}
	// kin-openapi validates the path item's parameters first (unless the operation overrides
	// them), then the operation's, in the order written.
	var params []*openapi3.ParameterRef
	for _, p := range item.Parameters {
		if p.Value != nil && o.Parameters.GetByInAndName(p.Value.In, p.Value.Name) != nil {
			continue
		}
		params = append(params, p)
	}
	params = append(params, o.Parameters...)
	for _, ref := range params {
		p, err := c.parameter(ref)
		if err != nil {
			return nil, err
		}
		op.parameters = append(op.parameters, p)
	}
	if o.RequestBody == nil {
		return op, nil
	}
	rb := o.RequestBody.Value
	if rb == nil {
		return nil, fmt.Errorf("request body: unresolved $ref %q", o.RequestBody.Ref)
	}
	if len(rb.Content) != 1 {
		return nil, fmt.Errorf("request body: only one media type, application/json, is supported (the document has %d)", len(rb.Content))
	}
	for mediaType, content := range rb.Content {
		if strings.ToLower(strings.TrimSpace(mediaType)) != "application/json" {
			return nil, fmt.Errorf("request body: media type %q is not supported, only application/json", mediaType)
		}
		if content == nil || content.Schema == nil {
			return nil, errors.New("request body: application/json has no schema")
		}
		if len(content.Encoding) > 0 {
			return nil, errors.New("request body: encoding is not supported")
		}
		body, err := c.schema(content.Schema, "request body")
		if err != nil {
			return nil, err
		}
		op.body = body
	}
	return op, nil
}

func (c *compiler) parameter(ref *openapi3.ParameterRef) (parameter, error) {
	p := ref.Value
	if p == nil {
		return parameter{}, fmt.Errorf("parameter: unresolved $ref %q", ref.Ref)
	}
	where := fmt.Sprintf("%s parameter %q", p.In, p.Name)
	if p.In != openapi3.ParameterInPath && p.In != openapi3.ParameterInHeader && p.In != openapi3.ParameterInQuery {
		return parameter{}, fmt.Errorf("%s: only path, query and header parameters are supported", where)
	}
	if p.Content != nil || p.Schema == nil {
		return parameter{}, fmt.Errorf("%s: only a parameter with a schema (not content) is supported", where)
	}
	if (p.Style != "" && p.Style != openapi3.SerializationSimple) || p.AllowEmptyValue || p.AllowReserved {
		return parameter{}, fmt.Errorf("%s: only the simple style is supported (no allowEmptyValue, no allowReserved)", where)
	}
	n, err := c.schema(p.Schema, where)
	if err != nil {
		return parameter{}, err
	}
	if !n.isPlainString() {
		return parameter{}, fmt.Errorf("%s: only the schema {type: string} is supported", where)
	}
	out := parameter{name: p.Name, required: p.Required}
	if p.In == openapi3.ParameterInHeader {
		out.header = http.CanonicalHeaderKey(p.Name)
	}
	out.query = p.In == openapi3.ParameterInQuery
	return out, nil
}

// schema compiles the schema ref points to; where locates it for errors.
func (c *compiler) schema(ref *openapi3.SchemaRef, where string) (*node, error) {
	if ref.Ref != "" {
		where = ref.Ref
	}
	s := ref.Value
	if s == nil {
		return nil, fmt.Errorf("%s: unresolved $ref", where)
	}
	if n := c.nodes[s]; n != nil {
		return n, nil
	}
	n := &node{id: int32(len(c.all)), where: where}
	c.nodes[s] = n
	c.all = append(c.all, n)
	switch keywords := unsupportedKeywords(s); len(keywords) {
	case 0:
	case 1:
		return nil, fmt.Errorf("%s: schema keyword %s is not supported by the request validator", where, keywords[0])
	default:
		return nil, fmt.Errorf("%s: schema keywords %s are not supported by the request validator", where, strings.Join(keywords, ", "))
	}

	n.nullable = s.Nullable
	if s.Type != nil {
		types := s.Type.Slice()
		var k kind
		ok := len(types) == 1
		if ok {
			k, ok = kindNames[types[0]]
		}
		if !ok {
			return nil, fmt.Errorf("%s: type %v is not supported (one of string, number, integer, boolean, array, object)", where, types)
		}
		n.kind = k
		article := "a"
		if k == kindArray || k == kindObject || k == kindInteger {
			article = "an"
		}
		n.typeReason = fmt.Sprintf("value must be %s %s", article, types[0])
	}
	if len(s.Enum) > 0 {
		n.enum = make([]string, len(s.Enum))
		for i, v := range s.Enum {
			text, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: enum value %v is not supported, only strings", where, v)
			}
			n.enum[i] = text
		}
		allowed, err := json.Marshal(s.Enum)
		if err != nil {
			return nil, fmt.Errorf("%s: enum: %w", where, err)
		}
		n.enumReason = "value is not one of the allowed values " + string(allowed)
	}
	if s.Min != nil {
		n.hasMinimum, n.minimum = true, *s.Min
		n.minimumReason = fmt.Sprintf("number must be at least %g", *s.Min)
	}
	if s.Max != nil {
		n.hasMaximum, n.maximum = true, *s.Max
		n.maximumReason = fmt.Sprintf("number must be at most %g", *s.Max)
	}
	n.minLength = s.MinLength
	if s.MaxLength != nil {
		n.hasMaxLength, n.maxLength = true, *s.MaxLength
	}
	n.minItems = s.MinItems
	if s.Items != nil {
		items, err := c.schema(s.Items, where+"/items")
		if err != nil {
			return nil, err
		}
		n.items = items
	}

	names := slices.Sorted(maps.Keys(s.Properties))
	for _, name := range s.Required {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) > 0 {
		n.names = names
		n.properties = make([]*node, len(names))
		if len(names) > 16 {
			n.slotIndex = make(map[string]int, len(names))
		}
		for i, name := range names {
			if n.slotIndex != nil {
				n.slotIndex[name] = i
			}
			if prop := s.Properties[name]; prop != nil {
				child, err := c.schema(prop, where+"/properties/"+name)
				if err != nil {
					return nil, err
				}
				n.properties[i] = child
			}
		}
		for _, name := range s.Required {
			n.required = append(n.required, slices.Index(names, name))
		}
	}

	// What kin-openapi's IsEmpty looks at among the keywords allowed here.
	n.locallyEmpty = s.Type == nil && len(s.Enum) == 0 && !s.Nullable && s.Min == nil && s.Max == nil &&
		s.MinLength == 0 && s.MaxLength == nil && s.MinItems == 0 && len(s.Required) == 0 && len(s.Examples) == 0
	return n, nil
}

// settle decides which nodes are empty: locally empty, with empty items and properties. A cycle
// of schemas that are all locally empty is refused: kin-openapi's IsEmpty would recurse on it
// without end.
func (c *compiler) settle() error {
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[*node]int, len(c.all))
	var visit func(n *node) error
	visit = func(n *node) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("%s: a recursive schema must constrain something itself (a type, for instance)", n.where)
		}
		state[n] = visiting
		defer func() { state[n] = done }()
		n.empty = false
		if !n.locallyEmpty {
			return nil
		}
		children := n.properties
		if n.items != nil {
			children = append(slices.Clip(children), n.items)
		}
		for _, child := range children {
			if child == nil {
				continue
			}
			if err := visit(child); err != nil {
				return err
			}
			if !child.empty {
				return nil
			}
		}
		n.empty = true
		return nil
	}
	for _, n := range c.all {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

// unsupportedKeywords names the keywords set on s that the validator does not implement: every
// field of openapi3.Schema except the implemented keywords and the annotations, so that a
// keyword kin-openapi adds later is refused too.
func unsupportedKeywords(s *openapi3.Schema) []string {
	rest := *s
	// Implemented.
	rest.Type, rest.Nullable, rest.Enum = nil, false, nil
	rest.Min, rest.Max, rest.MinLength, rest.MaxLength, rest.MinItems, rest.Items = nil, nil, 0, nil, 0, nil
	rest.Properties, rest.Required = nil, nil
	if has := rest.AdditionalProperties.Has; has != nil && *has {
		rest.AdditionalProperties.Has = nil
	}
	// Annotations, which take no part in validation.
	rest.Extensions, rest.Origin = nil, nil
	rest.Title, rest.Description, rest.Comment = "", "", ""
	rest.Example, rest.Examples, rest.ExternalDocs, rest.Deprecated, rest.XML = nil, nil, nil, false, nil

	var names []string
	v := reflect.ValueOf(rest)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			continue
		}
		field := v.Type().Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = field.Name
		}
		if name == "additionalProperties" && s.AdditionalProperties.Has != nil {
			name = "additionalProperties: false"
		}
		names = append(names, fmt.Sprintf("%q", name))
	}
	return names
}
