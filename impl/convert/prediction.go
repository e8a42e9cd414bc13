package convert

import (
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// PredictionTokens is the most output tokens a chat request's predicted output (its
// `prediction` member, OpenAI's Predicted Outputs) may add to the answer's bill: 0 for any other
// format or a request without one. OpenAI bills the prediction's tokens that do not appear in
// the answer as output (its API reference, usage.completion_tokens_details.
// rejected_prediction_tokens: "these tokens are still counted in the total completion tokens
// for purposes of billing, output, and context window limits"), and says nothing of
// max_completion_tokens bounding them; they are at most the prediction's own tokens, counted
// here as the input estimate counts bytes (BytesPerToken bytes a token, the member's JSON
// whole). A request without the member pays a look-up.
func PredictionTokens(f llm.Format, v *jsonview.View) int64 {
	if f != llm.FormatChat || v == nil {
		return 0
	}
	p, ok := v.Value("prediction")
	if !ok || len(p) == 0 || string(p) == "null" {
		return 0
	}
	return int64((len(p) + BytesPerToken - 1) / BytesPerToken)
}
