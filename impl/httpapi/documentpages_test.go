package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pdftest"
)

// TestDocumentPagesAreReserved: a PDF sent inline is billed by its pages, not its bytes.
// Anthropic puts each page's text, "1,500-3,000 tokens per page depending on content
// density", and an image of the page into the prompt
// (https://platform.claude.com/docs/en/build-with-claude/pdf-support, "Estimate your costs");
// OpenAI "the extracted text and an image of each page"
// (https://developers.openai.com/api/docs/guides/file-inputs). The reservation counted the
// document by its encoded size, so a compact PDF was reserved far below its bill and the rest
// waived: a 100-page PDF whose pages share one content stream is 16 KB (its page objects
// written out) or 2 KB (in a compressed object stream), some 7,000 or 900 tokens by size,
// while the stand-ins report what the providers would bill for 100 pages: at Anthropic 3,000
// text tokens and 1,600 for the page's image (about 1.15 megapixels,
// https://platform.claude.com/docs/en/build-with-claude/vision), 460,000 input tokens in all;
// at OpenAI 3,000 and 1,390 for an 816 × 1,056 page image in 32-pixel patches at gpt-4.1-mini's
// multiplier of 1.62, 439,000. Their pages are now counted and reserved at their bound (3,000
// text tokens and the model's image bound each), and nothing is waived.
func TestDocumentPagesAreReserved(t *testing.T) {
	g, _ := documentGateway(t, "pages", 460_000, 439_000, 1_000_000)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)

	var served int64
	for _, pdf := range []struct {
		name string
		data []byte
	}{
		{"page objects in the file", pdftest.Plain(100)},
		{"page objects in a compressed object stream", pdftest.ObjectStream(100)},
	} {
		data := base64.StdEncoding.EncodeToString(pdf.data)
		for _, tc := range []struct {
			name, route, body string
			cost              int64
		}{
			// 460,000 input tokens and 300 output tokens at claude-sonnet-4-5's rates above
			// 200,000 input tokens, $6 and $22.50 a million.
			{"messages", "/v1/messages", `{"model":"pages-sonnet","max_tokens":1000,"messages":[{"role":"user","content":[` +
				`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}},{"type":"text","text":"Summarize the report."}]}]}`,
				2_766_750},
			// 439,000 input tokens at $0.40 and 300 output tokens at $1.60 a million.
			{"responses", "/v1/responses", `{"model":"pages-mini","max_output_tokens":1000,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize the report."},` +
				`{"type":"input_file","filename":"report.pdf","file_data":"data:application/pdf;base64,` + data + `"}]}]}`,
				176_080},
		} {
			t.Run(pdf.name+", "+tc.name, func(t *testing.T) {
				status, body := post(t, g, tenant.Key, tc.route, tc.body)
				if status != http.StatusOK {
					t.Fatalf("%d %.300s", status, body)
				}
				served++
				if rec := latestUsage(t, g, tenant.Account, served); rec.CostMicros != tc.cost || rec.WaivedMicros != 0 {
					t.Errorf("a 100-page PDF of %d bytes: billed %d, waived %d; want %s and none", len(pdf.data), rec.CostMicros, rec.WaivedMicros, fmt.Sprint(tc.cost))
				}
			})
		}
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestCutDocumentStreamBillsItsPages: a Responses stream cut before its usage is billed the
// input the gateway counts of the request, and the pages of an inline PDF count there as in
// the reservation, at their bound (3,000 text tokens and gpt-4.1-mini's image bound, 2,489,
// each), as an image counts its bound: the provider bills the pages whatever the file's size.
// On the code before, a 30-page PDF of 1 KB was billed as its bytes, some 400 input
// tokens, where the provider bills about 130,000 (4,390 a page, as in
// TestDocumentPagesAreReserved).
func TestCutDocumentStreamBillsItsPages(t *testing.T) {
	url := cannedUpstream(t, "text/event-stream", `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_d1","object":"response","created_at":1764777600,"model":"gpt-4.1-mini","status":"in_progress","output":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Half a summary"}

data: [DONE]

`)
	g, tenant := standInGateway(t, "cut-pages", config.KindOpenAIResponses, url)
	data := base64.StdEncoding.EncodeToString(pdftest.ObjectStream(30))
	body := `{"model":"cut-pages-chat","max_output_tokens":1000,"stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize the report."},` +
		`{"type":"input_file","filename":"report.pdf","file_data":"data:application/pdf;base64,` + data + `"}]}]}`
	if status, answer := post(t, g, tenant.Key, "/v1/responses", body); status != http.StatusOK {
		t.Fatalf("%d %.300s", status, answer)
	}
	const pages = 30 * (3000 + 2489)
	if rec := latestUsage(t, g, tenant.Account, 1); rec.Status != "upstream_cut_off" || rec.InputTokens < pages || rec.WaivedMicros != 0 {
		t.Errorf("a cut stream with a 30-page PDF: status %s, billed %d input tokens, waived %d; want upstream_cut_off, at least %d and none",
			rec.Status, rec.InputTokens, rec.WaivedMicros, pages)
	}
	// A Word document's pages are not counted: it is reserved as 600 pages, 3,293,400 tokens,
	// more than the model's window of 200,000 holds, and a cut stream is billed no more than the
	// window, which a served request's input is within.
	docx := base64.StdEncoding.EncodeToString([]byte("PK\x03\x04\x14\x00\x06\x00word/document.xml"))
	body = `{"model":"cut-pages-chat","max_output_tokens":1000,"stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize the report."},` +
		`{"type":"input_file","filename":"report.docx","file_data":"data:application/vnd.openxmlformats-officedocument.wordprocessingml.document;base64,` + docx + `"}]}]}`
	if status, answer := post(t, g, tenant.Key, "/v1/responses", body); status != http.StatusOK {
		t.Fatalf("%d %.300s", status, answer)
	}
	if rec := latestUsage(t, g, tenant.Account, 2); rec.Status != "upstream_cut_off" || rec.InputTokens < 200_000 || rec.InputTokens > 200_100 {
		t.Errorf("a cut stream with a Word document: status %s, billed %d input tokens; want upstream_cut_off and the window, 200,000, with the request's text", rec.Status, rec.InputTokens)
	}
}

// TestCompressedPageTextIsReserved: a provider extracts and bills a page's text, which a
// compressed content stream holds in far fewer bytes than it shows: a one-page PDF of 2.7 KB
// whose content stream inflates to 600,000 bytes of text is billed some 150,000 text tokens
// (four bytes a token) and 1,600 for the page's image on claude-sonnet-4-5, where a page was
// reserved at 3,000 text tokens and its image bound. What the file's compressed streams
// inflate to is reserved too, at three bytes a token, and nothing is waived.
func TestCompressedPageTextIsReserved(t *testing.T) {
	url := cannedUpstream(t, "application/json", `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A summary."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":151600,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":300}}`)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "dense-anthropic", Kind: config.KindAnthropicMessages, BaseURL: url})
	cfg.Models = append(cfg.Models, config.Model{ID: "dense-sonnet", Family: config.FamilyMessages, OwnedBy: "test",
		Price: config.Price{Catalog: "claude-sonnet-4-5"}, MaxOutputTokens: 1000, ContextTokens: 1_000_000,
		Backend: &config.Upstream{Provider: "dense-anthropic", Model: "claude-sonnet-4-5"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "dense-sonnet")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	data := base64.StdEncoding.EncodeToString(pdftest.CompressedText(600_000))
	status, body := post(t, g, tenant.Key, "/v1/messages", `{"model":"dense-sonnet","max_tokens":1000,"messages":[{"role":"user","content":[`+
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"`+data+`"}},{"type":"text","text":"Summarize the page."}]}]}`)
	if status != http.StatusOK {
		t.Fatalf("%d %.300s", status, body)
	}
	// 151,600 input tokens at $3 and 300 output tokens at $15 a million.
	if rec := latestUsage(t, g, tenant.Account, 1); rec.CostMicros != 459_300 || rec.WaivedMicros != 0 {
		t.Errorf("a page of compressed text: billed %d, waived %d; want 459,300 and none", rec.CostMicros, rec.WaivedMicros)
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}
