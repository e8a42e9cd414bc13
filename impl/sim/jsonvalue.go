package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// jsonObject is a decoded JSON object that keeps its keys in document order, so that a
// generated object lists its properties in the order the schema declares them.
type jsonObject struct {
	keys []string
	vals map[string]any
}

// get returns the value of key k.
func (o *jsonObject) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

// set sets key k, appending it to the key order when it is new.
func (o *jsonObject) set(k string, v any) {
	if o.vals == nil {
		o.vals = make(map[string]any)
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// object returns the value of key k when it is an object.
func (o *jsonObject) object(k string) *jsonObject {
	v, _ := o.get(k)
	obj, _ := v.(*jsonObject)
	return obj
}

// array returns the value of key k when it is an array.
func (o *jsonObject) array(k string) []any {
	v, _ := o.get(k)
	a, _ := v.([]any)
	return a
}

// str returns the value of key k when it is a string.
func (o *jsonObject) str(k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

// without returns a shallow copy of o without the given keys.
func (o *jsonObject) without(drop ...string) *jsonObject {
	out := &jsonObject{vals: make(map[string]any, len(o.keys))}
outer:
	for _, k := range o.keys {
		for _, d := range drop {
			if k == d {
				continue outer
			}
		}
		out.set(k, o.vals[k])
	}
	return out
}

// decodeOrdered decodes one JSON value into *jsonObject, []any, string, json.Number, bool or
// nil.
func decodeOrdered(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := readOrdered(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("sim: trailing data after a JSON value")
	}
	return v, nil
}

// readOrdered reads the next value from d.
func readOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch delim {
	case '{':
		o := &jsonObject{vals: make(map[string]any)}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			v, err := readOrdered(d)
			if err != nil {
				return nil, err
			}
			o.set(k, v)
		}
		_, err := d.Token()
		return o, err
	case '[':
		a := []any{}
		for d.More() {
			v, err := readOrdered(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return nil, errors.New("sim: unexpected JSON delimiter")
}

// appendJSON appends v (a value as decodeOrdered returns it) as compact JSON.
func appendJSON(b []byte, v any) []byte {
	switch x := v.(type) {
	case *jsonObject:
		b = append(b, '{')
		for i, k := range x.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendJSON(b, x.vals[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case string:
		return appendString(b, x)
	case json.Number:
		return append(b, x...)
	case bool:
		if x {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	default:
		return append(b, "null"...)
	}
}

// jsonEqual reports whether two decoded values have the same compact encoding.
func jsonEqual(a, b any) bool { return bytes.Equal(appendJSON(nil, a), appendJSON(nil, b)) }
