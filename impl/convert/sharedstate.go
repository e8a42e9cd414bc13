package convert

import (
	"bytes"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// sharedStateFields are, per format, the top-level request fields that name state a provider
// keeps for the account the gateway calls it with: a stored response or conversation to
// continue (Responses), a code-execution container to reuse (Messages). Every tenant's requests
// reach the provider through that one account, so such an id would let one tenant continue
// from, or read, another's state. The gateway keeps no such state per tenant, so it refuses the
// fields rather than pass them through.
var sharedStateFields = map[llm.Format][]string{
	llm.FormatResponses: {"previous_response_id", "conversation"},
	llm.FormatMessages:  {"container"},
}

// SharedStateFields checks a request about to go, as it is, to an upstream of its own format.
// A field naming provider-kept state (see sharedStateFields) that is set is a 400 naming it
// (tools the provider runs and bills per call are PlanHostedTools' to decide). A Responses request asking the upstream to store its answer (store: true)
// gets the names of what is dropped: ForUpstream with NoStore sends store: false, as the
// provider would keep the answer where any tenant's later request could reach it.
func SharedStateFields(f llm.Format, v *jsonview.View) (dropped []string, err error) {
	refused := sharedStateFields[f]
	body := v.Body()
	for _, m := range v.Members() {
		key, value := m.Key, body[m.Start:m.End]
		for _, name := range refused {
			if string(key) == name && !isNull(value) {
				return nil, apierror.Invalid(name, "'%s' is not supported: tollgate keeps no provider-side state for its tenants; send the whole conversation with every request.", name)
			}
		}
		if f == llm.FormatResponses && string(key) == "store" && !isNull(value) && !bytes.Equal(bytes.TrimSpace(value), []byte("false")) {
			dropped = append(dropped, "store")
		}
	}
	return dropped, nil
}
