package convert

import "github.com/tollgate/tollgate/impl/llm"

// The constants of EstimateInputTokens.
const (
	// BytesPerToken is the divisor of the byte count: real tokenizers average about 4 bytes
	// of English per token, so dividing by 3 over-counts ordinary text.
	BytesPerToken = 3
	// MessageOverheadTokens is added per message for its role and framing.
	MessageOverheadTokens = 4
	// RequestOverheadTokens is added once, for the reply priming.
	RequestOverheadTokens = 3
	// ToolOverheadTokens is added per tool definition and per tool call.
	ToolOverheadTokens = 10
	// ImageTokens is the fixed cost of one image: above what either provider bills for an
	// image at its largest accepted size (about 1,600 tokens for Anthropic, 1,105 for a
	// high-detail OpenAI image).
	ImageTokens = 2000
)

// EstimateInputTokens is a deterministic, cheap estimate of the input tokens of req, meant to
// be at or above the real count so that it can reserve worst-case credit:
//
//	ceil(bytes / BytesPerToken) + MessageOverheadTokens per message + RequestOverheadTokens
//	  + ImageTokens per image + ToolOverheadTokens per tool definition and per tool call
//
// where bytes counts the UTF-8 bytes of the system text, the text parts, the tool calls' names
// and arguments, the tool results, the tool definitions (name, description, parameter schema),
// the response-format schema, and the JSON of everything listed in Unmodelled (an audio part or
// a document counts by its encoded size, which over-counts it). Callers should cap the
// estimate at the model's context window.
func EstimateInputTokens(req *llm.Request) int {
	n := countInput(req)
	return RequestOverheadTokens + n.messages*MessageOverheadTokens + n.images*ImageTokens + n.tools*ToolOverheadTokens +
		(n.bytes+BytesPerToken-1)/BytesPerToken
}

// inputCounts is what the estimates count of a request.
type inputCounts struct {
	// bytes are the UTF-8 bytes of its text (see EstimateInputTokens).
	bytes int
	// messages, images, and tools: the tool definitions and the tool calls.
	messages, images, tools int
}

// countInput counts req for the estimates.
func countInput(req *llm.Request) inputCounts {
	n := inputCounts{bytes: len(req.System)}
	for _, m := range req.Messages {
		n.messages++
		n.bytes += len(m.ToolCallID)
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartImage:
				n.images++
			default:
				n.bytes += len(p.Text)
			}
		}
		for _, c := range m.ToolCalls {
			n.tools++
			n.bytes += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n.tools++
		n.bytes += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if rf := req.ResponseFormat; rf != nil {
		n.bytes += len(rf.Name) + len(rf.Description) + len(rf.Schema)
	}
	for _, u := range req.Unmodelled {
		n.bytes += u.Size
	}
	return n
}

// The constants of BilledInputTokens, from OpenAI's published arithmetic: "1 token ~= 4 chars
// in English" (help.openai.com, "What are tokens and how to count them?"), and, in chat
// completions, 3 tokens framing each message and 3 priming the reply (the OpenAI Cookbook,
// "How to count tokens with tiktoken", num_tokens_from_messages).
const (
	billedBytesPerToken     = 4
	billedMessageTokens     = 3
	billedReplyPrimerTokens = 3
)

// BilledInputTokens is the input count billed for req when the upstream never said it (a
// chat or Responses stream reports its usage at its end, and one cut short before then never
// does): a central estimate, where EstimateInputTokens is a cautious one for the reservation.
//
//	ceil(bytes / 4) + 3 per message + 3 + ImageTokens per image + ToolOverheadTokens per tool
//	  definition and per tool call
//
// where bytes counts what EstimateInputTokens counts. An image still counts ImageTokens (its
// size is not known), which is at most what either provider bills for one.
func BilledInputTokens(req *llm.Request) int {
	n := countInput(req)
	return billedReplyPrimerTokens + n.messages*billedMessageTokens + n.images*ImageTokens + n.tools*ToolOverheadTokens +
		(n.bytes+billedBytesPerToken-1)/billedBytesPerToken
}
