package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestDocumentByURLIsRefused: a document the provider fetches by its URL (a Messages document
// block whose source is a url, a Responses input_file with a file_url) is billed by the
// provider as input by its pages, which the request does not state: Anthropic puts each page's
// text (1,500 to 3,000 tokens) and an image of it into the prompt
// (https://platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate your costs"),
// OpenAI both "the extracted text and an image of each page"
// (https://platform.openai.com/docs/guides/pdf-files, "File URLs"). The reservation counted
// the URL's few bytes, so a 50-page PDF's 125,000 input tokens (the stand-ins report them as
// the providers would: 2,500 a page) were billed up to the reservation and the rest waived:
// 379,500 micro-units at claude-sonnet-4-5's prices, of which 15,564 were billed.
// Such a request is refused with 400 invalid_request_error naming the place, before any
// reservation or upstream call; the same document sent inline is served.
func TestDocumentByURLIsRefused(t *testing.T) {
	g, calls := documentGateway(t, "docs", 125_000, 125_000, 200_000)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)

	const url = "https://www.berkshirehathaway.com/letters/2024ltr.pdf"
	messagesDoc := `{"type":"document","source":{"type":"url","url":"` + url + `"}}`
	for _, tc := range []struct{ name, route, body, param string }{
		{"messages, document by url", "/v1/messages",
			`{"model":"docs-sonnet","max_tokens":1000,"messages":[{"role":"user","content":[` + messagesDoc + `,{"type":"text","text":"Summarize the letter."}]}]}`,
			"messages[0].content[0].source.url"},
		{"messages, document by url in a tool result", "/v1/messages",
			`{"model":"docs-sonnet","max_tokens":1000,"messages":[{"role":"user","content":"Read it."},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[` + messagesDoc + `]}]}],` +
				`"tools":[{"name":"fetch","input_schema":{"type":"object"}}]}`,
			"messages[2].content[0].content[0].source.url"},
		{"responses, input_file by file_url", "/v1/responses",
			`{"model":"docs-mini","max_output_tokens":1000,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize the letter."},{"type":"input_file","file_url":"` + url + `"}]}]}`,
			"input[0].content[1].file_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, g, tenant.Key, tc.route, tc.body)
			if status != http.StatusBadRequest {
				if status == http.StatusOK {
					rec := latestUsage(t, g, tenant.Account, 1)
					t.Fatalf("served and billed %d micro-units, %d waived, for %d input tokens; want 400", rec.CostMicros, rec.WaivedMicros, rec.InputTokens)
				}
				t.Fatalf("status %d, want 400: %.300s", status, body)
			}
			// The Messages envelope has no param: its message names the place.
			env := errorEnvelopeOf(body)
			param := ""
			if env.Error.Param != nil {
				param = *env.Error.Param
			}
			if env.Error.Type != "invalid_request_error" || (tc.route != "/v1/messages" && param != tc.param) ||
				!strings.Contains(env.Error.Message, "'"+tc.param+"'") || !strings.Contains(env.Error.Message, "inline") {
				t.Errorf("%s: want invalid_request_error naming %q and saying to send the document inline", body, tc.param)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the upstreams were called %d times for documents by URL", n)
	}

	// The same document inline is served and billed whole, what the provider reports: 125,000
	// input tokens at $3 and 300 output tokens at $15 a million.
	inline := `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + strings.Repeat("JVBERi0xLjQK", 40_000) + `"}}`
	status, body := post(t, g, tenant.Key, "/v1/messages", fmt.Sprintf(`{"model":"docs-sonnet","max_tokens":1000,"messages":[{"role":"user","content":[%s,{"type":"text","text":"Summarize the letter."}]}]}`, inline))
	if status != http.StatusOK {
		t.Fatalf("an inline document: %d %.300s", status, body)
	}
	if rec := latestUsage(t, g, tenant.Account, 1); rec.CostMicros != 379_500 || rec.WaivedMicros != 0 {
		t.Errorf("an inline document: billed %d, waived %d; want 379,500 and none", rec.CostMicros, rec.WaivedMicros)
	}
	checkBooks(t, g, tenant.Account, granted)
}
