package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// referenceResponseUsage is ResponseUsage as it was written with encoding/json: the members
// usage, status, type, choices, error and service_tier decoded into structs. The
// reflection-free reader must agree with it.
func referenceResponseUsage(f llm.Format, body []byte) (llm.Usage, bool) {
	var u llm.Usage
	slim := []byte{'{'}
	if scanTop(body, func(key, value []byte) error {
		switch string(key) {
		case "usage", "status", "type", "choices", "error", "service_tier":
			if len(slim) > 1 {
				slim = append(slim, ',')
			}
			slim = append(append(append(append(slim, '"'), key...), '"', ':'), value...)
		}
		return nil
	}) != nil {
		return u, false
	}
	slim = append(slim, '}')
	type details struct {
		CachedTokens    int64 `json:"cached_tokens"`
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}
	// A service tier is a string; anything else is no tier, and never an error.
	tier := func(raw json.RawMessage) string {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	switch f {
	case llm.FormatChat:
		var w struct {
			Choices json.RawMessage `json:"choices"`
			Error   json.RawMessage `json:"error"`
			Usage   *struct {
				PromptTokens            int64    `json:"prompt_tokens"`
				CompletionTokens        int64    `json:"completion_tokens"`
				PromptTokensDetails     *details `json:"prompt_tokens_details"`
				CompletionTokensDetails *details `json:"completion_tokens_details"`
			} `json:"usage"`
			ServiceTier json.RawMessage `json:"service_tier"`
		}
		// A chat completion has choices, and a body with an error is a failure, not an answer.
		if json.Unmarshal(slim, &w) != nil || len(w.Choices) == 0 || w.Choices[0] != '[' || (w.Error != nil && string(w.Error) != "null") {
			return u, false
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
		u.ServiceTier = tier(w.ServiceTier)
	case llm.FormatResponses:
		var w struct {
			Status string `json:"status"`
			Usage  *struct {
				InputTokens         int64    `json:"input_tokens"`
				OutputTokens        int64    `json:"output_tokens"`
				InputTokensDetails  *details `json:"input_tokens_details"`
				OutputTokensDetails *details `json:"output_tokens_details"`
			} `json:"usage"`
			ServiceTier json.RawMessage `json:"service_tier"`
		}
		if json.Unmarshal(slim, &w) != nil || w.Status == "" || w.Status == "failed" {
			return u, false
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
		u.ServiceTier = tier(w.ServiceTier)
	case llm.FormatMessages:
		var w struct {
			Type  string `json:"type"`
			Usage struct {
				InputTokens              int64 `json:"input_tokens"`
				OutputTokens             int64 `json:"output_tokens"`
				CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
				CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
				// Not pointers: a null leaves the counts as they are, as the reader does.
				CacheCreation struct {
					Ephemeral5mInputTokens int64 `json:"ephemeral_5m_input_tokens"`
					Ephemeral1hInputTokens int64 `json:"ephemeral_1h_input_tokens"`
				} `json:"cache_creation"`
				OutputTokensDetails struct {
					ThinkingTokens int64 `json:"thinking_tokens"`
				} `json:"output_tokens_details"`
				ServiceTier json.RawMessage `json:"service_tier"`
			} `json:"usage"`
		}
		if json.Unmarshal(slim, &w) != nil || w.Type != "message" {
			return u, false
		}
		x := w.Usage
		u = AnthropicCounts{Input: x.InputTokens, CacheRead: x.CacheReadInputTokens, CacheWrite: x.CacheCreationInputTokens,
			CacheWrite5m: x.CacheCreation.Ephemeral5mInputTokens, CacheWrite1h: x.CacheCreation.Ephemeral1hInputTokens,
			Output: x.OutputTokens, Thinking: x.OutputTokensDetails.ThinkingTokens, ServiceTier: tier(x.ServiceTier)}.Usage()
	}
	return u, true
}

// usageSeeds are recorded answers and hand-written edge cases of every format.
func usageSeeds(t testing.TB) []string {
	seeds := []string{
		`{"usage":{"prompt_tokens":12,"completion_tokens":3}}`,
		`{"usage":null}`, `{}`, `{"usage":{}}`, `{"usage":"x"}`, `{"usage":[1]}`,
		`{"usage":{"prompt_tokens":12.0}}`, `{"usage":{"prompt_tokens":1e2}}`, `{"usage":{"prompt_tokens":-5}}`,
		`{"usage":{"prompt_tokens":9223372036854775807}}`, `{"usage":{"prompt_tokens":9223372036854775808}}`,
		`{"usage":{"prompt_tokens":-9223372036854775808}}`, `{"usage":{"prompt_tokens":-9223372036854775809}}`,
		`{"usage":{"prompt_tokens":007}}`, `{"usage":{"prompt_tokens":"12"}}`, `{"usage":{"prompt_tokens":null}}`,
		`{"usage":{"prompt_tokens":1,"prompt_tokens":2}}`, `{"usage":{"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":4}}}`,
		`{"usage":{"prompt_tokens_details":7}}`, `{"usage":{"pr\u006fmpt_tokens":5}}`, `{"usage":{"prompt_toKens":1,"PROMPT_TOKENS":2}}`,
		`{"status":"completed","usage":{"input_tokens":4,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}}}`,
		`{"status":"","usage":{}}`, `{"status":null}`, `{"status":7}`, `{"status":"in\u0070rogress"}`,
		`{"type":"message","usage":{"input_tokens":3,"output_tokens":2,"cache_creation_input_tokens":1,"cache_read_input_tokens":5}}`,
		`{"type":"messag\u0065","usage":{"input_tokens":3}}`, `{"type":"error"}`, `{"type":"message","usage":null}`,
		`[]`, `{"usage":{"prompt_tokens":1}`, ` {"usage" : { "prompt_tokens" : 3 } } `,
		`{"choices":[],"usage":{"prompt_tokens":2}}`, `{"choices":{},"usage":{"prompt_tokens":2}}`, `{"choices":[],"error":null}`,
		`{"choices":[],"error":{"message":"quota of org-x","code":502}}`, `{"error":{"message":"m"}}`,
		`{"status":"failed","error":{"code":"server_error","message":"org-x"},"usage":null}`,
		// Cache writes by time to live and service tiers
		// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching,
		// https://platform.openai.com/docs/api-reference/chat/object).
		`{"type":"message","usage":{"input_tokens":2000,"cache_creation_input_tokens":10000,"cache_read_input_tokens":50000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":10000},"output_tokens":500,"service_tier":"standard"}}`,
		`{"type":"message","usage":{"input_tokens":1,"cache_creation_input_tokens":9,"cache_creation":{"ephemeral_1h_input_tokens":4},"Cache_Creation":{"EPHEMERAL_5M_INPUT_TOKENS":5}}}`,
		`{"type":"message","usage":{"cache_creation_input_tokens":3,"cache_creation":{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":5}}}`,
		`{"type":"message","usage":{"cache_creation":{"ephemeral_1h_input_tokens":5},"cache_creation":null}}`,
		`{"type":"message","usage":{"cache_creation":7}}`, `{"type":"message","usage":{"cache_creation":{"ephemeral_1h_input_tokens":1.5}}}`,
		`{"type":"message","usage":{"output_tokens":9,"output_tokens_details":{"thinking_tokens":4}}}`,
		`{"type":"message","usage":{"service_tier":"priority","SERVICE_TIER":null}}`, `{"type":"message","usage":{"service_tier":7}}`,
		`{"type":"message","usage":{"service_tier":"pri\u006frity"}}`, `{"type":"message","service_tier":"top-level is not Anthropic's"}`,
		`{"choices":[],"service_tier":"flex"}`, `{"choices":[],"service_tier":"flex","service_tier":null}`, `{"choices":[],"Service_Tier":"flex"}`,
		`{"choices":[],"service_tier":["default"]}`, `{"choices":[],"service_tier":"caf\u00e9 \ud800"}`, "{\"choices\":[],\"service_tier\":\"\xff\"}",
		`{"status":"completed","service_tier":"priority","usage":{"input_tokens":52000,"input_tokens_details":{"cached_tokens":50000},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":128}}}`,
	}
	for _, prefix := range []string{"chat", "responses", "messages"} {
		matches, _ := filepath.Glob(filepath.Join("..", "sim", "testdata", prefix+"*.json"))
		for _, path := range matches {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, string(b))
		}
	}
	return seeds
}

func TestResponseUsageAgreesWithReference(t *testing.T) {
	for _, body := range usageSeeds(t) {
		for _, f := range []llm.Format{llm.FormatChat, llm.FormatResponses, llm.FormatMessages} {
			checkUsageAgainstReference(t, f, []byte(body))
		}
	}
}

func FuzzResponseUsageAgreesWithReference(f *testing.F) {
	for _, s := range usageSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			// ResponseUsage checks the structure it walks, not the contents of every string
			// (the answer's bytes go to the client as the upstream wrote them); the reference
			// refused a malformed string inside usage. Only JSON is compared.
			return
		}
		for _, format := range []llm.Format{llm.FormatChat, llm.FormatResponses, llm.FormatMessages} {
			checkUsageAgainstReference(t, format, []byte(body))
		}
	})
}

func checkUsageAgainstReference(t *testing.T, f llm.Format, body []byte) {
	t.Helper()
	want, wantOK := referenceResponseUsage(f, body)
	got, err := ResponseUsage(f, body)
	if (err == nil) != wantOK || (wantOK && got != want) {
		// encoding/json reads a count of 1e2 or 12.0 as an error, as does ResponseUsage; it
		// also leaves a count alone when a later duplicate key is null, as ResponseUsage does.
		t.Errorf("%s %s: got %+v (%v), reference %+v (ok %v)", f, strings.TrimSpace(string(body)), got, err, want, wantOK)
	}
}
