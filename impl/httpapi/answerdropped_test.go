package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// thinkingAnswer is a Messages answer with what the OpenAI formats have no place for, in the
// shapes of Anthropic's documentation: a thinking block (extended thinking,
// https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking: "type": "thinking"
// with "thinking" and "signature"), a text block citing a document (citations,
// https://docs.anthropic.com/en/docs/build-with-claude/citations: a char_location citation
// with cited_text, document_index, document_title, start_char_index, end_char_index), and a
// text block after it.
const thinkingAnswer = `{"id":"msg_03","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[` +
	`{"type":"thinking","thinking":"The user asks about the grass.","signature":"EqQBCkgIARABGAIiQL"},` +
	`{"type":"text","text":"The grass is green.","citations":[{"type":"char_location","cited_text":"The grass is green.","document_index":0,"document_title":"Facts","start_char_index":0,"end_char_index":20}]},` +
	`{"type":"text","text":" That is all."}],` +
	`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":25}}`

// TestTranslatedAnswerNamesWhatItDrops: a chat or Responses client served by an Anthropic
// upstream whose answer holds a thinking block and a document's citation (neither of which
// the OpenAI formats have a place for) gets the answer's text, and is told what was left out
// in x-tollgate-dropped-fields, as it is told of its request's fields: answer.content[].thinking
// and answer.content[].citations[].char_location, each once. Before, they were dropped
// unnamed (the header was absent). An answer with nothing left out sends no such header.
func TestTranslatedAnswerNamesWhatItDrops(t *testing.T) {
	var answer atomic.Pointer[string] // the upstream's answer, read by its handler
	answer.Store(new(thinkingAnswer))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, *answer.Load())
	}))
	t.Cleanup(up.Close)
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "thinking", Kind: config.KindAnthropicMessages, BaseURL: up.URL})
	cfg.Models = append(cfg.Models, config.Model{ID: "thinking-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "thinking", Model: "claude-sonnet-4-6"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "thinking-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	client := openAIClient(g, t, tenant.Key)
	ctx := context.Background()
	const want = "answer.content[].thinking, answer.content[].citations[].char_location"

	var res *http.Response
	chat, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "thinking-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What colour is the grass?")}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if got := chat.Choices[0].Message.Content; got != "The grass is green. That is all." {
		t.Errorf("chat text %q", got)
	}
	if got := res.Header.Get("X-Tollgate-Dropped-Fields"); got != want {
		t.Errorf("chat: x-tollgate-dropped-fields %q, want %q", got, want)
	}

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "thinking-chat",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What colour is the grass?")}}, option.WithResponseInto(&res))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.OutputText(); got != "The grass is green. That is all." {
		t.Errorf("responses text %q", got)
	}
	if got := res.Header.Get("X-Tollgate-Dropped-Fields"); got != want {
		t.Errorf("responses: x-tollgate-dropped-fields %q, want %q", got, want)
	}

	answer.Store(new(citedJSON)) // web citations only, which the OpenAI formats hold
	if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "thinking-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Prices?")}}, option.WithResponseInto(&res)); err != nil {
		t.Fatal(err)
	}
	if got := res.Header.Get("X-Tollgate-Dropped-Fields"); got != "" {
		t.Errorf("an answer with nothing left out: x-tollgate-dropped-fields %q", got)
	}
}
