package convert

import (
	"bytes"

	"github.com/tollgate/tollgate/impl/llm"
)

// UnmodelledOutput is how many characters of output the complete upstream answer body, of
// format f, carries that DecodeResponse's neutral answer does not: the thinking of a Messages
// answer's thinking blocks; the summary and reasoning text of a Responses answer's reasoning
// items; and the reasoning of a chat answer's first choice, which compatible servers add
// beside the content (DeepSeek's message.reasoning_content, api-docs.deepseek.com, "Reasoning
// Model (deepseek-reasoner)"; vLLM's and OpenRouter's message.reasoning, docs.vllm.ai,
// "Reasoning Outputs"), one of the two when both are sent (the same text under two names).
// The provider bills that output, so an answer whose upstream reported no output count is
// billed it, estimated from its length, as a stream cut short is
// (streamconv.UnmodelledOutput). Each string counts as sent, escapes included, as the
// stream's deltas do. A body that holds none of it, or that cannot be read, has none: a body
// without the member names is not scanned.
func UnmodelledOutput(f llm.Format, body []byte) int {
	switch f {
	case llm.FormatChat:
		if !bytes.Contains(body, []byte(`"reasoning`)) {
			return 0
		}
		choices, _ := scanArray(memberValue(body, "choices"))
		if len(choices) == 0 {
			return 0
		}
		msg := memberValue(choices[0], "message")
		return max(stringLen(memberValue(msg, "reasoning_content")), stringLen(memberValue(msg, "reasoning")))
	case llm.FormatResponses:
		if !bytes.Contains(body, []byte(`"reasoning"`)) {
			return 0
		}
		return reasoningItemsLen(memberValue(body, "output"))
	case llm.FormatMessages:
		if !bytes.Contains(body, []byte(`"thinking"`)) {
			return 0
		}
		return thinkingBlocksLen(memberValue(body, "content"))
	}
	return 0
}

// reasoningItemsLen is the length of the text of the reasoning items of a Responses answer's
// output: their summary parts (summary_text) and their content parts (reasoning_text, which
// servers that show the raw reasoning send, vLLM among them).
func reasoningItemsLen(output []byte) int {
	items, _ := scanArray(output)
	n := 0
	for _, item := range items {
		if kind, _ := typeAndName(item); kind != "reasoning" {
			continue
		}
		for _, parts := range [][]byte{memberValue(item, "summary"), memberValue(item, "content")} {
			list, _ := scanArray(parts)
			for _, part := range list {
				n += stringLen(memberValue(part, "text"))
			}
		}
	}
	return n
}

// thinkingBlocksLen is the length of the thinking of the thinking blocks of a Messages
// answer's content (a redacted_thinking block's data is encrypted, and its length says
// nothing of the tokens: it is not counted, as a stream's is not).
func thinkingBlocksLen(content []byte) int {
	blocks, _ := scanArray(content)
	n := 0
	for _, block := range blocks {
		if kind, _ := typeAndName(block); kind == "thinking" {
			n += stringLen(memberValue(block, "thinking"))
		}
	}
	return n
}

// stringLen is the length in bytes of the JSON string value v as sent (escapes included), or
// 0 when v is absent or not a string.
func stringLen(v []byte) int {
	if len(v) < 2 || v[0] != '"' {
		return 0
	}
	return len(v) - 2
}
