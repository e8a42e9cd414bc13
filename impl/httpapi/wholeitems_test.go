package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// TestOutputItemsWithoutDeltasAreBilled: what the model writes in the Responses output items
// that a stream carries whole, in response.output_item.done and in no delta, is output the
// provider bills, so an answer without an output count, and a stream cut before its usage,
// are billed it, four characters a token: a local_shell_call's action (command, env,
// working_directory), a computer_call's action (a click's coordinates, the text typed, the
// keys pressed), a web_search_call's action (a search's query, an opened page's url, a find's
// url and pattern; not the sources the search found), an image_generation_call's
// revised_prompt (not the image). The shapes are the Responses API reference's output items
// (platform.openai.com/docs/api-reference/responses) and streaming events
// (platform.openai.com/docs/api-reference/responses-streaming). A function_call's arguments
// are billed too, from the answer's items and from the stream's argument deltas. Relayed to a
// Responses client and translated to the chat and Messages routes alike; a stream cut before
// its items are done is billed what their added events hold. On the code before, all three
// were billed the text's and the arguments' 16 tokens, and not the 136 (79 when not done) of
// the other items.
func TestOutputItemsWithoutDeltasAreBilled(t *testing.T) {
	const text = "Forty characters of answer text, exactly" // 40 characters: 10 tokens
	args := `{\"city\":\"Lyon\",\"days\":3}`                // as sent in a JSON string: 24 characters decoded
	shell := `{"type":"exec","command":["ls","-la","/srv/app/releases"],"env":{"APP_ENV":"staging"},"working_directory":"/srv/app","timeout_ms":5000}`
	click := `{"type":"click","button":"left","x":120,"y":480}`
	typed := `{"type":"type","text":"The quarterly report is attached; please review it by Friday."}`
	keys := `{"type":"keypress","keys":["CTRL","SHIFT","S"]}`
	query, page := "tollgate gateway metering of reasoning tokens", "https://example.com/docs/metering/reasoning"
	pattern := "reasoning_tokens"
	revised := "A watercolor lighthouse at dusk, gulls over a calm sea, warm light in the windows"
	sources := `[{"type":"url","url":"https://example.com/a-source-the-search-found-and-the-model-did-not-write"}]`
	items := []string{
		`{"id":"lsh_1","type":"local_shell_call","call_id":"call_1","status":"completed","action":` + shell + `}`,
		`{"id":"cu_1","type":"computer_call","call_id":"call_2","status":"completed","pending_safety_checks":[],"action":` + click + `}`,
		`{"id":"cu_2","type":"computer_call","call_id":"call_3","status":"completed","pending_safety_checks":[],"action":` + typed + `}`,
		`{"id":"cu_3","type":"computer_call","call_id":"call_4","status":"completed","pending_safety_checks":[],"action":` + keys + `}`,
		fmt.Sprintf(`{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":%q,"sources":%s}}`, query, sources),
		fmt.Sprintf(`{"id":"ws_2","type":"web_search_call","status":"completed","action":{"type":"open_page","url":%q}}`, page),
		fmt.Sprintf(`{"id":"ws_3","type":"web_search_call","status":"completed","action":{"type":"find","url":%q,"pattern":%q}}`, page, pattern),
		fmt.Sprintf(`{"id":"ig_1","type":"image_generation_call","status":"completed","revised_prompt":%q,"result":%q}`, revised, strings.Repeat("iVBORw0KGgo", 200)),
		`{"id":"fc_1","type":"function_call","call_id":"call_5","name":"weather","status":"completed","arguments":"` + args + `"}`,
		fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}`, text),
	}
	whole := len(shell) + len(click) + len(typed) + len(keys) + len(query) + 2*len(page) + len(pattern) + len(revised)
	unrequested := len(text) + len(`{"city":"Lyon","days":3}`) // billed on the code before, the arguments as decoded
	answer := `{"id":"resp_1","object":"response","created_at":1764777600,"status":"completed","model":"gpt-5","output":[` + strings.Join(items, ",") + `]}`

	// The same items streamed: each added and done (a function call's arguments and the
	// message's text in deltas between), and then the stream breaks off before its usage.
	// A second stream breaks off before any item is done: what an item's added event holds
	// (the whole action of a local shell or computer call, as OpenAI streams them) is billed.
	var stream, undone strings.Builder
	seq := 0
	event := func(name, data string) {
		line := fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", name, name, seq, data)
		stream.WriteString(line)
		if name != "response.output_item.done" {
			undone.WriteString(line)
		}
		seq++
	}
	event("response.created", `"response":{"id":"resp_1","object":"response","created_at":1764777600,"model":"gpt-5","status":"in_progress","output":[]}`)
	for i, item := range items {
		added := item
		switch {
		case strings.Contains(item, `"web_search_call"`):
			added = `{"id":"ws","type":"web_search_call","status":"in_progress"}`
		case strings.Contains(item, `"image_generation_call"`):
			added = `{"id":"ig_1","type":"image_generation_call","status":"in_progress"}`
		case strings.Contains(item, `"function_call"`):
			added = strings.Replace(item, `"arguments":"`+args+`"`, `"arguments":""`, 1)
		case strings.Contains(item, `"message"`):
			added = strings.Replace(item, fmt.Sprintf("%q", text), `""`, 1)
		}
		event("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, added))
		switch {
		case strings.Contains(item, `"function_call"`):
			event("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":"fc_1","output_index":%d,"delta":"%s"`, i, args))
		case strings.Contains(item, `"message"`):
			event("response.output_text.delta", fmt.Sprintf(`"item_id":"msg_1","output_index":%d,"content_index":0,"delta":%q`, i, text))
		}
		event("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, item))
	}

	for _, c := range []struct {
		name, contentType, body string
		stream                  bool
	}{
		{"answer", "application/json", answer, false},
		{"cut stream", "text/event-stream", stream.String(), true},
		{"stream cut before the items are done", "text/event-stream", undone.String(), true},
	} {
		g, tenant := standInGateway(t, "actor", config.KindOpenAIResponses, cannedUpstream(t, c.contentType, c.body))
		for i, route := range []string{"/v1/responses", "/v1/chat/completions", "/v1/messages"} {
			model := "actor-" + config.FamilyChat
			if route == "/v1/messages" {
				model = "actor-" + config.FamilyMessages
			}
			status, body := post(t, g, tenant.Key, route, inferenceBody(route, model, "act, please", c.stream))
			if status != 200 {
				t.Fatalf("%s, %s: %d %.500s", c.name, route, status, body)
			}
			rec := latestUsage(t, g, tenant.Account, int64(i+1))
			checkReproducible(t, rec)
			want := int64(unrequested+whole) / 4
			if c.body == undone.String() {
				want = int64(unrequested+len(shell)+len(click)+len(typed)+len(keys)+3) / 4 // the searches and the image are in progress when added
			}
			if rec.OutputTokens != want {
				t.Errorf("%s, %s: billed %d output tokens (status %s); want the text's, the arguments' and the items' %d (the text's and the arguments' alone are %d)",
					c.name, route, rec.OutputTokens, rec.Status, want, unrequested/4)
			}
		}
		checkBooks(t, g, tenant.Account, 100_000_000)
	}
}
