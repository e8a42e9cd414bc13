package convert

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/pdftest"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/pdfpages"
)

// TestDocumentPages: the inline documents of each format are found wherever they are (a
// Messages document in a tool result too) and their pages counted; a text document has none,
// and one whose pages cannot be counted has MaxDocumentPages. DocumentTokens counts each page
// at its bound, and what the compressed streams inflate to at three bytes a token (a page
// of compressed text: 60,000 bytes of text in a file of about 400).
func TestDocumentPages(t *testing.T) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	pdf7, pdf30, dense := b64(pdftest.Plain(7)), b64(pdftest.ObjectStream(30)), b64(pdftest.CompressedText(60_000))
	// inflated is what the compressed streams of the PDF in data inflate to.
	inflated := func(data string) int64 {
		raw, _ := base64.StdEncoding.DecodeString(data)
		d, _ := pdfpages.Read(raw)
		return int64(d.Inflated)
	}
	doc := func(data string) string {
		return `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}`
	}
	for _, tc := range []struct {
		name string
		f    llm.Format
		body string
		want int64
		// inflated is what their compressed streams inflate to.
		inflated int64
	}{
		{"messages, two documents", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + doc(pdf7) + `,` + doc(pdf30) + `,{"type":"text","text":"hi"}]}]}`, 37, inflated(pdf30)},
		{"messages, a document in a tool result", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[` + doc(pdf30) + `]}]}]}`, 30, inflated(pdf30)},
		{"messages, a page of compressed text", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + doc(dense) + `]}]}`, 1, inflated(dense)},
		{"messages, a document spelled with an escape", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"\u0064ocument","source":{"type":"base64","media_type":"application/pdf","data":"` + pdf7 + `"}}]}]}`, 7, 0},
		{"messages, a text document", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain words"}}]}]}`, 0, 0},
		{"messages, not base64", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + doc("%%%") + `]}]}`, MaxDocumentPages, 0},
		{"messages, an encrypted PDF", llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + doc(b64([]byte("%PDF-1.4 << /Type /Page >> << /Encrypt 5 0 R >>"))) + `]}]}`, MaxDocumentPages, 0},
		{"responses, a PDF", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf30 + `"}]}]}`, 30, inflated(pdf30)},
		{"responses, a PDF in a function output", llm.FormatResponses, `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf30 + `"}]}]}`, 30, inflated(pdf30)},
		{"responses, a text file", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.txt","file_data":"data:text/plain;base64,` + b64([]byte("just text")) + `"}]}]}`, 0, 0},
		{"responses, a Word document", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.docx","file_data":"data:application/vnd.openxmlformats-officedocument.wordprocessingml.document;base64,` + b64([]byte("PK\x03\x04\x14\x00\x06\x00\xff\xfe")) + `"}]}]}`, MaxDocumentPages, 0},
		{"responses, a Word document of stored parts", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.docx","file_data":"data:application/vnd.openxmlformats-officedocument.wordprocessingml.document;base64,` + b64([]byte("PK\x03\x04\x14\x00\x00\x00word/document.xml")) + `"}]}]}`, MaxDocumentPages, 0},
		{"chat, a PDF", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + pdf7 + `"}}]}]}`, 7, 0},
		{"chat, a PDF in bare base64", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"` + pdf7 + `"}}]}]}`, 7, 0},
		{"chat, a PDF whose media type is spelled otherwise", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:Application/PDF;name=a.pdf;BASE64,` + pdf30 + `"}}]}]}`, 30, inflated(pdf30)},
		{"responses, a PDF in bare base64", llm.FormatResponses, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"` + pdf30 + `"}]}]}`, 30, inflated(pdf30)},
		{"chat, none", llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"file_data"}]}`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := jsonview.Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := DocumentPages(tc.f, v); got != tc.want {
				t.Errorf("DocumentPages = %d, want %d", got, tc.want)
			}
			if got, want := DocumentTokens(tc.f, v, 4800), tc.want*(DocumentPageTextTokens+4800)+(tc.inflated+2)/3; got != want {
				t.Errorf("DocumentTokens = %d, want %d", got, want)
			}
		})
	}
}

// TestDocumentTokensAllocatesNothing: a request without a document (an image, a coding agent's
// conversation, a \u escape outside the messages) costs DocumentTokens a look-up and no
// allocation.
func TestDocumentTokensAllocatesNothing(t *testing.T) {
	for f, body := range map[llm.Format]string{
		llm.FormatMessages:  `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"` + strings.Repeat("words ", 100) + `"}]}]}`,
		llm.FormatResponses: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`,
		llm.FormatChat:      `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"user":"caf\u00e9"}`,
	} {
		v, err := jsonview.Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = DocumentTokens(f, v, 4800) }); n != 0 {
			t.Errorf("DocumentTokens of a %s request without a document: %v allocations", f, n)
		}
	}
}

// TestDocumentsInflateWithinOneBudget: the documents of one request inflate at most 32 MiB in
// all, as one file may, so that many small compressed PDFs, each within its own bound (a file
// of a few kilobytes may inflate 1 MiB), cannot make one request inflate gigabytes while its
// reservation is worked out (some 0.6 s of CPU a megabyte of request before, for any key); the
// documents past that bound cannot be counted, and are reserved as MaxDocumentPages each.
func TestDocumentsInflateWithinOneBudget(t *testing.T) {
	dense := pdftest.CompressedText(1<<20 - 4096) // a page showing almost 1 MiB of text
	d, ok := pdfpages.Read(dense)
	if !ok || d.Pages != 1 || d.Inflated > 1<<20 || len(dense) > 8<<10 {
		t.Fatalf("the dense page: %d bytes read as %+v, %v", len(dense), d, ok)
	}
	const files = 40
	within := (32 << 20) / d.Inflated
	part := `{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + base64.StdEncoding.EncodeToString(dense) + `"}`
	body := `{"model":"m","input":[{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(part+",", files), ",") + `]}]}`
	v, err := jsonview.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := DocumentPages(llm.FormatResponses, v), int64(within+(files-within)*MaxDocumentPages); got != want {
		t.Errorf("DocumentPages of %d dense pages = %d, want %d (%d counted, the rest not established)", files, got, want, within)
	}
	if got, want := DocumentTokens(llm.FormatResponses, v, 0), int64(within+(files-within)*MaxDocumentPages)*DocumentPageTextTokens+(int64(within*d.Inflated)+BytesPerToken-1)/BytesPerToken; got != want {
		t.Errorf("DocumentTokens = %d, want %d", got, want)
	}
}
