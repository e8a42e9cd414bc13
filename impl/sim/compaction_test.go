package sim

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestResponsesCompactionTrigger: a Responses request whose input ends with a
// compaction_trigger item (Codex's remote compaction, sent to OpenAI's Responses API by its
// built-in provider) is answered with exactly one output item, of type compaction, whose
// encrypted_content holds the summary; its usage counts the summary's tokens as output,
// streamed (the item added and done, no deltas) and not. The tools the conversation offers are
// not called. A compaction item sent back as input counts as the summary's text.
func TestResponsesCompactionTrigger(t *testing.T) {
	_, srv := newServer(t, Options{})
	input := []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "call get_weather"}}},
		map[string]any{"type": "compaction_trigger"},
	}
	extra := map[string]any{"tools": []any{responsesWeatherTool}}
	m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(input, extra))))
	output := path(t, m, "output").([]any)
	if len(output) != 1 || path(t, output[0], "type") != "compaction" || !strings.HasPrefix(path(t, output[0], "id").(string), "cmp_") {
		t.Fatalf("output %v, want one compaction item", output)
	}
	keys(t, "compaction item", output[0], "id", "type", "encrypted_content")
	summary, err := base64.StdEncoding.DecodeString(path(t, output[0], "encrypted_content").(string))
	if err != nil || words(string(summary)) != DefaultWords {
		t.Errorf("encrypted_content holds %q (%v), want a summary of %d words", summary, err, DefaultWords)
	}
	plainInput := num(t, path(t, m, "usage.input_tokens"))
	checkResponsesUsage(t, m["usage"], plainInput, DefaultWords)

	extra["stream"] = true
	_, evs := stream(t, srv, responsesPath, responsesBody(input, extra))
	types, final := checkResponsesStream(t, evs)
	want := "response.created,response.in_progress,response.output_item.added,response.output_item.done,response.completed"
	if strings.Join(types, ",") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	if path(t, evs[3].JSON(t), "item.type") != "compaction" || len(path(t, final, "output").([]any)) != 1 || path(t, final, "output.0.type") != "compaction" {
		t.Errorf("output_item.done %s; response.completed %s", evs[3].Data, evs[len(evs)-1].Data)
	}
	checkResponsesUsage(t, final["usage"], plainInput, DefaultWords)

	next := []any{map[string]any{"type": "compaction", "encrypted_content": path(t, output[0], "encrypted_content")}, input[0]}
	without := num(t, path(t, decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(input[:1], nil)))), "usage.input_tokens"))
	with := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody(next, nil))))
	if got := num(t, path(t, with, "usage.input_tokens")); got < without+DefaultWords {
		t.Errorf("%d input tokens with the compaction item, %d without: want its %d summary words counted", got, without, DefaultWords)
	}
	if path(t, with, "output.0.type") != "message" {
		t.Errorf("the turn after the compaction answered %v", path(t, with, "output"))
	}
}
