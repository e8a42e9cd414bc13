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
	bytes := len(req.System)
	tokens := RequestOverheadTokens
	for _, m := range req.Messages {
		tokens += MessageOverheadTokens
		bytes += len(m.ToolCallID)
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartImage:
				tokens += ImageTokens
			default:
				bytes += len(p.Text)
			}
		}
		for _, c := range m.ToolCalls {
			tokens += ToolOverheadTokens
			bytes += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		tokens += ToolOverheadTokens
		bytes += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	if rf := req.ResponseFormat; rf != nil {
		bytes += len(rf.Name) + len(rf.Description) + len(rf.Schema)
	}
	for _, u := range req.Unmodelled {
		bytes += u.Size
	}
	return tokens + (bytes+BytesPerToken-1)/BytesPerToken
}
