package exchange

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

// TestInPublicWordsReplacesWholeTokens: the upstream's model id is replaced only where it
// stands as a whole token (issue 23, item 6): a one-letter id "h" leaves "the" alone, and an
// id with dots is found at the end of a sentence but not inside a longer version.
func TestInPublicWordsReplacesWholeTokens(t *testing.T) {
	for _, c := range []struct{ said, upstream, want string }{
		{"the model h is overloaded", "h", "the model hostile-413e is overloaded"},
		{"h: the request has the wrong shape", "h", "hostile-413e: the request has the wrong shape"},
		{"'h' refused; see h.", "h", "'hostile-413e' refused; see hostile-413e."},
		{"hhh h-2 h_x ah h", "h", "hhh h-2 h_x ah hostile-413e"},
		{"gpt-4.1 does not support this; gpt-4.1.", "gpt-4.1", "hostile-413e does not support this; hostile-413e."},
		{"gpt-4.1-mini and gpt-4.1.5 are not gpt-4.1", "gpt-4.1", "gpt-4.1-mini and gpt-4.1.5 are not hostile-413e"},
		{"models/gpt-4.1 (gpt-4.1)", "gpt-4.1", "models/gpt-4.1 (hostile-413e)"},
		{"héh h", "h", "héh hostile-413e"},
		{"nothing here", "h", "nothing here"},
	} {
		if got := inPublicWords(c.said, c.upstream, "hostile-413e"); got != c.want {
			t.Errorf("inPublicWords(%q, %q) = %q, want %q", c.said, c.upstream, got, c.want)
		}
	}
}
