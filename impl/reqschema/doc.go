// Package reqschema validates HTTP requests against the request side of an OpenAPI 3.0 document
// without decoding the body into Go values.
//
// Compile runs once, at startup, over the document as kin-openapi loaded it: it resolves every
// $ref through the loaded *openapi3.Schema values, memoizes the schemas it has seen (so a
// recursive schema becomes a cycle in the compiled tree rather than an endless compilation), and
// turns the JSON request body schema and the parameters of every operation into a small tree of
// nodes that holds, for each schema, only what validation needs: the accepted type, the bounds
// with their error texts already formatted, and the object properties sorted by name.
//
// Validating a body is then one pass over its bytes: a JSON tokenizer walks the body and the
// compiled tree together, checking the syntax of everything and the schema of whatever the
// tree describes. Nothing is decoded into maps or interfaces; values the schema does not
// constrain (unknown properties, unconstrained content) are only checked for syntax. The walk
// allocates nothing on a valid body. When the body is invalid, the failure remembers only the
// byte offset of the offending value, and a second walk, taken only then, rebuilds the field
// path (as JSON pointer tokens) that leads to it.
//
// kin-openapi's openapi3filter.ValidateRequest is the reference, and the results match it: the
// same bodies are accepted, and a rejected body is reported at the same field, with the same
// keyword and reason, even when a body has several faults (properties are judged in name order,
// and a property's own faults before a missing required property, as kin-openapi does). A
// duplicated property name counts only with its last value, as encoding/json decodes it. Numbers
// are judged on their float64 value, so 1e2, 1.0 and -0 are integers and a number beyond the
// float64 range is refused where a schema applies to it. Strings are measured in characters after
// decoding, with each invalid UTF-8 byte counted as one replacement character, and invalid UTF-8
// is otherwise accepted by ValidateBody, as kin-openapi accepts it; ValidateBodyStrict, which the
// gateway uses, refuses it, pointing at the first such string, for the cost of one utf8.Valid
// over each string that has bytes above 0x7F (nothing more for ASCII text). Nesting deeper than 10000 arrays and objects is a syntax error, as in
// encoding/json, and the walk does not recurse on values the schema does not describe. The one
// deliberate difference: text after the JSON value (other than white space) makes the body
// invalid JSON, where kin-openapi's decoder reads the first value and ignores the rest.
//
// The supported schema keywords are exactly those the gateway's request schemas use: type (one
// of string, number, integer, boolean, array, object), nullable, enum (of strings), minimum,
// maximum, minLength, maxLength, minItems, items, properties, required and additionalProperties: true (the
// default); title, description, example, examples, externalDocs, deprecated, xml, $comment and
// extensions are accepted as annotations. A request body must be declared as application/json
// only. Parameters may be declared in the path, the query or a header, with the default style and a plain
// string schema. Compile fails, naming the schema and the keyword, on anything else (format,
// oneOf, pattern, additionalProperties: false, default, readOnly, a cookie parameter, an OpenAPI
// 3.1 document, ...), so that an edit to the document can never quietly go unvalidated:
// supporting a new keyword means adding it here, with kin-openapi's semantics.
package reqschema
