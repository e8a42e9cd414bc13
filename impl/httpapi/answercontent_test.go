package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// citedAnswer is a Messages answer whose second text block cites a web page, in the shape of
// Anthropic's web search answers (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool,
// "Citations": text blocks with web_search_result_location citations carrying url, title,
// encrypted_index and cited_text). The cited block is "Café prices rose 5% 😀.", 22 characters
// after 22 characters of text before it.
const (
	citedBefore = "Here is what I found. "
	citedText   = "Café prices rose 5% 😀."
	citedURL    = "https://example.com/prices"
	citedTitle  = "Prices in 2026"
	citedJSON   = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[` +
		`{"type":"text","text":"` + citedBefore + `"},` +
		`{"type":"text","text":"` + citedText + `","citations":[{"type":"web_search_result_location","url":"` + citedURL + `","title":"` + citedTitle + `","encrypted_index":"EqQBCioIAhgB","cited_text":"prices rose 5%"}]},` +
		`{"type":"text","text":" Done."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":12}}`
)

// citedStream is citedAnswer streamed as Anthropic streams it: the citation in a
// citations_delta before the block's text_delta.
func citedStream(w io.Writer) {
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`)
	for i, text := range []string{citedBefore, citedText, " Done."} {
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
		if i == 1 {
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"`+citedURL+`","title":"`+citedTitle+`","encrypted_index":"EqQBCioIAhgB","cited_text":"prices rose 5%"}}}`)
		}
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`, i, text))
		ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// splitStartStream is a Messages stream whose text block opens with text in its
// content_block_start, ending in the high half of 😀 (U+1F600, \ud83d\ude00 in UTF-16), the low
// half beginning the first text_delta, as a server that cuts its text by UTF-16 length may send.
func splitStartStream(w io.Writer) {
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"smile \ud83d"}}`)
	ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ude00 ok"}}`)
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// answeringGateway is a gateway whose chat-family model "answering-chat" is served by a
// stand-in Anthropic upstream: a prompt containing "split" gets splitStartStream, any other
// the cited answer (citedJSON, or citedStream when streamed).
func answeringGateway(t *testing.T) *apitest.Gateway {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, citedJSON)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.Contains(string(body), "split") {
			splitStartStream(w)
			return
		}
		citedStream(w)
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "answering", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "answering-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "answering", Model: "claude-sonnet-4-6"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "answering-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{Config: cfg})
}

// TestWebCitationsReachOpenAIClients: an Anthropic upstream's web citations (a text block's
// web_search_result_location, which cites the whole block) reach a chat and a Responses
// client as OpenAI's url_citation annotations (chat message.annotations, Responses
// output_text.annotations and response.output_text.annotation.added:
// https://platform.openai.com/docs/api-reference/chat/object and
// https://platform.openai.com/docs/api-reference/responses-streaming), with the url, the title
// and the cited block's range in the answer's text in characters (22 to 44: the emoji is one),
// as openai-go reads them. Before, they were dropped: the annotations were empty.
func TestWebCitationsReachOpenAIClients(t *testing.T) {
	g := answeringGateway(t)
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	const start, end = 22, 44
	check := func(what, url, title string, s, e int64) {
		t.Helper()
		if url != citedURL || title != citedTitle || s != start || e != end {
			t.Errorf("%s: url_citation %q %q [%d, %d); want %q %q [%d, %d)", what, url, title, s, e, citedURL, citedTitle, start, end)
		}
	}

	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "answering-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("prices?")}})
	if err != nil {
		t.Fatal(err)
	}
	msg := chat.Choices[0].Message
	if msg.Content != citedBefore+citedText+" Done." {
		t.Errorf("chat text %q", msg.Content)
	}
	if len(msg.Annotations) != 1 {
		t.Fatalf("chat: %d annotations, want 1: %s", len(msg.Annotations), msg.RawJSON())
	}
	a := msg.Annotations[0].URLCitation
	check("chat", a.URL, a.Title, a.StartIndex, a.EndIndex)

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "answering-chat",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("prices?")}})
	if err != nil {
		t.Fatal(err)
	}
	checkResponsesCitation := func(what string, r *responses.Response) {
		t.Helper()
		var anns []responses.ResponseOutputTextAnnotationUnion
		for _, it := range r.Output {
			for _, c := range it.Content {
				anns = append(anns, c.Annotations...)
			}
		}
		if len(anns) != 1 || anns[0].Type != "url_citation" {
			t.Fatalf("%s: annotations %+v, want one url_citation: %s", what, anns, r.RawJSON())
		}
		check(what, anns[0].URL, anns[0].Title, anns[0].StartIndex, anns[0].EndIndex)
	}
	checkResponsesCitation("responses", resp)

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "answering-chat",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("prices?")}})
	added := 0
	var done *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.annotation.added":
			added++
			an := ev.Annotation
			var fields struct {
				URL        string `json:"url"`
				Title      string `json:"title"`
				StartIndex int64  `json:"start_index"`
				EndIndex   int64  `json:"end_index"`
			}
			if err := json.Unmarshal([]byte(an.RawJSON()), &fields); err != nil {
				t.Fatal(err)
			}
			check("responses stream annotation.added", fields.URL, fields.Title, fields.StartIndex, fields.EndIndex)
		case "response.completed":
			r := ev.Response
			done = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if added != 1 || done == nil {
		t.Fatalf("responses stream: %d annotation.added events, completed %v; want 1 and a completed response", added, done != nil)
	}
	checkResponsesCitation("responses stream, completed", done)
}

// TestSplitCharacterInABlockStartIsJoined: a Messages stream's content_block_start may carry
// the block's first text, and a character outside the Basic Multilingual Plane may be split
// between it and the first text_delta (its UTF-16 halves as two \u escapes). It reaches a chat
// client whole, as a split between two deltas does; before, the start's text was read by
// encoding/json alone and the client got "smile \ufffd\ufffd ok".
func TestSplitCharacterInABlockStartIsJoined(t *testing.T) {
	g := answeringGateway(t)
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "answering-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("split")}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "smile 😀 ok" {
		t.Errorf("the chat client reads %q, want %q", got, "smile 😀 ok")
	}
}
