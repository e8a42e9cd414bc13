package sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// TestPrefillTrailingWhitespaceRefused: a Messages request that ends with an assistant turn
// whose final text ends in whitespace is refused as the API refuses it; one without, or whose
// assistant turn is not the last, is served.
func TestPrefillTrailingWhitespaceRefused(t *testing.T) {
	_, ac := anthropicClient(t, 0)
	ctx := context.Background()
	ask := func(last ...anthropic.MessageParam) error {
		_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 20,
			Messages: append([]anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Name a colour."))}, last...)})
		return err
	}
	for _, text := range []string{"The colour is ", "The colour is\n", "Red.\t"} {
		err := ask(anthropic.NewAssistantMessage(anthropic.NewTextBlock(text)))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), "final assistant content cannot end with trailing whitespace") {
			t.Errorf("prefill %q: %v", text, err)
		}
	}
	if err := ask(anthropic.NewAssistantMessage(anthropic.NewTextBlock("The colour is"))); err != nil {
		t.Errorf("prefill without trailing whitespace: %v", err)
	}
	if err := ask(anthropic.NewAssistantMessage(anthropic.NewTextBlock("Red. ")), anthropic.NewUserMessage(anthropic.NewTextBlock("Another?"))); err != nil {
		t.Errorf("an earlier assistant turn ending in whitespace: %v", err)
	}
}
