package convert

import (
	"encoding/json"

	"github.com/tollgate/tollgate/impl/llm"
)

// ResponseUsage reads only the usage of a complete upstream answer of format f, for answers
// passed to a client of the same format untouched: it scans the top level and decodes only the
// usage (and the status or type that says the answer is one). The counts follow
// DecodeResponse's convention (input includes cached tokens).
func ResponseUsage(f llm.Format, body []byte) (llm.Usage, error) {
	var u llm.Usage
	// Keep only the members the decoders below need.
	slim := make([]byte, 0, 256)
	slim = append(slim, '{')
	err := scanTop(body, func(key, value []byte) error {
		switch string(key) {
		case "usage", "status", "type":
			if len(slim) > 1 {
				slim = append(slim, ',')
			}
			slim = append(append(append(append(slim, '"'), key...), '"', ':'), value...)
		}
		return nil
	})
	if err != nil {
		return u, upstreamError("the answer is not a JSON object")
	}
	body = append(slim, '}')
	switch f {
	case llm.FormatChat:
		var w struct {
			Usage *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
				CompletionTokensDetails *struct {
					ReasoningTokens int64 `json:"reasoning_tokens"`
				} `json:"completion_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &w); err != nil {
			return u, upstreamError("not a chat completion")
		}
		if w.Usage != nil {
			u.InputTokens, u.OutputTokens = w.Usage.PromptTokens, w.Usage.CompletionTokens
			if d := w.Usage.PromptTokensDetails; d != nil {
				u.CachedInputTokens = d.CachedTokens
			}
			if d := w.Usage.CompletionTokensDetails; d != nil {
				u.ReasoningTokens = d.ReasoningTokens
			}
		}
	case llm.FormatResponses:
		var w struct {
			Status string `json:"status"`
			Usage  *struct {
				InputTokens        int64 `json:"input_tokens"`
				OutputTokens       int64 `json:"output_tokens"`
				InputTokensDetails *struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"input_tokens_details"`
				OutputTokensDetails *struct {
					ReasoningTokens int64 `json:"reasoning_tokens"`
				} `json:"output_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &w); err != nil || w.Status == "" {
			return u, upstreamError("not a response object")
		}
		if w.Usage != nil {
			u.InputTokens, u.OutputTokens = w.Usage.InputTokens, w.Usage.OutputTokens
			if d := w.Usage.InputTokensDetails; d != nil {
				u.CachedInputTokens = d.CachedTokens
			}
			if d := w.Usage.OutputTokensDetails; d != nil {
				u.ReasoningTokens = d.ReasoningTokens
			}
		}
	case llm.FormatMessages:
		var w struct {
			Type  string `json:"type"`
			Usage struct {
				InputTokens              int64 `json:"input_tokens"`
				OutputTokens             int64 `json:"output_tokens"`
				CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
				CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &w); err != nil || w.Type != "message" {
			return u, upstreamError("not a message")
		}
		x := w.Usage
		u = llm.Usage{InputTokens: x.InputTokens + x.CacheCreationInputTokens + x.CacheReadInputTokens,
			OutputTokens: x.OutputTokens, CachedInputTokens: x.CacheReadInputTokens}
	}
	return u, nil
}
