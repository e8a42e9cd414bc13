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
// usage, status, type, choices and error decoded into structs. The reflection-free reader must
// agree with it.
func referenceResponseUsage(f llm.Format, body []byte) (llm.Usage, bool) {
	var u llm.Usage
	slim := []byte{'{'}
	if scanTop(body, func(key, value []byte) error {
		switch string(key) {
		case "usage", "status", "type", "choices", "error":
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
	case llm.FormatResponses:
		var w struct {
			Status string `json:"status"`
			Usage  *struct {
				InputTokens         int64    `json:"input_tokens"`
				OutputTokens        int64    `json:"output_tokens"`
				InputTokensDetails  *details `json:"input_tokens_details"`
				OutputTokensDetails *details `json:"output_tokens_details"`
			} `json:"usage"`
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
		if json.Unmarshal(slim, &w) != nil || w.Type != "message" {
			return u, false
		}
		x := w.Usage
		u = llm.Usage{InputTokens: x.InputTokens + x.CacheCreationInputTokens + x.CacheReadInputTokens,
			OutputTokens: x.OutputTokens, CachedInputTokens: x.CacheReadInputTokens}
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
