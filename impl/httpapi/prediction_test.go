package httpapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
)

// TestRejectedPredictionTokensAreBilledAsOutput: a chat request with a predicted output
// (prediction) is billed its rejected prediction tokens at the output rate, as OpenAI bills
// them. OpenAI's API reference (chat completions, usage.completion_tokens_details.
// rejected_prediction_tokens): "When using Predicted Outputs, the number of tokens in the
// prediction that did not appear in the completion. However, like reasoning tokens, these
// tokens are still counted in the total completion tokens for purposes of billing, output, and
// context window limits." The answer's completion_tokens (120) hold the 100 rejected ones, and
// the record bills all 120 as output at the expert's output price.
func TestRejectedPredictionTokensAreBilledAsOutput(t *testing.T) {
	body := `{"id":"chatcmpl-p1","object":"chat.completion","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":120,"total_tokens":140,"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":18,"rejected_prediction_tokens":100}}}`
	g, tenant := standInGatewayWith(t, "predicted", config.KindOpenAIChat, cannedUpstream(t, "application/json", body), apitest.Options{})
	req := `{"model":"predicted-chat","max_tokens":200,"messages":[{"role":"user","content":"Rewrite the class."}],"prediction":{"type":"content","content":"class A:\n    pass\n"}}`
	if status, out := post(t, g, tenant.Key, "/v1/chat/completions", req); status != 200 {
		t.Fatalf("status %d: %s", status, out)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	checkReproducible(t, rec)
	if rec.OutputTokens != 120 || rec.InputTokens != 20 {
		t.Fatalf("record: input %d, output %d; want 20 and 120 (the rejected prediction tokens among the output)", rec.InputTokens, rec.OutputTokens)
	}
	if want := price.Cost(price.Tokens{Uncached: 20, Output: 120}, *rec.Price).Total(); rec.CostMicros != want {
		t.Errorf("charged %d, want %d: 120 output tokens at the output rate", rec.CostMicros, want)
	}
}

// TestRejectedPredictionTokensAreReserved: a predicted output's rejected tokens are billed
// beyond the request's output bound (OpenAI counts them in completion_tokens "for purposes of
// billing, output, and context window limits", and says nothing of max_completion_tokens
// bounding them), so the reservation holds the prediction's tokens as output beyond the bound,
// and the bill is not clamped to the bound. The answer reports 120 completion tokens, 100 of
// them rejected, for a request bounded at 20 with a prediction of 360 bytes (120 tokens at
// three bytes a token): billed whole, nothing waived, and the harness finds the reservation
// covered it (before, it reserved 20 output tokens, clamped the bill to them and waived the
// rest).
func TestRejectedPredictionTokensAreReserved(t *testing.T) {
	body := `{"id":"chatcmpl-p2","object":"chat.completion","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":120,"total_tokens":140,"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":100}}}`
	g, tenant := standInGatewayWith(t, "predicted", config.KindOpenAIChat, cannedUpstream(t, "application/json", body), apitest.Options{})
	code := strings.Repeat("x = 1\n", 60) // 360 bytes
	req := `{"model":"predicted-chat","max_tokens":20,"messages":[{"role":"user","content":"Rewrite the class."}],"prediction":{"type":"content","content":` + strconv.Quote(code) + `}}`
	if status, out := post(t, g, tenant.Key, "/v1/chat/completions", req); status != 200 {
		t.Fatalf("status %d: %s", status, out)
	}
	rec := latestUsage(t, g, tenant.Account, 1)
	checkReproducible(t, rec)
	want := price.Cost(price.Tokens{Uncached: 20, Output: 120}, *rec.Price).Total()
	if rec.OutputTokens != 120 || rec.CostMicros != want || rec.WaivedMicros != 0 {
		t.Fatalf("record: output %d, cost %d, waived %d; want 120 output tokens billed whole, %d, nothing waived", rec.OutputTokens, rec.CostMicros, rec.WaivedMicros, want)
	}
}
