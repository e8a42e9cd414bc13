package convert

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// usageBenchAnswers are complete answers of each format as the providers send them, with their
// cache and reasoning counts, for the usage reader that same-format relays run on every answer.
var usageBenchAnswers = []struct {
	name string
	f    llm.Format
	body string
}{
	{"chat", llm.FormatChat, `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"The image shows a wooden boardwalk path running through a lush green field or meadow.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":52000,"completion_tokens":500,"total_tokens":52500,"prompt_tokens_details":{"cached_tokens":50000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`},
	{"responses", llm.FormatResponses, `{"id":"resp_67ccd3a9da748190baa7f1570fe91ac604becb25c45c1d41","object":"response","created_at":1741476777,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-4o-2024-08-06","output":[{"type":"message","id":"msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41","status":"completed","role":"assistant","content":[{"type":"output_text","text":"The image depicts a scenic landscape with a wooden boardwalk.","annotations":[]}]}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128},"total_tokens":52500},"user":null,"metadata":{}}`},
	{"messages", llm.FormatMessages, `{"id":"msg_013Zva2CMHLNnXjNJJKqJ2EF","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Hi! My name is Claude."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500,"service_tier":"standard"}}`},
}

// BenchmarkResponseUsage measures the usage reader of same-format relays on a complete answer of
// each format.
func BenchmarkResponseUsage(b *testing.B) {
	for _, a := range usageBenchAnswers {
		b.Run(a.name, func(b *testing.B) {
			body := []byte(a.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := ResponseUsage(a.f, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// toolLoopBody is a chat request of a coding agent's loop: tools offered and forty turns of
// one tool call and its result, each call with its own id.
func toolLoopBody() []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":256,"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}},{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"fix the failing test"}`)
	for i := range 40 {
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]},{"role":"tool","tool_call_id":"call_%d","content":"package a"}`, i, i)
	}
	b.WriteString(`,{"role":"user","content":"go on"}]}`)
	return []byte(b.String())
}

// BenchmarkEncodeToolLoop measures the translation of a tool loop's request (toolLoopBody) to
// each other format: the history's checks (tool names, call ids) run on every turn of an agent.
func BenchmarkEncodeToolLoop(b *testing.B) {
	req, err := DecodeRequest(llm.FormatChat, toolLoopBody())
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []llm.Format{llm.FormatResponses, llm.FormatMessages} {
		b.Run(string(f), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EncodeRequest(f, req, "up"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
