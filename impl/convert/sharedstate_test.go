package convert

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestSharedStateFields: fields naming provider-kept state are refused, naming the field;
// null ones and nested ones are not; store: true (Responses and chat) is reported as dropped.
func TestSharedStateFields(t *testing.T) {
	cases := []struct {
		f       llm.Format
		body    string
		param   string   // refused field, "" for none
		dropped []string // when not refused
	}{
		{llm.FormatResponses, `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","conversation":{"id":"conv_1"}}`, "conversation", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","previous_response_id":null}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":"hi","previous_response_id":"x"}]}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","store":true}`, "", []string{"store"}},
		{llm.FormatResponses, `{"model":"m","input":"hi","store":false}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","background":true}`, "background", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","background":false}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi","background":null}`, "", nil},
		{llm.FormatResponses, `{"model":"m","input":"hi"}`, "", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"container":"container_1"}`, "container", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[]}`, "", nil},
		// Inference kept in one region, priced by Anthropic at 1.1 times the standard rates
		// (inference_geo, anthropic-sdk-go v1.84 MessageNewParams.InferenceGeo): refused, as
		// dropping it would serve the request outside that region; the default region passes.
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":"us"}`, "inference_geo", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":"u\u0073"}`, "inference_geo", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":7}`, "inference_geo", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_ge\u006f":"us"}`, "inference_geo", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":"global"}`, "", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":"glob\u0061l"}`, "", nil},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"inference_geo":null}`, "", nil},
		{llm.FormatChat, `{"model":"m","messages":[],"inference_geo":"us"}`, "", nil},
		// A stored chat completion is kept with the operator's stored completions, out of the
		// tenant's reach: its store: true is dropped too (sent as false).
		{llm.FormatChat, `{"model":"m","messages":[],"store":true}`, "", []string{"store"}},
		{llm.FormatChat, `{"model":"m","messages":[],"store":false}`, "", nil},
		{llm.FormatChat, `{"model":"m","messages":[]}`, "", nil},
	}
	for _, c := range cases {
		dropped, err := sharedState(c.f, []byte(c.body))
		var e *apierror.Error
		switch {
		case c.param != "" && (!errors.As(err, &e) || e.Param != c.param || e.Kind != apierror.KindInvalidRequest):
			t.Errorf("%s: err %v, want a 400 naming %s", c.body, err, c.param)
		case c.param == "" && (err != nil || !slices.Equal(dropped, c.dropped)):
			t.Errorf("%s: dropped %v, err %v; want %v", c.body, dropped, err, c.dropped)
		}
	}
}

// TestDocumentsByURLAreRefused: a document the provider fetches by its URL, billed as input by
// its pages, which the request does not state, is refused with a 400 naming its place,
// wherever it is in the messages and however its names are spelt; the same document inline,
// an image by URL (counted at the image bound), and a "url" that is no document's source pass.
func TestDocumentsByURLAreRefused(t *testing.T) {
	const pdf = `"https://www.berkshirehathaway.com/letters/2024ltr.pdf"`
	messages := func(content string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + content + `]}]}`
	}
	responses := func(content string) string {
		return `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Sum it up."},` + content + `]}]}`
	}
	cases := []struct {
		f     llm.Format
		body  string
		param string // "" when it passes
	}{
		{llm.FormatMessages, messages(`{"type":"document","source":{"type":"url","url":` + pdf + `}}`), "messages[0].content[0].source.url"},
		{llm.FormatMessages, messages(`{"type":"text","text":"Read it."},{"type":"document","source":{"url":` + pdf + `,"type":"url"},"citations":{"enabled":true}}`), "messages[0].content[1].source.url"},
		{llm.FormatMessages, messages(`{"type":"tool_result","tool_use_id":"t1","content":[{"type":"document","source":{"type":"url","url":` + pdf + `}}]}`), "messages[0].content[0].content[0].source.url"},
		{llm.FormatMessages, messages(`{"type":"document","source":{"type":"\u0075rl","\u0075rl":` + pdf + `}}`), "messages[0].content[0].source.url"},
		{llm.FormatMessages, messages(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}}`), ""},
		{llm.FormatMessages, messages(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The url is below."}}`), ""},
		{llm.FormatMessages, messages(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`), ""},
		{llm.FormatMessages, messages(`{"type":"text","text":"{\"type\":\"document\",\"source\":{\"type\":\"url\"}}"}`), ""},
		{llm.FormatResponses, responses(`{"type":"input_file","file_url":` + pdf + `}`), "input[0].content[1].file_url"},
		{llm.FormatResponses, responses(`{"type":"input_file","filename":"l.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}`), ""},
		{llm.FormatResponses, responses(`{"type":"input_image","image_url":"https://example.com/a.png"}`), ""},
	}
	for _, c := range cases {
		_, err := sharedState(c.f, []byte(c.body))
		if c.param == "" {
			if err != nil {
				t.Errorf("%s: %v, want it to pass", c.body, err)
			}
			continue
		}
		var e *apierror.Error
		if !errors.As(err, &e) || e.Kind != apierror.KindInvalidRequest || e.Param != c.param ||
			!strings.Contains(e.Message, "bills it as input by its pages") || !strings.Contains(e.Message, "inline") {
			t.Errorf("%s: err %v, want a 400 naming %s that says to send the document inline", c.body, err, c.param)
		}
	}
}

// TestDropUnpricedTierRemovesEveryMember: a service_tier the price does not give is removed
// however often it is written (the providers read the last of duplicated members, so removing
// only that one sent the one before it); a priced tier stays as written, "fast" as the
// priority tier it is, and a tier the gateway does not know is one no price gives.
func TestDropUnpricedTierRemovesEveryMember(t *testing.T) {
	priced := func(tier string) bool { return tier == "priority" }
	for _, c := range []struct{ body, want string }{
		{`{"model":"m","service_tier":"flex"}`, `{"model":"m"}`},
		{`{"service_tier":"priority","model":"m","service_tier":"flex"}`, `{"model":"m"}`},
		{`{"service_tier":"flex","service_tier":"scale","service_tier":"scale"}`, `{}`},
		{`{"service_tier":"flex","model":"m","service_tier":"priority"}`, `{"service_tier":"flex","model":"m","service_tier":"priority"}`},
		// OpenAI's fast is its priority tier; a tier the gateway does not know is unpriced.
		{`{"model":"m","service_tier":"fast"}`, `{"model":"m","service_tier":"fast"}`},
		{`{"model":"m","service_tier":"ultrafast"}`, `{"model":"m"}`},
		{`{"model":"m","service_tier":"auto"}`, `{"model":"m","service_tier":"auto"}`},
	} {
		v, err := ReadRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var edits jsonview.Edits
		DropUnpricedTier(v, RequestedServiceTier(llm.FormatChat, v), &edits, priced)
		if got := string(edits.AppendTo(nil, v)); got != c.want {
			t.Errorf("%s: sent %s, want %s", c.body, got, c.want)
		}
	}
}

// TestForUpstreamNoStore: store becomes false, whether absent, true or already false, with
// the other rewrites in the same pass.
func TestForUpstreamNoStore(t *testing.T) {
	cases := map[string]string{
		`{"model":"a","input":"hi"}`:              `{"store":false,"model":"up","input":"hi"}`,
		`{"model":"a","store":true,"input":"hi"}`: `{"model":"up","store":false,"input":"hi"}`,
		`{"store":false}`:                         `{"model":"up","store":false}`,
		`{}`:                                      `{"model":"up","store":false}`,
	}
	for in, want := range cases {
		got, err := forUpstream(nil, []byte(in), "up", UpstreamEdits{NoStore: true})
		if err != nil || string(got) != want {
			t.Errorf("%s: %s, %v; want %s", in, got, err, want)
		}
	}
	got, err := forUpstream(nil, []byte(`{"input":"hi"}`), "up", UpstreamEdits{NoStore: true, IncludeUsage: true})
	if want := `{"model":"up","stream_options":{"include_usage":true},"store":false,"input":"hi"}`; err != nil || string(got) != want {
		t.Errorf("all three added: %s, %v; want %s", got, err, want)
	}
}

// TestClientToolsPass: tools the client runs cost only tokens and go through untouched, as do
// an unset web_search_options and a "type" that is not a tool's own.
func TestClientToolsPass(t *testing.T) {
	cases := []struct {
		f    llm.Format
		body string
	}{
		{llm.FormatChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"web_search","parameters":{"type":"object"}}},{"type":"custom","custom":{"name":"g"}}]}`},
		{llm.FormatChat, `{"model":"m","messages":[],"web_search_options":null}`},
		{llm.FormatResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"type":{"type":"string","enum":["web_search"]}}}},{"type":"custom","name":"g"},{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"},{"type":"local_shell"}],"tool_choice":"auto"}`},
		{llm.FormatResponses, `{"model":"m","input":"hi","tool_choice":{"type":"function","name":"f"},"tools":null}`},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"custom","name":"g","input_schema":{"type":"object"}},{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768},{"type":"web_fetch_20250910","name":"web_fetch"}]}`},
		// Chat has no server tools: a tool type of another format means nothing there.
		{llm.FormatChat, `{"model":"m","messages":[],"tools":[{"type":"web_search"}]}`},
	}
	for _, c := range cases {
		if dropped, err := sharedState(c.f, []byte(c.body)); err != nil || dropped != nil {
			t.Errorf("%s: dropped %v, err %v; want it to pass", c.body, dropped, err)
		}
	}
}

// TestTranslatedSharedStateSaysWhy: translated to another format, a field naming provider-kept
// state (or asking for background mode) is refused with the gateway's own reason, as it is on
// an upstream of the client's format; not as a field the other format lacks, whose message
// tells the client that "a model served through" its own format "takes it as sent", which no
// model of this gateway does (TestSharedStateFields).
func TestTranslatedSharedStateSaysWhy(t *testing.T) {
	resp := func(extra string) string { return `{"model":"m","input":"hi"` + extra + `}` }
	cases := []struct {
		src   llm.Format
		body  string
		dst   llm.Format
		param string
	}{
		{llm.FormatResponses, resp(`,"previous_response_id":"resp_1"`), llm.FormatChat, "previous_response_id"},
		{llm.FormatResponses, resp(`,"conversation":"conv_1"`), llm.FormatMessages, "conversation"},
		{llm.FormatResponses, resp(`,"prompt":{"id":"pmpt_1"}`), llm.FormatChat, "prompt"},
		{llm.FormatResponses, resp(`,"background":true`), llm.FormatMessages, "background"},
		{llm.FormatResponses, resp(`,"background":true`), llm.FormatChat, "background"},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"container":"container_1"}`, llm.FormatChat, "container"},
	}
	for _, c := range cases {
		req := mustDecode(t, c.src, []byte(c.body))
		if req.MaxTokens == 0 {
			req.MaxTokens = 1000
		}
		_, _, err := EncodeRequest(c.dst, req, "up")
		e := invalid(t, err, c.param)
		if !strings.Contains(e.Message, "no provider-side state") || strings.Contains(e.Message, "takes it as sent") {
			t.Errorf("%s to %v: %q, want the provider-state reason", c.body, c.dst, e.Message)
		}
	}
	// background: false is no request for background mode.
	if _, _, err := EncodeRequest(llm.FormatChat, mustDecode(t, llm.FormatResponses, []byte(resp(`,"background":false`))), "up"); err != nil {
		t.Errorf("background: false: %v", err)
	}
}

// TestSharedStateFieldsAllocatesNothing: the check runs over every top-level member of every
// request relayed as it is; a request it lets pass costs it no allocation (the field names are
// compared as bytes, made strings only for a refusal: a version that made each a string
// allocated once per member).
func TestSharedStateFieldsAllocatesNothing(t *testing.T) {
	v, err := jsonview.Parse([]byte(`{"model":"m","input":"hi","max_output_tokens":30,"temperature":0.5,"background":false,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = SharedStateFields(llm.FormatResponses, v) }); n != 0 {
		t.Errorf("SharedStateFields: %v allocations", n)
	}
	m, err := jsonview.Parse([]byte(`{"model":"m","max_tokens":5,"inference_geo":"global","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = SharedStateFields(llm.FormatMessages, m) }); n != 0 {
		t.Errorf("SharedStateFields of a Messages request in the default region: %v allocations", n)
	}
	// A coding agent's conversation names "url" in its web-fetch tool calls, and an image may be
	// sent by URL: neither is a document fetched by URL, and the messages are not decoded.
	fetch, err := jsonview.Parse([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"read it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"WebFetch","input":{"url":"https://example.com","prompt":"sum up"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"it says hi"},{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = SharedStateFields(llm.FormatMessages, fetch) }); n != 0 {
		t.Errorf("SharedStateFields of a Messages request with a web fetch and an image by URL: %v allocations", n)
	}
}

// dropCase is a request body, the body a drop function leaves of it, and whether it reports
// that it dropped something.
type dropCase struct {
	body, want string
	dropped    bool
}

// checkDrop runs drop on each case, and checks that a request without the member it removes is
// read without allocating.
func checkDrop(t *testing.T, drop func(*jsonview.View, *jsonview.Edits) bool, cases []dropCase) {
	t.Helper()
	for _, c := range cases {
		v, err := ReadRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var edits jsonview.Edits
		dropped := drop(v, &edits)
		if got := string(edits.AppendTo(nil, v)); got != c.want || dropped != c.dropped {
			t.Errorf("%s: sent %s (dropped %v), want %s (%v)", c.body, got, dropped, c.want, c.dropped)
		}
	}
	v, err := ReadRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var edits jsonview.Edits
	if n := testing.AllocsPerRun(100, func() { drop(v, &edits) }); n != 0 {
		t.Errorf("%v allocations for a request without the member", n)
	}
}

// TestDropPremiumSpeed: every speed member but the standard one is removed, and a request
// without one is read without allocating.
func TestDropPremiumSpeed(t *testing.T) {
	checkDrop(t, DropPremiumSpeed, []dropCase{
		{`{"model":"m","speed":"fast"}`, `{"model":"m"}`, true},
		{`{"speed":"fast","model":"m","speed":"standard"}`, `{"model":"m","speed":"standard"}`, true},
		{`{"model":"m","speed":"standard"}`, `{"model":"m","speed":"standard"}`, false},
		{`{"model":"m","speed":null}`, `{"model":"m","speed":null}`, false},
		{`{"model":"m"}`, `{"model":"m"}`, false},
	})
}

// TestDropFallbacks: every fallbacks member but a null one is removed, and a request without
// one is read without allocating.
func TestDropFallbacks(t *testing.T) {
	checkDrop(t, DropFallbacks, []dropCase{
		{`{"model":"m","fallbacks":[{"model":"claude-fable-5"}]}`, `{"model":"m"}`, true},
		{`{"fallbacks":[{"model":"a"}],"model":"m","fallbacks":null}`, `{"model":"m","fallbacks":null}`, true},
		{`{"model":"m","fallbacks":null}`, `{"model":"m","fallbacks":null}`, false},
		{`{"model":"m"}`, `{"model":"m"}`, false},
	})
}
