package convert

import (
	"bytes"
	"strings"

	"github.com/tollgate/tollgate/impl/apierror"
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
// A field naming provider-kept state (see sharedStateFields) that is set is a 400 naming it, and
// so is a tool the provider runs and bills per use (see perUseBilledTool), which the gateway
// does not meter. A Responses request asking the upstream to store its answer (store: true)
// gets the names of what is dropped: ForUpstream with NoStore sends store: false, as the
// provider would keep the answer where any tenant's later request could reach it.
func SharedStateFields(f llm.Format, body []byte) (dropped []string, err error) {
	refused := sharedStateFields[f]
	err = scanTopSpans(body, func(key []byte, start, end int) error {
		value := body[start:end]
		for _, name := range refused {
			if string(key) == name && !isNull(value) {
				return apierror.Invalid(name, "'%s' is not supported: tollgate keeps no provider-side state for its tenants; send the whole conversation with every request.", name)
			}
		}
		if err := refusePerUseBilledTools(f, string(key), value); err != nil {
			return err
		}
		if f == llm.FormatResponses && string(key) == "store" && !isNull(value) && !bytes.Equal(bytes.TrimSpace(value), []byte("false")) {
			dropped = append(dropped, "store")
		}
		return nil
	})
	return dropped, err
}

// refusePerUseBilledTools is the 400 for a top-level member (key, value) of a request of format
// f that turns on a tool the provider runs itself and bills per use (a search, a container
// hour, a generated image) on top of tokens: chat's web_search_options, a Responses
// built-in tool in tools or tool_choice, a Messages server tool in tools. Tollgate bills its
// tenants per token only, so such a tool would be paid by the operator and never billed.
// Client tools (functions, custom tools, computer use, shell, text editor), which the client
// runs and which cost only tokens, pass. A value of the wrong shape is left to the upstream.
func refusePerUseBilledTools(f llm.Format, key string, value []byte) error {
	switch {
	case f == llm.FormatChat && key == "web_search_options" && !isNull(value):
		return perUseBilledError("web_search_options", "Web search (web_search_options)")
	case f == llm.FormatResponses && key == "tool_choice" && firstByte(value) == '{':
		choice, err := parseObject(value, key)
		if err != nil {
			return nil
		}
		if kind, err := objectKind(choice, key); err == nil && perUseBilledTool(f, kind) {
			return perUseBilledError("tool_choice.type", "The tool '"+kind+"' (tool_choice)")
		}
	case (f == llm.FormatResponses || f == llm.FormatMessages) && key == "tools":
		tools, ok := scanArray(value)
		if !ok {
			return nil
		}
		for i, raw := range tools {
			p := idx("tools", i)
			tool, err := parseObject(raw, p)
			if err != nil {
				continue
			}
			if kind, err := objectKind(tool, p); err == nil && perUseBilledTool(f, kind) {
				return perUseBilledError(p+".type", "The tool '"+kind+"' ("+p+")")
			}
		}
	}
	return nil
}

// perUseBilledTool reports whether a tool of type kind in a request of format f is run by the
// provider and billed per use. Responses: web_search and its dated and preview variants
// (web_search_preview, web_search_preview_2025_03_11, ...), file_search (which also reads
// vector stores kept by the provider), code_interpreter and image_generation. Messages: the
// versioned server tools web_search_* and code_execution_* (web_fetch_* costs only the tokens
// it reads, and passes).
func perUseBilledTool(f llm.Format, kind string) bool {
	switch f {
	case llm.FormatResponses:
		switch kind {
		case "file_search", "code_interpreter", "image_generation":
			return true
		}
		return strings.HasPrefix(kind, "web_search")
	case llm.FormatMessages:
		for _, prefix := range []string{"web_search_", "code_execution_"} {
			if strings.HasPrefix(kind, prefix) {
				return true
			}
		}
	}
	return false
}

// perUseBilledError is the 400 naming param for what, a tool the provider bills per use. The
// message names the tool and its place in the request, since the Messages envelope has no
// param.
func perUseBilledError(param, what string) error {
	return apierror.Invalid(param, "%s is not supported: the provider bills it per use, which tollgate does not meter (it bills tokens only), so it is not available through the gateway.", what)
}
