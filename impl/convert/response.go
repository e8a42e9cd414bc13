package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/jsontext"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/price"
)

// Meta is what a client-facing answer carries that the upstream's answer does not decide.
type Meta struct {
	// ID is the answer's id as the client sees it ("chatcmpl-…", "resp_…", "msg_…").
	ID string
	// Created is the creation time in unix seconds.
	Created int64
	// Model is the client-visible model id.
	Model string
	// Request, when set, is the client's request: a Responses answer echoes its instructions,
	// tools, tool_choice, temperature, top_p, text format, max_output_tokens and
	// parallel_tool_calls (defaults are echoed without it).
	Request *llm.Request
}

// upstreamError is the error for an upstream answer that cannot be used.
func upstreamError(format string, args ...any) error {
	return &apierror.Error{Kind: apierror.KindUpstream, Message: "the upstream returned an invalid response: " + fmt.Sprintf(format, args...)}
}

// DecodeResponse parses a complete (non-streamed) upstream response body of format f. A body
// that is not such a response (or a Responses body with status failed) gives a 502
// *apierror.Error.
func DecodeResponse(f llm.Format, body []byte) (*llm.Response, error) {
	switch f {
	case llm.FormatChat:
		return decodeChatResponse(body)
	case llm.FormatResponses:
		return decodeResponsesResponse(body)
	case llm.FormatMessages:
		return decodeMessagesResponse(body)
	}
	return nil, fmt.Errorf("convert: unknown format %q", f)
}

type chatResponseWire struct {
	ID      string           `json:"id"`
	Model   string           `json:"model"`
	Choices []chatChoiceWire `json:"choices"`
	Usage   *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
			AudioTokens  int64 `json:"audio_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
			AudioTokens     int64 `json:"audio_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	ServiceTier ServiceTier `json:"service_tier"`
}

// chatChoiceWire is a choice of a chat completion, as encoding/json reads it.
type chatChoiceWire struct {
	Message struct {
		Content     json.RawMessage `json:"content"`
		Refusal     *string         `json:"refusal"`
		Annotations urlCitations    `json:"annotations"`
		// Reasoning text some compatible servers answer with (DeepSeek's and vLLM's
		// reasoning_content, OpenRouter's reasoning), which the neutral answer does not hold.
		ReasoningContent string `json:"reasoning_content"`
		Reasoning        string `json:"reasoning"`
		ToolCalls        []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// text is the choice's text, as the neutral answer holds it: its content (a string, or the
// text parts some compatible servers answer with).
func (c *chatChoiceWire) text() (text string) {
	content := c.Message.Content
	switch firstByte(content) {
	case '"':
		_ = json.Unmarshal(content, &text)
	case '[': // some compatible servers answer with text parts
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(content, &parts)
		for _, p := range parts {
			if p.Type == "text" {
				text += p.Text
			}
		}
	}
	return text
}

func decodeChatResponse(body []byte) (*llm.Response, error) {
	var w chatResponseWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, upstreamError("not a chat completion")
	}
	if len(w.Choices) == 0 {
		return nil, upstreamError("a chat completion without choices")
	}
	c := w.Choices[0]
	r := &llm.Response{ID: w.ID, Model: w.Model, Stop: StopReasonFrom(llm.FormatChat, c.FinishReason)}
	r.Text = c.text()
	if c.Message.Refusal != nil {
		r.Refusal = *c.Message.Refusal
	}
	r.Stop = refusedStop(r)
	for _, a := range c.Message.Annotations {
		if a.Type == "url_citation" && a.URLCitation != nil {
			r.Citations = append(r.Citations, a.URLCitation.citation(0))
		} else {
			r.Dropped = droppedPart(r.Dropped, "choices[].message.annotations[].", a.Type)
		}
	}
	if c.Message.ReasoningContent != "" {
		r.Dropped = droppedPart(r.Dropped, "choices[].message.", "reasoning_content")
	}
	if c.Message.Reasoning != "" {
		r.Dropped = droppedPart(r.Dropped, "choices[].message.", "reasoning")
	}
	for _, tc := range c.Message.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	r.Stop = calledTools(r)
	if u := w.Usage; u != nil {
		r.Usage = llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			r.Usage.CachedInputTokens = u.PromptTokensDetails.CachedTokens
			r.Usage.AudioInputTokens = u.PromptTokensDetails.AudioTokens
		}
		if u.CompletionTokensDetails != nil {
			r.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
			r.Usage.AudioOutputTokens = u.CompletionTokensDetails.AudioTokens
		}
	}
	r.Usage.ServiceTier = string(w.ServiceTier)
	return r, nil
}

// droppedPart adds the part of an answer named by path and kind (its type as the upstream
// wrote it) to dropped, once; a part without a type is named "unknown".
func droppedPart(dropped []string, path, kind string) []string {
	if kind == "" {
		kind = "unknown"
	}
	name := path + kind
	if slices.Contains(dropped, name) {
		return dropped
	}
	return append(dropped, name)
}

// refusedStop is the stop reason of an answer that says it simply ended though it is the
// model's refusal: a refusal, so that a Messages client is told stop_reason refusal. The
// stream converters apply the same rule.
func refusedStop(r *llm.Response) llm.StopReason {
	if r.Stop == llm.StopEnd && r.Refusal != "" {
		return llm.StopRefusal
	}
	return r.Stop
}

// calledTools is the stop reason of an answer that says it simply ended though it called tools
// (some chat backends do): a call for tools, so that clients run their tool loop. The stream
// converters apply the same rule.
func calledTools(r *llm.Response) llm.StopReason {
	if r.Stop == llm.StopEnd && len(r.ToolCalls) > 0 {
		return llm.StopToolCalls
	}
	return r.Stop
}

type responsesResponseWire struct {
	ID                string `json:"id"`
	Model             string `json:"model"`
	Status            string `json:"status"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Output []struct {
		Type    string `json:"type"`
		Content []struct {
			Type        string       `json:"type"`
			Text        string       `json:"text"`
			Refusal     string       `json:"refusal"`
			Annotations urlCitations `json:"annotations"`
		} `json:"content"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"output"`
	Usage *struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		InputTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
	ServiceTier ServiceTier `json:"service_tier"`
}

func decodeResponsesResponse(body []byte) (*llm.Response, error) {
	var w responsesResponseWire
	if err := json.Unmarshal(body, &w); err != nil || w.Status == "" {
		return nil, upstreamError("not a response object")
	}
	if w.Status == "failed" {
		msg := "the response failed"
		if w.Error != nil && w.Error.Message != "" {
			msg = w.Error.Message
		}
		return nil, upstreamFailed(msg)
	}
	r := &llm.Response{ID: w.ID, Model: w.Model}
	for _, item := range w.Output {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				switch c.Type {
				case "output_text":
					// A part's annotations count from its own text's start.
					at := utf8.RuneCountInString(r.Text)
					for _, a := range c.Annotations {
						if a.Type == "url_citation" {
							r.Citations = append(r.Citations, a.citation(at))
						} else {
							r.Dropped = droppedPart(r.Dropped, "output[].content[].annotations[].", a.Type)
						}
					}
					r.Text += c.Text
				case "refusal":
					r.Refusal += c.Refusal
				default:
					r.Dropped = droppedPart(r.Dropped, "output[].content[].", c.Type)
				}
			}
		case "function_call":
			r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: item.CallID, Name: item.Name, Arguments: item.Arguments})
		default:
			// A reasoning item, a hosted tool's call (web_search_call, file_search_call, ...),
			// which the neutral answer does not hold.
			r.Dropped = droppedPart(r.Dropped, "output[].", item.Type)
		}
	}
	reason := ""
	if w.IncompleteDetails != nil {
		reason = w.IncompleteDetails.Reason
	}
	r.Stop = ResponsesStopReason(w.Status, reason, len(r.ToolCalls) > 0)
	r.Stop = refusedStop(r)
	if u := w.Usage; u != nil {
		r.Usage = llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
		if u.InputTokensDetails != nil {
			r.Usage.CachedInputTokens = u.InputTokensDetails.CachedTokens
		}
		if u.OutputTokensDetails != nil {
			r.Usage.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
		}
	}
	r.Usage.ServiceTier = string(w.ServiceTier)
	return r, nil
}

type messagesResponseWire struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Model   string `json:"model"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		// Citations are a text block's sources; only a web page's (web_search_result_location)
		// has a place in the OpenAI formats.
		Citations []struct {
			Type  string `json:"type"`
			URL   string `json:"url"`
			Title string `json:"title"`
		} `json:"citations"`
	} `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreation            *struct {
			Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
			Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
		OutputTokensDetails *struct {
			ThinkingTokens int64 `json:"thinking_tokens"`
		} `json:"output_tokens_details"`
		ServiceTier ServiceTier             `json:"service_tier"`
		Iterations  []MessagesIterationWire `json:"iterations"`
	} `json:"usage"`
}

// MessagesIterationWire is an item of an Anthropic usage's iterations, as encoding/json reads it.
type MessagesIterationWire struct {
	Type                     string `json:"type"`
	InputTokens              int64  `json:"input_tokens"`
	OutputTokens             int64  `json:"output_tokens"`
	CacheCreationInputTokens int64  `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64  `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// Counts are the item's counts.
func (w MessagesIterationWire) Counts() AnthropicIteration {
	it := AnthropicIteration{Input: w.InputTokens, CacheRead: w.CacheReadInputTokens, CacheWrite: w.CacheCreationInputTokens, Output: w.OutputTokens}
	if w.CacheCreation != nil {
		it.CacheWrite5m, it.CacheWrite1h = w.CacheCreation.Ephemeral5mInputTokens, w.CacheCreation.Ephemeral1hInputTokens
	}
	return it
}

func decodeMessagesResponse(body []byte) (*llm.Response, error) {
	var w messagesResponseWire
	if err := json.Unmarshal(body, &w); err != nil || w.Type != "message" {
		return nil, upstreamError("not a message")
	}
	r := &llm.Response{ID: w.ID, Model: w.Model, Stop: StopReasonFrom(llm.FormatMessages, w.StopReason)}
	if w.StopSequence != nil {
		r.StopSequence = *w.StopSequence
	}
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			// A block's citations cite the whole block.
			start := utf8.RuneCountInString(r.Text)
			r.Text += b.Text
			for _, c := range b.Citations {
				if c.Type == "web_search_result_location" {
					r.Citations = append(r.Citations, llm.Citation{URL: c.URL, Title: c.Title, Start: start, End: start + utf8.RuneCountInString(b.Text)})
				} else {
					r.Dropped = droppedPart(r.Dropped, "content[].citations[].", c.Type)
				}
			}
		case "tool_use":
			args := "{}"
			if !isNull(b.Input) {
				args = string(b.Input)
			}
			r.ToolCalls = append(r.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		default:
			// Thinking, a server tool's use and result (web search, code execution), which
			// the neutral answer does not hold.
			r.Dropped = droppedPart(r.Dropped, "content[].", b.Type)
		}
	}
	r.Stop = calledTools(r)
	u := w.Usage
	c := AnthropicCounts{Input: u.InputTokens, CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens,
		Output: u.OutputTokens, ServiceTier: string(u.ServiceTier)}
	if u.CacheCreation != nil {
		c.CacheWrite5m, c.CacheWrite1h = u.CacheCreation.Ephemeral5mInputTokens, u.CacheCreation.Ephemeral1hInputTokens
	}
	if u.OutputTokensDetails != nil {
		c.Thinking = u.OutputTokensDetails.ThinkingTokens
	}
	for _, it := range u.Iterations {
		c.AddIteration(it.Type, it.Counts())
	}
	r.Usage = c.Usage()
	return r, nil
}

// EncodeResponse writes resp as the complete response a client of format f expects, with the
// id, creation time and model of meta, in the shapes the official SDKs parse. A tool call
// whose arguments are not a JSON object cannot be written as an Anthropic tool_use block: it is
// left out when the answer was cut by its length limit, and is a 502 *apierror.Error otherwise.
func EncodeResponse(f llm.Format, resp *llm.Response, meta Meta) ([]byte, error) {
	var o object
	var err error
	switch f {
	case llm.FormatChat:
		o = chatResponse(resp, meta)
	case llm.FormatResponses:
		o = responsesResponse(resp, meta)
	case llm.FormatMessages:
		o, err = messagesResponse(resp, meta)
	default:
		return nil, fmt.Errorf("convert: unknown format %q", f)
	}
	if err != nil {
		return nil, err
	}
	return marshal(o)
}

func chatResponse(resp *llm.Response, meta Meta) object {
	msg := object{{"role", "assistant"}}
	if resp.Text == "" && (len(resp.ToolCalls) > 0 || resp.Refusal != "") {
		msg.set("content", nil) // as OpenAI answers a refusal: content null, refusal its words
	} else {
		msg.set("content", resp.Text)
	}
	if resp.Refusal != "" {
		msg.set("refusal", resp.Refusal)
	} else {
		msg.set("refusal", nil)
	}
	msg.set("annotations", chatAnnotations(resp.Citations))
	if len(resp.ToolCalls) > 0 {
		calls := make([]any, 0, len(resp.ToolCalls))
		for _, c := range resp.ToolCalls {
			calls = append(calls, object{{"id", c.ID}, {"type", "function"},
				{"function", object{{"name", c.Name}, {"arguments", c.Arguments}}}})
		}
		msg.set("tool_calls", calls)
	}
	return object{
		{"id", meta.ID},
		{"object", "chat.completion"},
		{"created", meta.Created},
		{"model", meta.Model},
		{"choices", []any{object{
			{"index", 0},
			{"message", msg},
			{"logprobs", nil},
			{"finish_reason", StopReasonFor(llm.FormatChat, resp.Stop)},
		}}},
		{"usage", json.RawMessage(AppendChatUsage(nil, resp.Usage))},
		{"system_fingerprint", nil},
		{"service_tier", OpenAIServiceTier(resp.Usage.ServiceTier)},
	}
}

// urlCitationWire is an OpenAI url_citation annotation as encoding/json reads it: a chat
// message's (its fields under url_citation) or a Responses output_text part's (its fields at
// the top).
type urlCitationWire struct {
	Type        string             `json:"type"`
	URLCitation *urlCitationFields `json:"url_citation"`
	urlCitationFields
}

// urlCitations are the annotations of an OpenAI answer's text. Nearly every answer has none
// (`[]`), which is read without allocating.
type urlCitations []urlCitationWire

// UnmarshalJSON implements json.Unmarshaler.
func (u *urlCitations) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '[' || bytes.Equal(bytes.TrimSpace(t[1:]), []byte("]")) {
		return nil // none, or not an array: no annotations
	}
	var w []urlCitationWire
	if json.Unmarshal(b, &w) != nil {
		return nil // annotations the gateway cannot read are not carried
	}
	*u = w
	return nil
}

// urlCitationFields are a url_citation's page and the range of text that cites it.
type urlCitationFields struct {
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

// citation is the neutral citation of f, whose indexes count from at, the character offset of
// its text in the answer's.
func (f *urlCitationFields) citation(at int) llm.Citation {
	return llm.Citation{URL: f.URL, Title: f.Title, Start: at + f.StartIndex, End: at + f.EndIndex}
}

// chatAnnotations is a chat message's annotations: a url_citation for each citation
// (https://platform.openai.com/docs/api-reference/chat/object, message.annotations).
func chatAnnotations(cs []llm.Citation) []any {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, object{{"type", "url_citation"}, {"url_citation", object{
			{"end_index", c.End}, {"start_index", c.Start}, {"title", c.Title}, {"url", c.URL}}}})
	}
	return out
}

// responsesAnnotations is a Responses output_text part's annotations: a url_citation for each
// citation (https://platform.openai.com/docs/api-reference/responses/object,
// output_text.annotations), its indexes those of the part's text, which is the answer's.
func responsesAnnotations(cs []llm.Citation) []any {
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, responsesAnnotation(c))
	}
	return out
}

// responsesAnnotation is the url_citation annotation of c on a Responses output_text part.
func responsesAnnotation(c llm.Citation) object {
	return object{{"type", "url_citation"}, {"end_index", c.End}, {"start_index", c.Start}, {"title", c.Title}, {"url", c.URL}}
}

// AppendChatUsage appends the usage object of a chat completion (and of the final chunk of a chat
// stream) to dst, as https://platform.openai.com/docs/api-reference/chat/object has it:
// prompt_tokens counts every input token, prompt_tokens_details.cached_tokens those read from
// the prompt cache, completion_tokens_details.reasoning_tokens the output spent on reasoning.
// Cache writes have no place of their own; they are in prompt_tokens.
func AppendChatUsage(dst []byte, u llm.Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens+u.OutputTokens, 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CachedInputTokens, 10)
	dst = append(dst, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.ReasoningTokens, 10)
	return append(dst, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

// AppendResponsesUsage appends the usage object of a Responses answer to dst, as
// https://platform.openai.com/docs/api-reference/responses/object has it: input_tokens counts
// every input token, input_tokens_details.cached_tokens those read from the prompt cache,
// output_tokens_details.reasoning_tokens the output spent on reasoning. Cache writes have no
// place of their own; they are in input_tokens.
func AppendResponsesUsage(dst []byte, u llm.Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens, 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.CachedInputTokens, 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.ReasoningTokens, 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.InputTokens+u.OutputTokens, 10)
	return append(dst, '}')
}

// AppendMessagesUsage appends the usage object of a Messages answer (and of a stream's
// message_start) to dst, as https://docs.anthropic.com/en/api/messages and
// https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching have it: input_tokens
// counts only the input tokens neither read from nor written to the cache,
// cache_read_input_tokens those read, cache_creation_input_tokens those written, and
// cache_creation breaks the writes down into five-minute and one-hour ones. The output spent on
// thinking is output_tokens_details.thinking_tokens when there is any, and the service tier is
// service_tier when the upstream's has a Messages name (see ServiceTierFor).
func AppendMessagesUsage(dst []byte, u llm.Usage) []byte {
	t := u.Tokens()
	dst = appendMessagesCounts(dst, t)
	dst = append(dst, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	dst = strconv.AppendInt(dst, t.CacheWrite5m, 10)
	dst = append(dst, `,"ephemeral_1h_input_tokens":`...)
	dst = strconv.AppendInt(dst, t.CacheWrite1h, 10)
	dst = append(dst, '}')
	dst = appendMessagesOutput(dst, t)
	if tier := ServiceTierFor(llm.FormatMessages, u.ServiceTier); tier != "" {
		dst = append(dst, `,"service_tier":`...)
		dst = jsontext.AppendString(dst, tier)
	}
	return append(dst, '}')
}

// AppendMessagesDeltaUsage appends the cumulative usage of a Messages stream's message_delta to
// dst: the counts of AppendMessagesUsage, without the breakdown of the cache writes and the
// service tier, which message_start carries.
func AppendMessagesDeltaUsage(dst []byte, u llm.Usage) []byte {
	t := u.Tokens()
	dst = appendMessagesCounts(dst, t)
	dst = appendMessagesOutput(dst, t)
	return append(dst, '}')
}

// appendMessagesCounts opens a Messages usage object with its input counts.
func appendMessagesCounts(dst []byte, t price.Tokens) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, t.Uncached, 10)
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = strconv.AppendInt(dst, t.CacheWrite5m+t.CacheWrite1h, 10)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	return strconv.AppendInt(dst, t.CacheRead, 10)
}

// appendMessagesOutput appends the output counts of a Messages usage object.
func appendMessagesOutput(dst []byte, t price.Tokens) []byte {
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, t.Output, 10)
	if t.Reasoning > 0 {
		dst = append(dst, `,"output_tokens_details":{"thinking_tokens":`...)
		dst = strconv.AppendInt(dst, t.Reasoning, 10)
		dst = append(dst, '}')
	}
	return dst
}

// OpenAIServiceTier is the service_tier of an OpenAI answer (chat or Responses) served on tier,
// in any format's words: its OpenAI name, or default when it has none or the upstream did not
// say.
func OpenAIServiceTier(tier string) string {
	if t := ServiceTierFor(llm.FormatChat, tier); t != "" {
		return t
	}
	return "default"
}

// mustMarshal writes an object made only of strings, numbers, booleans and nested objects,
// which cannot fail.
func mustMarshal(o object) json.RawMessage {
	b, err := marshal(o)
	if err != nil {
		panic(err)
	}
	return b
}

// itemIDs derives the ids of a Responses answer's output items from the response id.
func itemIDs(respID string) (msgID string, fcID func(i int) string) {
	base := strings.TrimPrefix(respID, "resp_")
	return "msg_" + base, func(i int) string { return fmt.Sprintf("fc_%s_%d", base, i) }
}

func responsesResponse(resp *llm.Response, meta Meta) object {
	msgID, fcID := itemIDs(meta.ID)
	output := []any{}
	status := StopReasonFor(llm.FormatResponses, resp.Stop)
	if resp.Text != "" || resp.Refusal != "" || len(resp.ToolCalls) == 0 {
		// The message of an incomplete answer is incomplete too, as the stream's is. A
		// refusal is a part of its own, as OpenAI answers it.
		content := []any{}
		if resp.Text != "" || resp.Refusal == "" {
			content = append(content, object{{"type", "output_text"}, {"text", resp.Text}, {"annotations", responsesAnnotations(resp.Citations)}, {"logprobs", []any{}}})
		}
		if resp.Refusal != "" {
			content = append(content, object{{"type", "refusal"}, {"refusal", resp.Refusal}})
		}
		output = append(output, object{
			{"id", msgID}, {"type", "message"}, {"status", status}, {"role", "assistant"},
			{"content", content},
		})
	}
	for i, c := range resp.ToolCalls {
		output = append(output, object{
			{"id", fcID(i)}, {"type", "function_call"}, {"status", "completed"},
			{"call_id", c.ID}, {"name", c.Name}, {"arguments", c.Arguments},
		})
	}
	var incomplete any
	if reason := ResponsesIncompleteReason(resp.Stop); reason != "" {
		incomplete = object{{"reason", reason}}
	}
	o := object{
		{"id", meta.ID},
		{"object", "response"},
		{"created_at", meta.Created},
		{"status", status},
		{"background", false},
		{"error", nil},
		{"incomplete_details", incomplete},
	}
	o = append(o, responsesEcho(meta.Request, OpenAIServiceTier(resp.Usage.ServiceTier))...)
	o = append(o, object{
		{"model", meta.Model},
		{"output", output},
		{"usage", json.RawMessage(AppendResponsesUsage(nil, resp.Usage))},
	}...)
	return o
}

// ResponsesInProgress is the response object of the response.created and
// response.in_progress events of a Responses stream: status in_progress, no output, usage
// null, and the same echo fields as EncodeResponse writes.
func ResponsesInProgress(meta Meta) []byte {
	o := object{
		{"id", meta.ID},
		{"object", "response"},
		{"created_at", meta.Created},
		{"status", "in_progress"},
		{"background", false},
		{"error", nil},
		{"incomplete_details", nil},
	}
	o = append(o, responsesEcho(meta.Request, "default")...)
	o = append(o, object{{"model", meta.Model}, {"output", []any{}}, {"usage", nil}}...)
	return mustMarshal(o)
}

// ResponsesEchoMembers is the members of a Responses answer that echo req (see responsesEcho),
// as JSON object members each preceded by a comma, ready to be appended before an object's
// closing brace: a streamed answer's response objects carry them as the whole answer does. The
// service_tier is not among them: it is the upstream's, which the stream says at its end.
func ResponsesEchoMembers(req *llm.Request) []byte {
	b := mustMarshal(responsesEcho(req, ""))
	if len(b) <= 2 {
		return nil
	}
	return append([]byte{','}, b[1:len(b)-1]...)
}

// responsesEcho is the members of a Responses answer that echo the request (instructions,
// max_output_tokens, parallel_tool_calls, temperature, text, tool_choice, tools, top_p, and
// the defaults of the others), from req when known, with service_tier set to tier (left out
// when tier is "").
func responsesEcho(req *llm.Request, tier string) object {
	if req == nil {
		req = &llm.Request{}
	}
	w := &writer{dst: llm.FormatResponses, req: req}
	var instructions any
	if req.System != "" {
		instructions = req.System
	}
	var maxOut any
	if req.MaxTokens > 0 {
		maxOut = req.MaxTokens
	}
	parallel := req.ParallelToolCalls == nil || *req.ParallelToolCalls
	temperature, topP := 1.0, 1.0
	if req.Temperature != nil {
		temperature = *req.Temperature
	}
	if req.TopP != nil {
		topP = *req.TopP
	}
	var tools object
	_ = w.responsesTools(&tools)
	toolsValue := any([]any{})
	if len(tools) > 0 {
		toolsValue = tools[0].value
	}
	var choice object
	_ = w.responsesToolChoice(&choice)
	choiceValue := any("auto")
	if len(choice) > 0 {
		choiceValue = choice[0].value
	}
	text := object{{"format", object{{"type", "text"}}}}
	if req.ResponseFormat != nil || req.Verbosity != "" {
		var t object
		_ = w.responsesText(&t)
		text = t[0].value.(object)
		if !text.has("format") {
			text = append(object{{"format", object{{"type", "text"}}}}, text...)
		}
	}
	var effort any
	if req.ReasoningEffort != "" {
		effort = req.ReasoningEffort
	}
	o := object{
		{"instructions", instructions},
		{"max_output_tokens", maxOut},
		{"metadata", object{}},
		{"parallel_tool_calls", parallel},
		{"previous_response_id", nil},
		{"reasoning", object{{"effort", effort}, {"summary", nil}}},
	}
	if tier != "" {
		o.set("service_tier", tier)
	}
	return append(o, object{
		{"store", false},
		{"temperature", temperature},
		{"text", text},
		{"tool_choice", choiceValue},
		{"tools", toolsValue},
		{"top_p", topP},
		{"truncation", "disabled"},
		{"user", nil},
	}...)
}

func messagesResponse(resp *llm.Response, meta Meta) (object, error) {
	content := []any{}
	// A Messages answer has no place for a refusal's words but its text (its stop_reason says
	// refusal).
	if text := resp.Text + resp.Refusal; text != "" {
		content = append(content, object{{"type", "text"}, {"text", text}})
	}
	for i, c := range resp.ToolCalls {
		input, ok := toolInput(c.Arguments)
		if !ok {
			if resp.Stop == llm.StopLength {
				continue // cut off by the length limit
			}
			return nil, upstreamError("the arguments of tool call %d are not a JSON object", i)
		}
		content = append(content, object{{"type", "tool_use"}, {"id", c.ID}, {"name", c.Name}, {"input", input}})
	}
	var seq any
	if resp.Stop == llm.StopSequence {
		seq = resp.StopSequence
	}
	return object{
		{"id", meta.ID},
		{"type", "message"},
		{"role", "assistant"},
		{"model", meta.Model},
		{"content", content},
		{"stop_reason", StopReasonFor(llm.FormatMessages, resp.Stop)},
		{"stop_sequence", seq},
		{"usage", json.RawMessage(AppendMessagesUsage(nil, resp.Usage))},
	}, nil
}
