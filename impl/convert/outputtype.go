package convert

import (
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// RequestedOutputType is the output format a request of format f, read into v, names, as
// gen_ai.output.type says it: "text", or "json" for a JSON object or schema; "" when it names
// none or one of another type. It reads a chat request's response_format, a Responses
// request's text.format and a Messages request's output_format or output_config.format, from
// the members' bytes, allocating nothing.
func RequestedOutputType(f llm.Format, v *jsonview.View) string {
	var typ []byte
	switch f {
	case llm.FormatChat:
		typ = memberValue(topValue(v, "response_format"), "type")
	case llm.FormatResponses:
		typ = memberValue(memberValue(topValue(v, "text"), "format"), "type")
	case llm.FormatMessages:
		if typ = memberValue(topValue(v, "output_format"), "type"); typ == nil {
			typ = memberValue(memberValue(topValue(v, "output_config"), "format"), "type")
		}
	}
	return outputType(typ)
}

// OutputTypeOf is RequestedOutputType of a response format's type as the neutral form holds it
// (llm.ResponseFormat.Type, decoded).
func OutputTypeOf(typ string) string {
	switch typ {
	case "text":
		return "text"
	case "json_object", "json_schema":
		return "json"
	}
	return ""
}

// outputType is OutputTypeOf of a type's JSON string value.
func outputType(value []byte) string {
	switch string(value) {
	case `"text"`:
		return "text"
	case `"json_object"`, `"json_schema"`:
		return "json"
	}
	return ""
}

// topValue is the value of v's top-level member key, nil when v has none.
func topValue(v *jsonview.View, key string) []byte {
	if v == nil {
		return nil
	}
	value, _ := v.Value(key)
	return value
}

// memberValue is the value of the (last) member named key of the JSON object obj, as
// encoding/json would read it; nil when obj is absent, not an object or has no such member.
func memberValue(obj []byte, key string) []byte {
	var found []byte
	_ = eachMember(obj, func(k, value []byte) error {
		if fold(k, key) {
			found = value
		}
		return nil
	})
	return found
}
