package convert

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// documentRequests are, by format, a request whose user turn holds a text part and an inline
// document of media type mt, data data (base64) and, where the format names files, file name
// report.pdf.
func documentRequests(mt, data string) map[llm.Format]string {
	return map[llm.Format]string{
		llm.FormatChat: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"Summarize."},` +
			`{"type":"file","file":{"file_data":"data:` + mt + `;base64,` + data + `","filename":"report.pdf"}}]}]}`,
		llm.FormatResponses: `{"model":"m","max_output_tokens":100,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize."},` +
			`{"type":"input_file","file_data":"data:` + mt + `;base64,` + data + `","filename":"report.pdf"}]}]}`,
		llm.FormatMessages: `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"Summarize."},` +
			`{"type":"document","source":{"type":"base64","media_type":"` + mt + `","data":"` + data + `"}}]}]}`,
	}
}

// sentDocument is the second part of the first user turn of a request body of format f, as sent.
func sentDocument(t *testing.T, f llm.Format, body []byte) string {
	t.Helper()
	var req struct {
		Messages []struct {
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Content []json.RawMessage `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	turns := req.Messages
	if f == llm.FormatResponses {
		turns = req.Input
	}
	if len(turns) == 0 || len(turns[0].Content) < 2 {
		t.Fatalf("no second part in %s", body)
	}
	return string(turns[0].Content[1])
}

// TestDocumentsCrossFormats: an inline base64 PDF of any format reaches an upstream of any
// other as that format's document, its data byte for byte: chat's file part with file_data,
// Responses' input_file, Messages' document block with a base64 source. The file name goes to
// the OpenAI formats (one is made up from the media type when the client gave none, as
// Messages does not name files) and is dropped and named for Messages. On the code before,
// the part was refused with a 400 naming it whenever the formats differed.
func TestDocumentsCrossFormats(t *testing.T) {
	const data = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK+/=="
	want := map[llm.Format]map[llm.Format]string{
		llm.FormatChat: {
			llm.FormatResponses: `{"type":"input_file","file_data":"data:application/pdf;base64,` + data + `","filename":"report.pdf"}`,
			llm.FormatMessages:  `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}`,
		},
		llm.FormatResponses: {
			llm.FormatChat:     `{"type":"file","file":{"file_data":"data:application/pdf;base64,` + data + `","filename":"report.pdf"}}`,
			llm.FormatMessages: `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}`,
		},
		llm.FormatMessages: {
			llm.FormatChat:      `{"type":"file","file":{"file_data":"data:application/pdf;base64,` + data + `","filename":"document.pdf"}}`,
			llm.FormatResponses: `{"type":"input_file","file_data":"data:application/pdf;base64,` + data + `","filename":"document.pdf"}`,
		},
	}
	wantDropped := map[llm.Format]string{
		llm.FormatChat:      "messages[].content[].file.filename",
		llm.FormatResponses: "input[].content[].filename",
	}
	for src, body := range documentRequests("application/pdf", data) {
		for dst, doc := range want[src] {
			t.Run(string(src)+" to "+string(dst), func(t *testing.T) {
				out, dropped, err := EncodeRequest(dst, mustDecode(t, src, []byte(body)), "upstream-model")
				if err != nil {
					t.Fatal(err)
				}
				if got := sentDocument(t, dst, out); got != doc {
					t.Errorf("the document went as\n%s\nwant\n%s", got, doc)
				}
				if name := wantDropped[src]; dst == llm.FormatMessages && !slices.Contains(dropped, name) {
					t.Errorf("dropped %v; want %s named", dropped, name)
				}
			})
		}
	}
}

// TestDocumentMediaTypeSpelling: a data URL's media type is read whatever its case and
// parameters, and its base64 marker whatever its case (RFC 2045 and 2397), so that a PDF sent
// as "data:Application/PDF;name=report.pdf;BASE64,..." reaches a Messages upstream as an
// application/pdf document and an OpenAI upstream of the other format as a plain data URL,
// its data byte for byte. On the code before, the first was refused with a 400 naming the part
// (a document of type "Application/PDF"), the second with one saying it is not carried.
func TestDocumentMediaTypeSpelling(t *testing.T) {
	const data = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK+/=="
	for _, spelling := range []string{"application/PDF", "Application/Pdf;name=report.pdf", "application/pdf;BASE64"} {
		for src, body := range documentRequests(spelling, data) {
			if src == llm.FormatMessages {
				continue
			}
			body = strings.Replace(body, ";BASE64;base64,", ";BASE64,", 1)
			want := map[llm.Format]string{
				llm.FormatMessages:  `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}`,
				llm.FormatChat:      `{"type":"file","file":{"file_data":"data:application/pdf;base64,` + data + `","filename":"report.pdf"}}`,
				llm.FormatResponses: `{"type":"input_file","file_data":"data:application/pdf;base64,` + data + `","filename":"report.pdf"}`,
			}
			for dst, doc := range want {
				if dst == src {
					continue
				}
				t.Run(spelling+", "+string(src)+" to "+string(dst), func(t *testing.T) {
					out, _, err := EncodeRequest(dst, mustDecode(t, src, []byte(body)), "upstream-model")
					if err != nil {
						t.Fatal(err)
					}
					if got := sentDocument(t, dst, out); got != doc {
						t.Errorf("the document went as\n%s\nwant\n%s", got, doc)
					}
				})
			}
		}
	}
}

// TestDocumentDataMustBeADataURL: OpenAI refuses file_data that is not a base64 data URL, bare
// base64 among it ("Expected a base64-encoded data URL with an application/pdf MIME type"),
// though its reference calls the field "the base64 encoded file data"; the decoder refuses it
// the same way, with a 400 naming file_data, where the code before said that the gateway does
// not carry the part across formats. A request of the client's format goes to an upstream of
// that format as sent (the exchange relays what it cannot decode), and its pages are counted
// all the same (TestDocumentPages).
func TestDocumentDataMustBeADataURL(t *testing.T) {
	const pdf = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK+/=="
	for _, c := range []struct{ data, says string }{
		{pdf, "without the 'data:' prefix"},
		{"data:application/pdf," + pdf, "not base64-encoded"},
		{"data:;base64," + pdf, "names no MIME type"},
	} {
		for f, param := range map[llm.Format]string{llm.FormatChat: "messages[0].content[1].file.file_data", llm.FormatResponses: "input[0].content[1].file_data"} {
			body := strings.Replace(documentRequests("application/pdf", pdf)[f], "data:application/pdf;base64,"+pdf, c.data, 1)
			_, err := DecodeRequest(f, []byte(body))
			if ae := invalid(t, err, param); !strings.Contains(ae.Message, c.says) || !strings.Contains(ae.Message, "data:application/pdf;base64,") {
				t.Errorf("%s, %.30s: %q; want it to say %s and show a data URL", f, c.data, ae.Message, c.says)
			}
		}
	}
}

// TestPlainTextDocumentToMessages: the Messages API reads plain text as a text source, not as
// base64: a text/plain document of an OpenAI format reaches it decoded; one that is not UTF-8,
// and a document of any type but application/pdf and text/plain, are refused with a 400 naming
// the part.
func TestPlainTextDocumentToMessages(t *testing.T) {
	for _, src := range []llm.Format{llm.FormatChat, llm.FormatResponses} {
		body := documentRequests("text/plain", "SGVsbG8sIHdvcmxkIQ==")[src]
		out, _, err := EncodeRequest(llm.FormatMessages, mustDecode(t, src, []byte(body)), "upstream-model")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sentDocument(t, llm.FormatMessages, out), `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Hello, world!"}}`; got != want {
			t.Errorf("%s: the document went as %s; want %s", src, got, want)
		}
		param := "messages[0].content[1]"
		if src == llm.FormatResponses {
			param = "input[0].content[1]"
		}
		for _, c := range []struct{ mt, data, says string }{
			{"text/plain", "/w==", "not base64-encoded UTF-8"},
			{"text/csv", "YSxiCg==", `"text/csv"`},
			{"application/vnd.openxmlformats-officedocument.wordprocessingml.document", "UEsDBA==", "only application/pdf and text/plain"},
		} {
			body := documentRequests(c.mt, c.data)[src]
			_, _, err := EncodeRequest(llm.FormatMessages, mustDecode(t, src, []byte(body)), "upstream-model")
			if ae := invalid(t, err, param); !strings.Contains(ae.Message, c.says) {
				t.Errorf("%s, %s: %q; want it to say %s", src, c.mt, ae.Message, c.says)
			}
		}
	}
}

// TestDocumentsInToolResults: a document a tool returned goes where both formats hold one: a
// Messages tool_result's document block (a base64 source) becomes an input_file of the
// Responses function_call_output's output, and back, its data byte for byte, the file name
// made up for Responses and dropped and named for Messages. Chat's tool messages hold text
// alone, so there it is refused with a 400 naming the part (TestDocumentsNotCarried). The code
// before refused both with a 400 naming the part.
func TestDocumentsInToolResults(t *testing.T) {
	const data = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoK+/=="
	messages := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Fetch the report."},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"fetch","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"Here it is."},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}]}]}]}`
	responses := `{"model":"m","max_output_tokens":10,"input":[{"role":"user","content":"Fetch the report."},{"type":"function_call","call_id":"t1","name":"fetch","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"t1","output":[{"type":"input_text","text":"Here it is."},{"type":"input_file","file_data":"data:application/pdf;base64,` + data + `","filename":"report.pdf"}]}]}`
	out, _, err := EncodeRequest(llm.FormatResponses, mustDecode(t, llm.FormatMessages, []byte(messages)), "upstream-model")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function_call_output","call_id":"t1","output":[{"type":"input_text","text":"Here it is."},{"type":"input_file","file_data":"data:application/pdf;base64,` + data + `","filename":"document.pdf"}]}`
	if !strings.Contains(string(out), want) {
		t.Errorf("Messages to Responses: %s\nwant it to hold %s", out, want)
	}
	req := mustDecode(t, llm.FormatResponses, []byte(responses))
	req.MaxTokens = 10
	out, dropped, err := EncodeRequest(llm.FormatMessages, req, "upstream-model")
	if err != nil {
		t.Fatal(err)
	}
	want = `{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"Here it is."},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}]}`
	if !strings.Contains(string(out), want) {
		t.Errorf("Responses to Messages: %s\nwant it to hold %s", out, want)
	}
	if !slices.Contains(dropped, "input[].output[].filename") {
		t.Errorf("dropped %v; want the file name named", dropped)
	}
}

// TestDocumentsNotCarried: what a document says that another format cannot, or what only its
// provider can read, is refused across formats with a 400 naming it, as before: OpenAI file
// ids, a document by URL or as plain text or content blocks, Messages' title, context and
// citations (in a tool result too), a document in a tool result for chat, whose tool messages
// hold text alone. The same request to an upstream of its own format passes.
func TestDocumentsNotCarried(t *testing.T) {
	const pdf = `"type":"base64","media_type":"application/pdf","data":"JVBERi0="`
	for _, c := range []struct {
		src   llm.Format
		dst   llm.Format
		body  string
		param string
	}{
		{llm.FormatChat, llm.FormatMessages, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0]"},
		{llm.FormatChat, llm.FormatResponses, `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc","file_data":"data:application/pdf;base64,JVBERi0="}}]}]}`, "messages[0].content[0]"},
		{llm.FormatResponses, llm.FormatChat, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-abc"}]}]}`, "input[0].content[0]"},
		{llm.FormatResponses, llm.FormatMessages, `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`, "input[0].content[0]"},
		{llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Hi"}}]}]}`, "messages[0].content[0]"},
		{llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}]}]}`, "messages[0].content[0]"},
		{llm.FormatMessages, llm.FormatResponses, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","title":"Report","source":{` + pdf + `}}]}]}`, "messages[0].content[0].title"},
		{llm.FormatMessages, llm.FormatResponses, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","context":"Q3","source":{` + pdf + `}}]}]}`, "messages[0].content[0].context"},
		{llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"document","citations":{"enabled":true},"source":{` + pdf + `}}]}]}`, "messages[0].content[0].citations"},
		{llm.FormatMessages, llm.FormatChat, `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"document","source":{` + pdf + `}}]}]}]}`, "messages[1].content[0].content[0]"},
		{llm.FormatMessages, llm.FormatResponses, `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"document","title":"Report","source":{` + pdf + `}}]}]}]}`, "messages[1].content[0].content[0].title"},
		{llm.FormatResponses, llm.FormatChat, `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_file","file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}]}]}`, "input[1].output[0]"},
	} {
		t.Run(c.param+" "+string(c.src)+" to "+string(c.dst), func(t *testing.T) {
			_, _, err := EncodeRequest(c.dst, mustDecode(t, c.src, []byte(c.body)), "upstream-model")
			invalid(t, err, c.param)
			if _, _, err := EncodeRequest(c.src, mustDecode(t, c.src, []byte(c.body)), "upstream-model"); err != nil {
				t.Errorf("to its own format: %v", err)
			}
		})
	}
}
