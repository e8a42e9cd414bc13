package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

// TestServerToolInputIsBilled: what Claude writes as a server tool call's input (a web
// search's query, the code a code execution runs) is output the provider bills, in a
// server_tool_use block of the answer or, streamed, in the input_json_delta events of such a
// block (platform.claude.com/docs, *Server tools*, *Web search tool*, *Code execution tool*,
// *Streaming Messages*). An answer whose usage reports no output, and a stream cut before its
// usage, are billed it, four characters a token, as sent; not the tools' results. Relayed to
// a Messages client and translated to the chat and Responses routes alike. On the code before,
// the answer was billed its text's 10 tokens of 42, and the stream none of its 34.
func TestServerToolInputIsBilled(t *testing.T) {
	const text = "Forty characters of answer text, exactly" // 40 characters: 10 tokens
	search := `{"query":"tollgate metering of server tool calls, in depth"}`
	code := `{"code":"import statistics\nprint(statistics.mean([1, 2, 3, 4]))\n"}`
	results := `[{"type":"web_search_result","url":"https://example.com/found","title":"Found","encrypted_content":"` + strings.Repeat("QUJD", 200) + `"}]`
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":` + search + `},` +
		`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":` + results + `},` +
		`{"type":"server_tool_use","id":"srvtoolu_2","name":"code_execution","input":` + code + `},` +
		`{"type":"code_execution_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"code_execution_result","stdout":"2.5\n","stderr":"","return_code":0}},` +
		fmt.Sprintf(`{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":0}}`, text)

	// The same calls streamed, their input in pieces, and then the stream breaks off.
	var stream strings.Builder
	event := func(name, data string) { fmt.Fprintf(&stream, "event: %s\ndata: %s\n\n", name, data) }
	event("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":1}}}`)
	streamed := 0
	for i, call := range []struct{ name, input string }{{"web_search", search}, {"code_execution", code}} {
		event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"server_tool_use","id":"srvtoolu_%d","name":%q,"input":{}}}`, 2*i, i+1, call.name))
		for piece := range strings.SplitSeq(call.input, ",") {
			quoted := fmt.Sprintf("%q", piece)
			streamed += len(quoted) - 2
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, 2*i, quoted))
		}
		event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, 2*i))
		event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_%d","content":%s}}`, 2*i+1, i+1, results))
		event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, 2*i+1))
	}

	for _, c := range []struct {
		name, contentType, body string
		stream                  bool
		want                    int64
	}{
		{"answer", "application/json", answer, false, int64(len(text)+len(search)+len(code)) / 4},
		{"cut stream", "text/event-stream", stream.String(), true, int64(streamed+3) / 4}, // a cut stream rounds up
	} {
		g, tenant := standInGateway(t, "searcher", config.KindAnthropicMessages, cannedUpstream(t, c.contentType, c.body))
		for i, route := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses"} {
			model := "searcher-" + config.FamilyChat
			if route == "/v1/messages" {
				model = "searcher-" + config.FamilyMessages
			}
			status, body := post(t, g, tenant.Key, route, inferenceBody(route, model, "search and compute", c.stream))
			if status != 200 {
				t.Fatalf("%s, %s: %d %.500s", c.name, route, status, body)
			}
			rec := latestUsage(t, g, tenant.Account, int64(i+1))
			checkReproducible(t, rec)
			if rec.OutputTokens != c.want {
				t.Errorf("%s, %s: billed %d output tokens (status %s); want %d", c.name, route, rec.OutputTokens, rec.Status, c.want)
			}
		}
		checkBooks(t, g, tenant.Account, 100_000_000)
	}
}
