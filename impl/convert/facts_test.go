package convert

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// answerFixtures are complete answers of each format: the providers' documented examples in
// testdata/responses and the usage benchmark's.
func answerFixtures(t testing.TB) map[string]struct {
	f    llm.Format
	body []byte
} {
	out := map[string]struct {
		f    llm.Format
		body []byte
	}{}
	files, err := filepath.Glob("testdata/responses/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no answer fixtures: %v", err)
	}
	for _, name := range files {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f := map[string]llm.Format{"chat": llm.FormatChat, "responses": llm.FormatResponses, "messages": llm.FormatMessages}[strings.SplitN(filepath.Base(name), "-", 2)[0]]
		out[filepath.Base(name)] = struct {
			f    llm.Format
			body []byte
		}{f, body}
	}
	for _, a := range usageBenchAnswers {
		out["bench-"+a.name] = struct {
			f    llm.Format
			body []byte
		}{a.f, []byte(a.body)}
	}
	return out
}

// TestResponseFactsAgreeWithTheDecoder checks the cheap reader against the full decoder on every
// fixture: the same id and model, and the finish reason the decoder's stop reason is written as
// in the answer's format.
func TestResponseFactsAgreeWithTheDecoder(t *testing.T) {
	for name, a := range answerFixtures(t) {
		t.Run(name, func(t *testing.T) {
			resp, err := DecodeResponse(a.f, a.body)
			if err != nil {
				t.Fatalf("%s does not decode as %s: %v", name, a.f, err)
			}
			got := ResponseFacts(a.f, a.body)
			want := AnswerFacts{ID: resp.ID, Model: resp.Model, FinishReason: StopReasonFor(a.f, resp.Stop)}
			if got != want {
				t.Errorf("ResponseFacts = %+v, the decoder's %+v", got, want)
			}
			if got.ID == "" || got.Model == "" || got.FinishReason == "" {
				t.Errorf("ResponseFacts = %+v: a fact is missing", got)
			}
			// The exchange reads a relayed answer once, into a view that the usage, these facts
			// and the model's rewrite share: each agrees with its reading of the bytes.
			var v jsonview.View
			if err := v.Parse(a.body); err != nil {
				t.Fatal(err)
			}
			if of := ResponseFactsOf(a.f, &v); of != got {
				t.Errorf("ResponseFactsOf = %+v, ResponseFacts %+v", of, got)
			}
			u, err := ResponseUsage(a.f, a.body)
			if err != nil {
				t.Fatal(err)
			}
			if uOf, err := ResponseUsageOf(a.f, &v); err != nil || !reflect.DeepEqual(uOf, u) {
				t.Errorf("ResponseUsageOf = %+v, %v; ResponseUsage %+v", uOf, err, u)
			}
			set, err := SetModel(nil, a.body, "service-flint")
			if err != nil {
				t.Fatal(err)
			}
			if setOf := SetModelOf(nil, &v, "service-flint"); string(setOf) != string(set) {
				t.Errorf("SetModelOf = %s, SetModel %s", setOf, set)
			}
		})
	}
}

// TestResponseFactsEdges covers what the fixtures do not: escapes, a finish reason the gateway
// does not map, members out of place, and bodies that are not answers.
func TestResponseFactsEdges(t *testing.T) {
	for _, c := range []struct {
		name string
		f    llm.Format
		body string
		want AnswerFacts
	}{
		{"escaped id and model", llm.FormatChat, `{"id":"chat\u0063mpl-1","model":"gpt\/4o","choices":[{"finish_reason":"stop"}]}`,
			AnswerFacts{"chatcmpl-1", "gpt/4o", "stop"}},
		{"the upstream's own word", llm.FormatChat, `{"id":"a","model":"m","choices":[{"index":0,"finish_reason":"eos"},{"finish_reason":"length"}]}`,
			AnswerFacts{"a", "m", "eos"}},
		{"choices before id, spaces", llm.FormatChat, ` { "choices" : [ { "finish_reason" : "length" } ] , "id" : "b" , "model" : "m" } `,
			AnswerFacts{"b", "m", "length"}},
		{"no choices", llm.FormatChat, `{"id":"c","model":"m","choices":[]}`, AnswerFacts{"c", "m", ""}},
		{"a choice that is not an object", llm.FormatChat, `{"id":"c","choices":["x"]}`, AnswerFacts{ID: "c"}},
		{"finish reason null", llm.FormatChat, `{"id":"c","choices":[{"finish_reason":null}]}`, AnswerFacts{ID: "c"}},
		{"a nested stop_reason is not the answer's", llm.FormatMessages, `{"id":"m1","model":"claude","content":[{"stop_reason":"x"}],"stop_reason":"tool_use"}`,
			AnswerFacts{"m1", "claude", "tool_use"}},
		{"Responses status", llm.FormatResponses, `{"id":"resp_1","model":"gpt-4o","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`,
			AnswerFacts{"resp_1", "gpt-4o", "incomplete"}},
		{"id of another type", llm.FormatMessages, `{"id":7,"model":null,"stop_reason":"end_turn"}`, AnswerFacts{FinishReason: "end_turn"}},
		{"not an object", llm.FormatChat, `["id"]`, AnswerFacts{}},
		{"cut off", llm.FormatChat, `{"id":"d","model":"m","choices":[{"finish_`, AnswerFacts{"d", "m", ""}},
		{"empty", llm.FormatMessages, ``, AnswerFacts{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ResponseFacts(c.f, []byte(c.body)); got != c.want {
				t.Errorf("ResponseFacts(%s) = %+v, want %+v", c.body, got, c.want)
			}
		})
	}
}

// BenchmarkResponseFacts measures the traced relay's reading of an answer's facts against the
// full decode it replaced.
func BenchmarkResponseFacts(b *testing.B) {
	for _, a := range usageBenchAnswers {
		body := []byte(a.body)
		b.Run(a.name+"/facts", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ResponseFacts(a.f, body).ID == "" {
					b.Fatal("no id")
				}
			}
		})
		b.Run(a.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeResponse(a.f, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestChatFinishReasons: every choice's finish_reason of a chat answer, in the order of its
// choices (one without a reason left out); none for an answer without choices or of another
// shape.
func TestChatFinishReasons(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string
	}{
		{`{"id":"c","choices":[{"index":0,"message":{"content":"a, b"},"finish_reason":"stop"},` +
			` {"index":1,"message":{"content":"[x]"},"finish_reason":"length"} ,{"index":2,"finish_reason":"tool_calls"}],"usage":{}}`,
			[]string{"stop", "length", "tool_calls"}},
		{`{"choices":[{"index":0,"finish_reason":"stop"},{"index":1,"finish_reason":null},{"index":2,"FINISH_REASON":"length"}]}`,
			[]string{"stop", "length"}},
		{`{"choices":[]}`, nil},
		{`{"choices":null}`, nil},
		{`{"id":"c"}`, nil},
	} {
		var v jsonview.View
		if err := v.Parse([]byte(c.body)); err != nil {
			t.Fatal(err)
		}
		if got := ChatFinishReasons(&v); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ChatFinishReasons(%s) = %q, want %q", c.body, got, c.want)
		}
	}
}
