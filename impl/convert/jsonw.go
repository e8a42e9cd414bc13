package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/tollgate/tollgate/impl/jsontext"
)

// object is a JSON object whose members are written in order. Building the wire bodies from
// ordered objects keeps the output deterministic (golden files compare bytes) and lets raw
// values be written verbatim: nothing is re-compacted or re-escaped.
type object []member

// member is one key and value of an object.
type member struct {
	key   string
	value any
}

// set appends a member.
func (o *object) set(key string, value any) { *o = append(*o, member{key, value}) }

// has reports whether the object has a member with the key.
func (o object) has(key string) bool {
	for _, m := range o {
		if m.key == key {
			return true
		}
	}
	return false
}

// marshal writes v as compact JSON. Values of type object, []any, []object, []string,
// json.RawMessage (written verbatim), string, bool, integers, float64 and *float64 are written
// directly; anything else goes through encoding/json without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := write(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func write(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case object:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, m.key)
			b.WriteByte(':')
			if err := write(b, m.value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []object:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := write(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, e)
		}
		b.WriteByte(']')
	case json.RawMessage:
		if len(x) == 0 {
			b.WriteString("null")
		} else {
			b.Write(x)
		}
	case string:
		writeString(b, x)
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		return writeFloat(b, x)
	case *float64:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		return writeFloat(b, *x)
	case *bool:
		if x == nil {
			b.WriteString("null")
		} else {
			b.WriteString(strconv.FormatBool(*x))
		}
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
	}
	return nil
}

func writeFloat(b *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("convert: cannot encode %v as JSON", f)
	}
	out, err := json.Marshal(f)
	if err != nil {
		return err
	}
	b.Write(out)
	return nil
}

// writeString writes s as a JSON string.
func writeString(b *bytes.Buffer, s string) { b.Write(jsontext.AppendString(b.AvailableBuffer(), s)) }

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
