package httpapi

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/routing"
)

// TestPublicRefusal: an upstream's refusal names the client's model, not the hidden upstream
// one, and keeps its param only when the formats match; other errors pass as they are.
func TestPublicRefusal(t *testing.T) {
	refusal := &apierror.Error{Kind: apierror.KindInvalidRequest, Param: "max_output_tokens", Code: "integer_below_min_value",
		Message: "the upstream refused the request: gpt-4.1-mini-2025-04-14 does not support this"}
	same := routing.Expert{Model: "gpt-4.1-mini-2025-04-14", Kind: llm.FormatResponses}
	got := apierror.As(publicRefusal(refusal, same, "service-flint", llm.FormatResponses))
	if got.Message != "the upstream refused the request: service-flint does not support this" || got.Param != "max_output_tokens" || got.Code != "integer_below_min_value" {
		t.Errorf("same format: %+v", got)
	}
	got = apierror.As(publicRefusal(refusal, same, "service-flint", llm.FormatChat))
	if got.Param != "" {
		t.Errorf("translated: param %q kept", got.Param)
	}
	if refusal.Param != "max_output_tokens" {
		t.Error("the upstream's error was changed in place")
	}
	other := &apierror.Error{Kind: apierror.KindRateLimited, Message: "the upstream is rate limited"}
	if err := publicRefusal(other, same, "service-flint", llm.FormatChat); !errors.Is(err, other) {
		t.Errorf("a rate limit became %v", err)
	}
	if err := publicRefusal(refusal, routing.Expert{Kind: llm.FormatChat}, "m", llm.FormatChat); apierror.As(err).Message != refusal.Message {
		t.Errorf("an expert without a model id: %v", err)
	}
}
