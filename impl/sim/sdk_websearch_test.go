package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The official SDKs read the hosted web searches of [[sim web_search=N]] as the gateway's
// metering counts them: Responses web_search_call items, Messages server_tool_use blocks and
// usage.server_tool_use.web_search_requests, streamed and not.

// sdkSearchCalls returns the queries of the web_search_call items of a response's output.
func sdkSearchCalls(t *testing.T, out []responses.ResponseOutputItemUnion) []string {
	t.Helper()
	var qs []string
	for _, item := range out {
		if item.Type == "web_search_call" {
			ws := item.AsWebSearchCall()
			if ws.Status != "completed" || ws.Action.Type != "search" || len(ws.Action.Queries) != 1 || ws.Action.Queries[0] != ws.Action.Query {
				t.Errorf("web_search_call %s", item.RawJSON())
			}
			qs = append(qs, ws.Action.Query)
		}
	}
	return qs
}

func TestSDKOpenAIResponsesWebSearch(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	params := func(prompt string, maxCalls int64, tools ...responses.ToolUnionParam) responses.ResponseNewParams {
		p := responses.ResponseNewParams{
			Model: "sim-reasoner",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
			Tools: tools,
		}
		if maxCalls > 0 {
			p.MaxToolCalls = openai.Int(maxCalls)
		}
		return p
	}
	search := responses.ToolUnionParam{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}
	preview := responses.ToolUnionParam{OfWebSearchPreview: &responses.WebSearchPreviewToolParam{Type: "web_search_preview"}}
	const prompt = "What is new in Go? [[sim web_search=3]]"

	for _, c := range []struct {
		name     string
		maxCalls int64
		tools    []responses.ToolUnionParam
		want     int
	}{
		{"web_search", 0, []responses.ToolUnionParam{search}, 3},
		{"web_search_preview", 0, []responses.ToolUnionParam{preview}, 3},
		{"max_tool_calls", 2, []responses.ToolUnionParam{search}, 2},
		{"no tool", 0, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			done, err := client.Responses.New(ctx, params(prompt, c.maxCalls, c.tools...))
			if err != nil {
				t.Fatal(err)
			}
			qs := sdkSearchCalls(t, done.Output)
			if len(qs) != c.want || len(done.Output) != c.want+1 || done.Output[c.want].Type != "message" ||
				words(done.OutputText()) != DefaultWords || done.Usage.OutputTokens != DefaultWords {
				t.Errorf("%d searches, want %d: %s", len(qs), c.want, done.RawJSON())
			}

			stream := client.Responses.NewStreaming(ctx, params(prompt, c.maxCalls, c.tools...))
			var final *responses.Response
			var seq int64
			phases := map[string]int{}
			var doneItems []string
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber != seq {
					t.Errorf("sequence_number %d, want %d", ev.SequenceNumber, seq)
				}
				seq++
				switch ev.Type {
				case "response.web_search_call.in_progress", "response.web_search_call.searching":
					phases[string(ev.Type)]++
				case "response.web_search_call.completed":
					e := ev.AsResponseWebSearchCallCompleted()
					if e.OutputIndex != int64(phases[string(ev.Type)]) || e.ItemID == "" {
						t.Errorf("completed %s", ev.RawJSON())
					}
					phases[string(ev.Type)]++
				case "response.output_item.done":
					e := ev.AsResponseOutputItemDone()
					if e.Item.Type == "web_search_call" {
						if e.OutputIndex != int64(len(doneItems)) {
							t.Errorf("output_item.done %s", ev.RawJSON())
						}
						doneItems = append(doneItems, e.Item.AsWebSearchCall().Action.Query)
					}
				case "response.completed":
					r := ev.AsResponseCompleted().Response
					final = &r
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if final == nil {
				t.Fatal("no response.completed")
			}
			got := sdkSearchCalls(t, final.Output)
			for _, phase := range []string{"response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"} {
				if phases[phase] != c.want {
					t.Errorf("%d %s events, want %d", phases[phase], phase, c.want)
				}
			}
			if len(got) != c.want || len(doneItems) != c.want || final.OutputText() != done.OutputText() {
				t.Errorf("stream: %d items done, final %s", len(doneItems), final.RawJSON())
			}
			for i := range got {
				if got[i] != qs[i] || doneItems[i] != qs[i] {
					t.Errorf("query %d: streamed %q, final %q, not streamed %q", i, doneItems[i], got[i], qs[i])
				}
			}
		})
	}
}

func TestSDKAnthropicWebSearch(t *testing.T) {
	_, client := anthropicClient(t, 0)
	ctx := context.Background()
	params := func(prompt string, maxUses int64, search bool) anthropic.MessageNewParams {
		p := anthropic.MessageNewParams{
			Model:     "sim-sonnet",
			MaxTokens: 256,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		}
		if search {
			tool := &anthropic.WebSearchTool20250305Param{}
			if maxUses > 0 {
				tool.MaxUses = anthropic.Int(maxUses)
			}
			p.Tools = []anthropic.ToolUnionParam{{OfWebSearchTool20250305: tool}}
		}
		return p
	}
	// check returns the message's content normalised, after checking its want searches.
	check := func(t *testing.T, what string, msg *anthropic.Message, want int) []byte {
		t.Helper()
		if len(msg.Content) != 2*want+1 {
			t.Fatalf("%s: %d blocks, want %d: %s", what, len(msg.Content), 2*want+1, msg.RawJSON())
		}
		for i := 0; i < want; i++ {
			use := msg.Content[2*i].AsServerToolUse()
			var in struct{ Query string }
			raw, _ := json.Marshal(use.Input)
			if err := json.Unmarshal(raw, &in); err != nil || use.Type != "server_tool_use" || use.Name != "web_search" || words(in.Query) != searchWords {
				t.Errorf("%s: block %d %s", what, 2*i, msg.Content[2*i].RawJSON())
			}
			res := msg.Content[2*i+1].AsWebSearchToolResult()
			results := res.Content.OfWebSearchResultBlockArray
			if res.Type != "web_search_tool_result" || res.ToolUseID != use.ID || len(results) != searchResults ||
				results[0].URL == "" || results[0].Title == "" || results[0].EncryptedContent == "" {
				t.Errorf("%s: block %d %s", what, 2*i+1, msg.Content[2*i+1].RawJSON())
			}
		}
		if last := msg.Content[2*want]; last.Type != "text" || words(last.Text) != DefaultWords {
			t.Errorf("%s: last block %s", what, last.RawJSON())
		}
		if msg.Usage.ServerToolUse.WebSearchRequests != int64(want) || msg.Usage.OutputTokens != DefaultWords || msg.StopReason != "end_turn" {
			t.Errorf("%s: usage %s", what, msg.Usage.RawJSON())
		}
		var m struct{ Content json.RawMessage }
		if err := json.Unmarshal([]byte(msg.RawJSON()), &m); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, m.Content); err != nil {
			t.Fatal(err)
		}
		return normalise(buf.Bytes())
	}
	const prompt = "What is new in Go? [[sim web_search=3]]"
	for _, c := range []struct {
		name    string
		maxUses int64
		search  bool
		want    int
	}{
		{"web_search", 0, true, 3},
		{"max_uses", 2, true, 2},
		{"no tool", 0, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			done, err := client.Messages.New(ctx, params(prompt, c.maxUses, c.search))
			if err != nil {
				t.Fatal(err)
			}
			want := check(t, "message", done, c.want)

			stream := client.Messages.NewStreaming(ctx, params(prompt, c.maxUses, c.search))
			var msg anthropic.Message
			for stream.Next() {
				if err := msg.Accumulate(stream.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			// The accumulator rebuilds the message not streamed, ids apart.
			if got := check(t, "accumulated", &msg, c.want); !bytes.Equal(got, want) {
				t.Errorf("accumulated content\n%s\nnot streamed\n%s", got, want)
			}
		})
	}
}
