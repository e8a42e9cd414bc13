package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pdftest"
)

// chatDocumentGateway is a gateway for the document tests: three models of family (the chat
// family is served on the chat and Responses routes, the Messages family on the Messages route)
// named prefix+"-sonnet" (served by a stand-in Anthropic upstream at claude-sonnet-4-5's catalog
// price), prefix+"-chat" (a stand-in chat upstream) and prefix+"-mini" (a stand-in Responses
// upstream), the last two at gpt-4.1-mini's, each of a window of a million tokens. Each
// stand-in answers with a short text and the usage of 300 output tokens and anthropicInput or
// openAIInput input tokens, as the provider would report a document's pages; bodies holds the
// last request each upstream got, by the model's name.
func chatDocumentGateway(t *testing.T, prefix, family string, anthropicInput, openAIInput int) (*apitest.Gateway, *sync.Map) {
	t.Helper()
	bodies := new(sync.Map)
	standIn := func(model, answer string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodies.Store(model, b)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	upstreams := []struct {
		model, kind, catalog, upstreamModel, answer string
	}{
		{"sonnet", config.KindAnthropicMessages, "claude-sonnet-4-5", "claude-sonnet-4-5", fmt.Sprintf(`{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"A summary."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":300}}`, anthropicInput)},
		{"chat", config.KindOpenAIChat, "gpt-4.1-mini", "gpt-4.1-mini", fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A summary.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":300,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, openAIInput, openAIInput+300)},
		{"mini", config.KindOpenAIResponses, "gpt-4.1-mini", "gpt-4.1-mini", fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-mini","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A summary.","annotations":[]}]}],"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`, openAIInput, openAIInput+300)},
	}
	cfg := config.Default()
	for _, u := range upstreams {
		id, provider := prefix+"-"+u.model, prefix+"-"+u.model+"-upstream"
		cfg.Providers = append(cfg.Providers, config.Provider{Name: provider, Kind: u.kind, BaseURL: standIn(id, u.answer)})
		cfg.Models = append(cfg.Models, config.Model{ID: id, Family: family, OwnedBy: "test",
			Price: config.Price{Catalog: u.catalog}, MaxOutputTokens: 1000, ContextTokens: 1_000_000,
			Backend: &config.Upstream{Provider: provider, Model: u.upstreamModel}})
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, id)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg}), bodies
}

// TestChatDocumentPagesAreReserved: a PDF sent inline on /v1/chat/completions, as a file
// content part with file_data (the OpenAI SDK's FileContentPart), is billed by its pages as on
// the other routes (TestDocumentPagesAreReserved): it is reserved at its pages' bound
// (impl/pdfpages via convert.DocumentTokens, on the client's request) and billed the upstream's
// usage, with nothing waived. Relayed to a chat upstream, the part reaches it whole; translated
// for a model served by a Messages or Responses upstream, it reaches the upstream as that
// format's document (a document block with a base64 source, an input_file with file_data and
// the file's name), its data byte for byte. On the code before, the translated part was
// refused with a 400 (the gateway did not carry documents across formats).
func TestChatDocumentPagesAreReserved(t *testing.T) {
	g, bodies := chatDocumentGateway(t, "cdoc", config.FamilyChat, 460_000, 439_000)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	client := openAIClient(g, t, tenant.Key)
	ask := func(model, data string) (*openai.ChatCompletion, error) {
		return client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: model, MaxTokens: param.NewOpt[int64](1000),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("Summarize the report."),
				openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{
					Filename: param.NewOpt("report.pdf"), FileData: param.NewOpt("data:application/pdf;base64," + data)}),
			})}})
	}

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
			model, prompt string
			// part finds the document in the upstream's body.
			part func(body []byte) (any, error)
			want any
			// cost is the upstream's usage at the model's price: 439,000 input tokens at
			// $0.40 and 300 output tokens at $1.60 a million; 460,000 and 300 at
			// claude-sonnet-4-5's rates above 200,000 input tokens, $6 and $22.50.
			cost int64
		}{
			{"cdoc-chat", "relayed", chatFilePart, chatFile{Type: "file", File: chatFileData{FileData: "data:application/pdf;base64," + data, Filename: "report.pdf"}}, 176_080},
			{"cdoc-sonnet", "translated for Messages", messagesDocumentBlock, messagesDocument{Type: "document", Source: messagesSource{Type: "base64", MediaType: "application/pdf", Data: data}}, 2_766_750},
			{"cdoc-mini", "translated for Responses", responsesFilePart, responsesFile{Type: "input_file", FileData: "data:application/pdf;base64," + data, Filename: "report.pdf"}, 176_080},
		} {
			t.Run(pdf.name+", "+tc.prompt, func(t *testing.T) {
				res, err := ask(tc.model, data)
				if err != nil {
					t.Fatal(err)
				}
				served++
				if res.Choices[0].Message.Content != "A summary." {
					t.Errorf("answer %q; want the upstream's", res.Choices[0].Message.Content)
				}
				sent, _ := bodies.Load(tc.model)
				b, _ := sent.([]byte)
				if got, err := tc.part(b); err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("the upstream got %.300s (%v); want the document as %+.300v", b, err, tc.want)
				}
				if rec := latestUsage(t, g, tenant.Account, served); rec.CostMicros != tc.cost || rec.WaivedMicros != 0 {
					t.Errorf("a 100-page PDF of %d bytes: billed %d, waived %d; want %d and none", len(pdf.data), rec.CostMicros, rec.WaivedMicros, tc.cost)
				}
			})
		}
	}
	if _, usage := checkBooks(t, g, tenant.Account, granted); usage != 2*(2*176_080+2_766_750) {
		t.Errorf("usage %d; want the six requests', %d", usage, 2*(2*176_080+2_766_750))
	}
}

// TestResponsesDocumentIsTranslated: a PDF sent inline on /v1/responses (an input_file with
// file_data) to a model served by a Messages or a chat upstream reaches it as that format's
// document, its data byte for byte (the file name too, for chat), is reserved by its pages on
// the client's request and billed the upstream's usage, with nothing waived. On the code before,
// it was refused with a 400 naming input[0].content[1].
func TestResponsesDocumentIsTranslated(t *testing.T) {
	g, bodies := chatDocumentGateway(t, "rdoc", config.FamilyChat, 460_000, 439_000)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	data := base64.StdEncoding.EncodeToString(pdftest.ObjectStream(100))
	body := func(model string) string {
		return `{"model":"` + model + `","max_output_tokens":1000,"input":[{"role":"user","content":[{"type":"input_text","text":"Summarize the report."},` +
			`{"type":"input_file","filename":"report.pdf","file_data":"data:application/pdf;base64,` + data + `"}]}]}`
	}
	var served int64
	for _, tc := range []struct {
		model string
		part  func(body []byte) (any, error)
		want  any
		cost  int64
	}{
		{"rdoc-sonnet", messagesDocumentBlock, messagesDocument{Type: "document", Source: messagesSource{Type: "base64", MediaType: "application/pdf", Data: data}}, 2_766_750},
		{"rdoc-chat", chatFilePart, chatFile{Type: "file", File: chatFileData{FileData: "data:application/pdf;base64," + data, Filename: "report.pdf"}}, 176_080},
	} {
		t.Run(tc.model, func(t *testing.T) {
			status, res := post(t, g, tenant.Key, "/v1/responses", body(tc.model))
			if status != http.StatusOK {
				t.Fatalf("%d %.300s", status, res)
			}
			served++
			sent, _ := bodies.Load(tc.model)
			b, _ := sent.([]byte)
			if got, err := tc.part(b); err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the upstream got %.300s (%v); want the document as %+.300v", b, err, tc.want)
			}
			if rec := latestUsage(t, g, tenant.Account, served); rec.CostMicros != tc.cost || rec.WaivedMicros != 0 {
				t.Errorf("billed %d, waived %d; want %d and none", rec.CostMicros, rec.WaivedMicros, tc.cost)
			}
		})
	}
	checkBooks(t, g, tenant.Account, granted)
}

// TestDocumentDataURLSpellings: a PDF whose data URL spells its media type otherwise
// ("Application/PDF", a parameter, the base64 marker in capitals: RFC 2045 and 2397 read them
// alike) is carried to a model served by a Messages upstream as an application/pdf document,
// and relayed as sent to a chat upstream; either way it is reserved by its pages and billed the
// upstream's usage with nothing waived. Bare base64 in file_data, which OpenAI refuses ("Expected
// a base64-encoded data URL"), is refused for the Messages upstream with a 400 naming
// file_data, nothing billed, and relayed as sent to the chat upstream, reserved by its pages
// too. On the code before, "Application/PDF" was refused for Messages (a document of that
// type) and the capital marker as not carried across formats, the capital marker was reserved
// as text by its size on the relay (1,990 micro-units billed, 174,090 waived), and bare base64
// was refused as not carried across formats; a parameter was read as now.
func TestDocumentDataURLSpellings(t *testing.T) {
	g, bodies := chatDocumentGateway(t, "sdoc", config.FamilyChat, 460_000, 439_000)
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	data := base64.StdEncoding.EncodeToString(pdftest.ObjectStream(100))
	body := func(model, fileData string) string {
		return `{"model":"` + model + `","max_tokens":1000,"messages":[{"role":"user","content":[{"type":"text","text":"Summarize the report."},` +
			`{"type":"file","file":{"filename":"report.pdf","file_data":"` + fileData + `"}}]}]}`
	}
	var served, billed int64
	for _, prefix := range []string{"data:Application/PDF;base64,", "data:application/pdf;name=report.pdf;base64,", "data:application/pdf;BASE64,"} {
		for _, tc := range []struct {
			model string
			part  func(body []byte) (any, error)
			want  any
			cost  int64
		}{
			{"sdoc-sonnet", messagesDocumentBlock, messagesDocument{Type: "document", Source: messagesSource{Type: "base64", MediaType: "application/pdf", Data: data}}, 2_766_750},
			{"sdoc-chat", chatFilePart, chatFile{Type: "file", File: chatFileData{FileData: prefix + data, Filename: "report.pdf"}}, 176_080},
		} {
			t.Run(prefix+" "+tc.model, func(t *testing.T) {
				status, res := post(t, g, tenant.Key, "/v1/chat/completions", body(tc.model, prefix+data))
				if status != http.StatusOK {
					t.Fatalf("%d %.300s", status, res)
				}
				served++
				billed += tc.cost
				sent, _ := bodies.Load(tc.model)
				b, _ := sent.([]byte)
				if got, err := tc.part(b); err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("the upstream got %.300s (%v); want the document as %+.300v", b, err, tc.want)
				}
				if rec := latestUsage(t, g, tenant.Account, served); rec.CostMicros != tc.cost || rec.WaivedMicros != 0 {
					t.Errorf("billed %d, waived %d; want %d and none", rec.CostMicros, rec.WaivedMicros, tc.cost)
				}
			})
		}
	}
	t.Run("bare base64", func(t *testing.T) {
		status, res := post(t, g, tenant.Key, "/v1/chat/completions", body("sdoc-sonnet", data))
		env := errorEnvelopeOf(res)
		const param = "messages[0].content[1].file.file_data"
		if status != http.StatusBadRequest || env.Error.Param == nil || *env.Error.Param != param || !strings.Contains(env.Error.Message, "data URL") {
			t.Errorf("to the Messages upstream: %d %.300s; want a 400 naming %s and asking for a data URL", status, res, param)
		}
		if status, res = post(t, g, tenant.Key, "/v1/chat/completions", body("sdoc-chat", data)); status != http.StatusOK {
			t.Fatalf("to the chat upstream: %d %.300s", status, res)
		}
		served++
		billed += 176_080
		sent, _ := bodies.Load("sdoc-chat")
		b, _ := sent.([]byte)
		if got, err := chatFilePart(b); err != nil || !reflect.DeepEqual(got, chatFile{Type: "file", File: chatFileData{FileData: data, Filename: "report.pdf"}}) {
			t.Errorf("the chat upstream got %.300s (%v); want the part as sent", b, err)
		}
		if rec := latestUsage(t, g, tenant.Account, served); rec.CostMicros != 176_080 || rec.WaivedMicros != 0 {
			t.Errorf("billed %d, waived %d; want 176,080 and none", rec.CostMicros, rec.WaivedMicros)
		}
	})
	if _, usage := checkBooks(t, g, tenant.Account, granted); usage != billed {
		t.Errorf("usage %d; want the served requests', %d", usage, billed)
	}
}

// TestToolResultDocumentIsTranslated: a PDF a tool returned goes across formats where both
// hold one: a Responses function_call_output whose output holds an input_file reaches a
// Messages upstream as a document block of the tool_result, and a Messages tool_result's
// document block reaches a Responses upstream as an input_file of the function_call_output,
// the data byte for byte; each is reserved by its pages on the client's request and billed the
// upstream's usage, with nothing waived. A chat upstream, whose tool messages hold text alone,
// is refused with a 400 naming the block, and nothing is billed. On the code before, the two
// translations were refused with a 400 naming the part.
func TestToolResultDocumentIsTranslated(t *testing.T) {
	// The Responses route serves the chat family, the Messages route the Messages family: one
	// gateway for each, one served request in each.
	const granted = 100_000_000
	data := base64.StdEncoding.EncodeToString(pdftest.ObjectStream(100))
	responses := `{"model":"tdoc-sonnet","max_output_tokens":1000,"tools":[{"type":"function","name":"fetch","parameters":{"type":"object"}}],"input":[` +
		`{"role":"user","content":"Fetch the report and summarize it."},{"type":"function_call","call_id":"call_1","name":"fetch","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_1","output":[{"type":"input_file","filename":"report.pdf","file_data":"data:application/pdf;base64,` + data + `"}]}]}`
	messages := func(model string) string {
		return `{"model":"` + model + `","max_tokens":1000,"tools":[{"name":"fetch","input_schema":{"type":"object"}}],"messages":[` +
			`{"role":"user","content":"Fetch the report and summarize it."},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}]}]}]}`
	}
	for _, tc := range []struct {
		route, family, body, model string
		// part finds the document in the upstream's body.
		part func(body []byte) (any, error)
		want any
		cost int64
	}{
		{"/v1/responses", config.FamilyChat, responses, "tdoc-sonnet", toolResultDocument,
			messagesDocument{Type: "document", Source: messagesSource{Type: "base64", MediaType: "application/pdf", Data: data}}, 2_766_750},
		{"/v1/messages", config.FamilyMessages, messages("tdoc-mini"), "tdoc-mini", functionOutputFile,
			responsesFile{Type: "input_file", FileData: "data:application/pdf;base64," + data, Filename: "document.pdf"}, 176_080},
	} {
		t.Run(tc.route+" to "+tc.model, func(t *testing.T) {
			g, bodies := chatDocumentGateway(t, "tdoc", tc.family, 460_000, 439_000)
			tenant := g.NewTenant(t, "acme", 0, granted)
			status, res := post(t, g, tenant.Key, tc.route, tc.body)
			if status != http.StatusOK {
				t.Fatalf("%d %.300s", status, res)
			}
			sent, _ := bodies.Load(tc.model)
			b, _ := sent.([]byte)
			if got, err := tc.part(b); err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the upstream got %.300s (%v); want the document as %+.300v", b, err, tc.want)
			}
			if rec := latestUsage(t, g, tenant.Account, 1); rec.CostMicros != tc.cost || rec.WaivedMicros != 0 {
				t.Errorf("billed %d, waived %d; want %d and none", rec.CostMicros, rec.WaivedMicros, tc.cost)
			}
			if tc.route == "/v1/messages" {
				status, res := post(t, g, tenant.Key, "/v1/messages", messages("tdoc-chat"))
				const place = "messages[2].content[0].content[0]"
				if env := errorEnvelopeOf(res); status != http.StatusBadRequest || env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, place) {
					t.Errorf("to the chat upstream: %d %.300s; want a 400 naming %s", status, res, place)
				}
			}
			if _, usage := checkBooks(t, g, tenant.Account, granted); usage != tc.cost {
				t.Errorf("usage %d; want the served request's, %d", usage, tc.cost)
			}
		})
	}
}

// toolResultDocument is the first block of the first tool_result of a Messages request body.
func toolResultDocument(body []byte) (any, error) {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string             `json:"type"`
			Content []messagesDocument `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a string
		}
		for _, b := range blocks {
			if b.Type == "tool_result" && len(b.Content) > 0 {
				return b.Content[0], nil
			}
		}
	}
	return nil, fmt.Errorf("no tool_result with content")
}

// functionOutputFile is the first part of the output of the first function_call_output of a
// Responses request body.
func functionOutputFile(body []byte) (any, error) {
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	for _, item := range req.Input {
		var parts []responsesFile
		if item.Type == "function_call_output" && json.Unmarshal(item.Output, &parts) == nil && len(parts) > 0 {
			return parts[0], nil
		}
	}
	return nil, fmt.Errorf("no function_call_output with an array output")
}

// The document parts of the three formats, as the upstreams' tests read them.
type (
	chatFileData struct {
		FileData string `json:"file_data"`
		Filename string `json:"filename"`
	}
	chatFile struct {
		Type string       `json:"type"`
		File chatFileData `json:"file"`
	}
	messagesSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	}
	messagesDocument struct {
		Type   string         `json:"type"`
		Source messagesSource `json:"source"`
	}
	responsesFile struct {
		Type     string `json:"type"`
		FileData string `json:"file_data"`
		Filename string `json:"filename"`
	}
)

// chatFilePart is the second part of the first message of a chat request body.
func chatFilePart(body []byte) (any, error) {
	var req struct {
		Messages []struct {
			Content []chatFile `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || len(req.Messages[0].Content) < 2 {
		return nil, fmt.Errorf("no second part of a first message (%v)", err)
	}
	return req.Messages[0].Content[1], nil
}

// messagesDocumentBlock is the second block of the first message of a Messages request body.
func messagesDocumentBlock(body []byte) (any, error) {
	var req struct {
		Messages []struct {
			Content []messagesDocument `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 || len(req.Messages[0].Content) < 2 {
		return nil, fmt.Errorf("no second block of a first message (%v)", err)
	}
	return req.Messages[0].Content[1], nil
}

// responsesFilePart is the second part of the first input item of a Responses request body.
func responsesFilePart(body []byte) (any, error) {
	var req struct {
		Input []struct {
			Content []responsesFile `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Input) == 0 || len(req.Input[0].Content) < 2 {
		return nil, fmt.Errorf("no second part of a first item (%v)", err)
	}
	return req.Input[0].Content[1], nil
}

// TestCutChatDocumentStreamBillsItsPages: a chat stream cut before its usage (the upstream
// stops after a chunk of text, without a finish_reason or [DONE]) is billed the pages of an
// inline PDF sent as a file content part, at their bound (3,000 text tokens and gpt-4.1-mini's
// image bound, 2,489, each), as the Responses route bills them
// (TestCutDocumentStreamBillsItsPages), not the file's size.
func TestCutChatDocumentStreamBillsItsPages(t *testing.T) {
	url := cannedUpstream(t, "text/event-stream", `data: {"id":"chatcmpl-d1","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Half a summary"},"finish_reason":null}]}

`)
	g, tenant := standInGateway(t, "cut-chat-pages", config.KindOpenAIChat, url)
	client := openAIClient(g, t, tenant.Key)
	data := base64.StdEncoding.EncodeToString(pdftest.ObjectStream(30))
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "cut-chat-pages-chat", MaxTokens: param.NewOpt[int64](1000),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("Summarize the report."),
			openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{
				Filename: param.NewOpt("report.pdf"), FileData: param.NewOpt("data:application/pdf;base64," + data)}),
		})}})
	var text string
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text += c.Choices[0].Delta.Content
		}
	}
	_ = stream.Close()
	if text != "Half a summary" || stream.Err() == nil {
		t.Errorf("the client got %q and stream error %v; want the text the upstream sent, then the in-band error", text, stream.Err())
	}
	const pages = 30 * (3000 + 2489)
	if rec := latestUsage(t, g, tenant.Account, 1); rec.Status != "upstream_cut_off" || rec.InputTokens < pages || rec.WaivedMicros != 0 {
		t.Errorf("a cut chat stream with a 30-page PDF: status %s, billed %d input tokens, waived %d; want upstream_cut_off, at least %d and none",
			rec.Status, rec.InputTokens, rec.WaivedMicros, pages)
	}
	checkBooks(t, g, tenant.Account, 100_000_000)
}
