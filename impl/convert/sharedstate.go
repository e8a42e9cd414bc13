package convert

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// sharedStateFields are, per format, the top-level request fields that name state a provider
// keeps for the account the gateway calls it with: a stored response or conversation to
// continue (Responses), a code-execution container to reuse (Messages). Every tenant's requests
// reach the provider through that one account, so such an id would let one tenant continue
// from, or read, another's state. The gateway keeps no such state per tenant, so it refuses the
// fields rather than pass them through. Responses' prompt names a prompt template stored in
// that account. The same holds for references inside the messages (messageReferences): file
// ids and items stored by the provider.
var sharedStateFields = map[llm.Format][]string{
	llm.FormatResponses: {"previous_response_id", "conversation", "prompt"},
	llm.FormatMessages:  {"container"},
}

// SharedStateFields checks a request about to go, as it is, to an upstream of its own format.
// A field naming provider-kept state (see sharedStateFields) that is set is a 400 naming it
// (tools the provider runs and bills per call are PlanHostedTools' to decide), and so is a
// Messages request asking for inference in one region (inference_geo other than "global"),
// priced by Anthropic at a multiple no price states, which the gateway cannot drop without
// serving the request outside that region, and a
// Responses request asking for background mode (background: true): the provider would keep
// the response, queued, for the client to poll with GET /v1/responses/{id}, which the gateway
// does not serve, so the client could never read it, while the provider went on generating
// what the gateway, answered only "queued", billed nothing for. A Responses or chat request
// asking the upstream to store its answer (store: true) gets the names of what is dropped:
// ForUpstream with NoStore sends store: false. A stored Responses answer would be kept where
// any tenant's later request could reach it (previous_response_id); a stored chat completion
// would be kept, with its metadata, among the operator's stored completions, listed and read
// with the operator's key (GET /v1/chat/completions), which no tenant can reach through the
// gateway: the tenant's prompt and answer would stay with the provider for nothing. In the
// messages, a reference to provider-kept state, or to a document the provider fetches by its
// URL, is a 400 naming its place (messageReferences).
func SharedStateFields(f llm.Format, v *jsonview.View) (dropped []string, err error) {
	refused := sharedStateFields[f]
	body := v.Body()
	for _, m := range v.Members() {
		key, value := m.Key, body[m.Start:m.End]
		if err := sharedStateRefusal(refused, f, key, value); err != nil {
			return nil, err
		}
		if (f == llm.FormatResponses || f == llm.FormatChat) && string(key) == "store" && !isNull(value) && !bytes.Equal(bytes.TrimSpace(value), []byte("false")) {
			dropped = append(dropped, "store")
		}
	}
	if err := messageReferences(f, v); err != nil {
		return nil, err
	}
	return dropped, nil
}

// sharedStateRefusal is the 400 for the top-level field key with value of a request of format
// f when it names provider-kept state (refused: sharedStateFields[f]) or asks for background
// mode; nil otherwise. The translation of a request refuses them with the same reason
// (writer.foreign), not as fields another format lacks: no upstream takes them as sent. The key
// is compared as bytes and made a string only for the refusal: this runs for every top-level
// member of every request.
func sharedStateRefusal(refused []string, f llm.Format, key, value []byte) error {
	switch {
	case slices.ContainsFunc(refused, func(name string) bool { return string(key) == name }):
		if !isNull(value) {
			name := string(key)
			return apierror.Invalid(name, "'%s' is not supported: tollgate keeps no provider-side state for its tenants; send the whole conversation with every request.", name)
		}
	case f == llm.FormatResponses && string(key) == "background":
		if !isNull(value) && !bytes.Equal(bytes.TrimSpace(value), []byte("false")) {
			return apierror.Invalid("background", "'background' is not supported: a background response is kept by the provider, to be fetched later with GET /v1/responses/{id}, and tollgate keeps no provider-side state for its tenants; send the request without it (with \"stream\": true, a long answer comes as it is written).")
		}
	case f == llm.FormatMessages && string(key) == "inference_geo":
		if geo, ok := rawString(bytes.TrimSpace(value)); !isNull(value) && (!ok || string(geo) != "global") {
			return apierror.Invalid("inference_geo", "'inference_geo' other than \"global\" is not supported: Anthropic prices inference kept in one region (\"us\") at a multiple of the standard rates (1.1 times), which the gateway's prices do not state, and dropping the field would serve the request outside the region it asks for; send the request without it.")
		}
	}
	return nil
}

// referenceMarkers are, for each format, groups of bytes: the messages of a request of the format
// can hold a reference that messageReferences refuses only when they contain every marker of one
// group; messages that do not (in a body with no \u escape, which could spell one) are not
// decoded for the search. A document fetched by URL needs both "document" and "url": "url" alone
// is in every image sent by URL and in every coding agent's web-fetch tool call (its input's
// url), whose conversations would otherwise be decoded whole on every turn.
var referenceMarkers = map[llm.Format][][][]byte{
	llm.FormatChat:      {{[]byte(`"file_id"`)}},
	llm.FormatResponses: {{[]byte(`"file_id"`)}, {[]byte(`"item_reference"`)}, {[]byte(`"file_url"`)}},
	llm.FormatMessages:  {{[]byte(`"file"`)}, {[]byte(`"container_upload"`)}, {[]byte(`"document"`), []byte(`"url"`)}},
}

// referenceHolders are the top-level members of each format whose values hold the messages.
var referenceHolders = map[llm.Format][]string{
	llm.FormatChat:      {"messages"},
	llm.FormatResponses: {"input"},
	llm.FormatMessages:  {"messages", "system"},
}

// messageReferences refuses, with a 400 naming the place, a reference inside the messages to
// state the provider keeps for the account every tenant shares: a file by its id (chat file
// parts, Responses input_file and input_image parts, Messages document and image blocks whose
// source is a file), an item by its id (Responses item_reference) or a file put into a
// code-execution container (Messages container_upload). The gateway has no files API, so such
// an id can only name another tenant's file or the operator's. Remote MCP servers (Responses mcp
// tools, Messages mcp_servers) are not state (the provider calls the server the client names,
// with the client's credentials): they are not refused here, but removed as content tools by
// PlanHostedTools.
//
// It refuses too a document the provider fetches by its URL (a Messages document block whose
// source is a url, a Responses input_file with a file_url): the provider bills it as input by
// its pages (a PDF's text and an image of each page), a count the request does not state, so
// the reservation, which counted the URL's few bytes, could not cover it (trial h4: a 50-page
// PDF's 125,000 input tokens were billed 15,564 micro-units and 363,936 waived). The same
// document sent inline is reserved by its pages (DocumentTokens). An image by URL passes: the reservation counts
// every image at its model's image bound.
func messageReferences(f llm.Format, v *jsonview.View) error {
	markers := referenceMarkers[f]
	if markers == nil {
		return nil
	}
	escaped := v.UnicodeEscapes() > 0
	for _, name := range referenceHolders[f] {
		raw, ok := v.Value(name)
		if !ok || (!escaped && !containsAnyGroup(raw, markers)) {
			// (A marker elsewhere, in a tool's schema say, is no reference.)
			continue
		}
		var value any
		if err := json.Unmarshal(raw, &value); err != nil {
			return nil // the validator's to refuse
		}
		if path, why := findReference(f, value, name); path != "" {
			return apierror.Invalid(path, "'%s' is not supported: %s", path, why)
		}
	}
	return nil
}

// containsAnyGroup reports whether b contains every marker of one of the groups.
func containsAnyGroup(b []byte, groups [][][]byte) bool {
	for _, group := range groups {
		all := true
		for _, m := range group {
			if !bytes.Contains(b, m) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// The reasons of messageReferences' refusals.
const (
	noSharedState = ", and tollgate keeps no provider-side state for its tenants, who share one provider account; send the content itself."
	fetchedByURL  = "the provider fetches the document at this URL and bills it as input by its pages (the text and an image of each page of a PDF), which the request does not state and the gateway cannot reserve credit for; send the document inline (its base64 data), whose pages the gateway counts and reserves credit for."
)

// findReference is the path of the first reference in value, found at path, that
// messageReferences refuses, and why; "" when there is none.
func findReference(f llm.Format, value any, path string) (string, string) {
	switch x := value.(type) {
	case []any:
		for i, e := range x {
			if p, why := findReference(f, e, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p, why
			}
		}
	case map[string]any:
		if p, why := referenceIn(f, x, path); p != "" {
			return p, why
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p, why := findReference(f, x[k], path+"."+k); p != "" {
				return p, why
			}
		}
	}
	return "", ""
}

// referenceIn is the path of the reference that the object x, found at path, is itself, and
// why it is refused; "" when it is none.
func referenceIn(f llm.Format, x map[string]any, path string) (string, string) {
	typ, _ := x["type"].(string)
	switch f {
	case llm.FormatChat:
		if file, ok := x["file"].(map[string]any); ok && typ == "file" && file["file_id"] != nil {
			return path + ".file.file_id", "a file id names a file the provider keeps" + noSharedState
		}
	case llm.FormatResponses:
		if typ == "item_reference" {
			return path + ".id", "an item reference names an item the provider stored" + noSharedState
		}
		if (typ == "input_file" || typ == "input_image") && x["file_id"] != nil {
			return path + ".file_id", "a file id names a file the provider keeps" + noSharedState
		}
		if typ == "input_file" && x["file_url"] != nil {
			return path + ".file_url", fetchedByURL
		}
	case llm.FormatMessages:
		if typ == "container_upload" {
			return path + ".file_id", "a container upload names a file the provider keeps" + noSharedState
		}
		src, ok := x["source"].(map[string]any)
		if ok && (typ == "document" || typ == "image") && src["type"] == "file" {
			return path + ".source.file_id", "a file source names a file the provider keeps" + noSharedState
		}
		if ok && typ == "document" && src["type"] == "url" {
			return path + ".source.url", fetchedByURL
		}
	}
	return "", ""
}

// pricedTierFormats are the formats whose requests name an OpenAI service tier (auto, default,
// flex, priority or fast, scale). Anthropic's service_tier (auto, standard_only) only chooses capacity
// the operator has committed to, and passes.
var pricedTierFormats = map[llm.Format]bool{llm.FormatChat: true, llm.FormatResponses: true}

// DropPremiumSpeed removes, with an edit, every top-level speed member of a Messages request
// v that asks for anything but the standard speed, and reports whether it did: Anthropic's
// fast mode (speed "fast", with the fast-mode beta the client's anthropic-beta header may
// carry) is priced at a multiple of the standard rates (two to six times, by model), which
// no price has, so that served it would be billed at the standard rates. The request is served
// at the standard speed, and the field is named in the dropped list. A request without it
// costs a look-up.
func DropPremiumSpeed(v *jsonview.View, edits *jsonview.Edits) bool {
	if !v.Has("speed") {
		return false
	}
	body, dropped := v.Body(), false
	for _, m := range v.Members() {
		if string(m.Key) != "speed" {
			continue
		}
		if value := body[m.Start:m.End]; isNull(value) || string(value) == `"standard"` {
			continue
		}
		edits.Remove(m)
		dropped = true
	}
	return dropped
}

// DropFallbacks removes, with an edit, every top-level fallbacks member of a Messages request v
// that is not null, and reports whether it did: Anthropic's server-side fallback (beta
// server-side-fallback-2026-07-01) has the provider serve a request its model declines with the
// models the fallbacks list names, which the gateway neither grants the key nor prices: a tenant
// of one model could be served by any other, the dearest included, billed at its own model's
// rates. The field is named in the dropped list; the request is served by its own model.
func DropFallbacks(v *jsonview.View, edits *jsonview.Edits) bool {
	if !v.Has("fallbacks") {
		return false
	}
	body, dropped := v.Body(), false
	for _, m := range v.Members() {
		if string(m.Key) == "fallbacks" && !isNull(body[m.Start:m.End]) {
			edits.Remove(m)
			dropped = true
		}
	}
	return dropped
}

// RequestedServiceTier is the service tier a request of format f asks for by name ("flex",
// "priority", "scale", ...), or "" when it asks for none, for "auto" or "default" (the
// provider's default, which the reservation covers at the standard rates), or f has no such
// tiers. "fast" is "priority": OpenAI's name for its priority tier since 2026-07-30, whose
// answers say "priority" for either (openai-go v3.96, ChatCompletionNewParamsServiceTier). A
// name the gateway does not know (OpenAI's access-controlled "ultrafast", one added later) is
// returned as it is, so that a price without rates for it has it dropped (DropUnpricedTier)
// rather than served on the provider's dearer tier and billed at the standard rates.
func RequestedServiceTier(f llm.Format, v *jsonview.View) string {
	if !pricedTierFormats[f] || v == nil {
		return ""
	}
	m, ok := v.Lookup("service_tier")
	if !ok {
		return ""
	}
	var tier string
	if json.Unmarshal(v.ValueOf(m), &tier) != nil {
		return ""
	}
	switch tier {
	case "", "auto", "default":
		return ""
	case "fast":
		return "priority"
	}
	return tier
}

// DropUnpricedTier removes, with an edit, the service_tier of the request v when the tier it
// asks for (RequestedServiceTier, read once by the caller) is one priced reports the upstream's
// price has no rates for (OpenAI's scale tier always; flex and priority where the price catalog
// does not give them), and reports whether it did: the request is then served on the
// provider's default tier, the standard one its price bills, and the field is named in the
// dropped list. "auto" and "default" (tier "") pass. Every member named service_tier is
// removed: the providers read the last of duplicated members, as RequestedServiceTier does, so
// removing only that one would hand the upstream the one before it.
func DropUnpricedTier(v *jsonview.View, tier string, edits *jsonview.Edits, priced func(tier string) bool) bool {
	if tier == "" || priced(tier) {
		return false
	}
	for _, m := range v.Members() {
		if string(m.Key) == "service_tier" {
			edits.Remove(m)
		}
	}
	return true
}
