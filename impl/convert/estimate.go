package convert

import (
	"bytes"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

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
	// ContextBytesPerToken is the divisor of the byte count in the context-window check,
	// which refuses only a request that is over the window by any count a provider's
	// tokenizer could make of it: text averages about 3.5 to 4.5 bytes a token with the
	// providers' tokenizers (English prose, code), 5 for text of short repeated words, and no
	// natural text reaches 6. A request between that count and a closer one is the provider's
	// to refuse (its context_length_exceeded reaches the client in the client's format): four
	// bytes a token refused text of 5 bytes a token from 80 % of the window on (a newcomer's
	// trial, 2026-12-06).
	ContextBytesPerToken = 6
)

// EstimateInputTokens is a deterministic, cheap estimate of the input tokens of req, meant to
// be at or above the real count so that it can reserve worst-case credit:
//
//	ceil(bytes / BytesPerToken) + MessageOverheadTokens per message + RequestOverheadTokens
//	  + imageTokens per image + ToolOverheadTokens per tool definition and per tool call
//
// where imageTokens is the most the model's provider bills for one image (an image's size is
// not read: a URL's is not known; routing.Model.ImageTokens),
// and bytes counts the UTF-8 bytes of the system text, the text parts, the tool calls' names
// and arguments, the tool results, the tool definitions (name, description, parameter schema),
// the response-format schema, the base64 data of the inline documents, and the JSON of
// everything listed in Unmodelled (an audio part, or a document by reference, counts by its
// encoded size; a document's pages, which the providers bill, are DocumentTokens', which the
// reservation adds). Callers should cap the estimate at the model's
// context window.
func EstimateInputTokens(req *llm.Request, imageTokens int) int {
	cautious, _ := EstimateInput(req, imageTokens)
	return cautious
}

// ContextImageTokens is what a context-window check counts for one image: a low count
// (OpenAI's low-detail base for gpt-4o, 85; Anthropic counts a small image as fewer, its
// width × height / 750), so that the check, which must not refuse what the provider would
// serve, refuses only what the text alone makes too long, and leaves images to the provider's
// own count. An image's billing bound is far above what it takes of the window (gpt-4o-mini's
// 48,169: four images of any size overflowed its 128,000 tokens).
const ContextImageTokens = 85

// EstimateInput is, in one pass over req, EstimateInputTokens with images at imageTokens
// (cautious, for the reservation), and the count the context-window check takes (context):
// the text at ContextBytesPerToken, images at ContextImageTokens, the same overheads.
func EstimateInput(req *llm.Request, imageTokens int) (cautious, context int) {
	n := countInput(req)
	overhead := RequestOverheadTokens + n.messages*MessageOverheadTokens + n.tools*ToolOverheadTokens
	cautious = overhead + (n.bytes+BytesPerToken-1)/BytesPerToken + n.images*imageTokens
	context = overhead + n.bytes/ContextBytesPerToken + n.images*ContextImageTokens
	return cautious, context
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
		n.bytes += len(m.ToolCallID) + len(m.Refusal)
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartImage:
				n.images++
			case llm.PartDocument:
				n.bytes += len(p.Data) // its encoded size, as when it was not modelled
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
//	ceil(bytes / 4) + 3 per message + 3 + imageTokens per image + ToolOverheadTokens per tool
//	  definition and per tool call
//
// where bytes counts what EstimateInputTokens counts. An image still counts imageTokens, the
// most the model's provider bills for one (its size is not known), as the reservation did.
func BilledInputTokens(req *llm.Request, imageTokens int) int {
	n := countInput(req)
	return billedReplyPrimerTokens + n.messages*billedMessageTokens + n.images*imageTokens + n.tools*ToolOverheadTokens +
		(n.bytes+billedBytesPerToken-1)/billedBytesPerToken
}

// imageMarkers are, by format, the bytes without which a request of the format holds no image
// part: chat's image_url parts, Responses' input_image parts, Messages' image blocks (in a
// message or a tool result).
var imageMarkers = map[llm.Format][]byte{
	llm.FormatChat:      []byte(`"image_url"`),
	llm.FormatResponses: []byte(`"input_image"`),
	llm.FormatMessages:  []byte(`"image"`),
}

// MayHoldImages reports whether the request in v, of format f, may hold an image part: its
// body holds the format's image marker, or a \u escape, which could spell one. A request that
// may not is estimated from its size alone, and one that may is read for its images, which a
// provider bills by the picture (up to tens of thousands of tokens each), not by their bytes
// (a URL's few dozen).
func MayHoldImages(f llm.Format, v *jsonview.View) bool {
	marker := imageMarkers[f]
	return marker != nil && (v.UnicodeEscapes() > 0 || bytes.Contains(v.Body(), marker))
}

// ImageMarkers counts the image markers of format f in body: at least the image parts of a
// request that cannot be put in the neutral form (a chat image_url part holds its marker
// twice, as its type and as its member), for its cautious estimate.
func ImageMarkers(f llm.Format, body []byte) int {
	marker := imageMarkers[f]
	if marker == nil {
		return 0
	}
	return bytes.Count(body, marker)
}
