package reqschema

import "net/http"

// parameter is a compiled path, query or header parameter. Its schema is {type: string}, which every
// value passes, so what remains to check is presence.
type parameter struct {
	name string
	// header is the canonical header key of a header parameter, "" for a path parameter.
	header string
	// query is set for a query parameter.
	query    bool
	required bool
}

// ValidateParameters checks the operation's declared parameters in r, in the order kin-openapi
// checks them: a required parameter must be present (a path parameter non-empty), and a header
// present without a value is refused. It returns nil or an *Error of kind Parameter.
func (o *Operation) ValidateParameters(r *http.Request) error {
	for _, p := range o.parameters {
		if p.query {
			// A form-style string: kin-openapi takes an empty value ("?q=" or "?q") as the
			// empty string, which the schema {type: string} accepts.
			if _, present := r.URL.Query()[p.name]; !present && p.required {
				return &Error{Kind: Parameter, Parameter: p.name, Reason: "value is required but missing"}
			}
			continue
		}
		if p.header == "" {
			if p.required && r.PathValue(p.name) == "" {
				return &Error{Kind: Parameter, Parameter: p.name, Reason: "value is required but missing"}
			}
			continue
		}
		values, present := r.Header[p.header]
		switch {
		case !present && p.required:
			return &Error{Kind: Parameter, Parameter: p.name, Reason: "value is required but missing"}
		case present && len(values) == 0:
			return &Error{Kind: Parameter, Parameter: p.name, Reason: "empty value is not allowed"}
		}
	}
	return nil
}
