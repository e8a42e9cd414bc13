package convert

import (
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// AnswerFacts are what a trace reports of a complete upstream answer beside its usage: the
// upstream's id and model, and its finish reason as the upstream wrote it (chat's
// choices[0].finish_reason, Messages' stop_reason, a Responses status).
type AnswerFacts struct {
	ID, Model, FinishReason string
}

// ResponseFacts reads the facts of body, a complete answer in format f, from its top-level
// members (and chat's first choice) without decoding the rest: what a relayed answer's trace
// needs, at a small part of DecodeResponse's cost. What is missing or not a string stays "".
func ResponseFacts(f llm.Format, body []byte) AnswerFacts {
	// A cut-off answer keeps what its members before the cut said.
	return factsOf(f, func(fn func(key, value []byte) error) { _ = scanTop(body, fn) })
}

// ResponseFactsOf is ResponseFacts of an answer already read into v.
func ResponseFactsOf(f llm.Format, v *jsonview.View) AnswerFacts {
	return factsOf(f, func(fn func(key, value []byte) error) { _ = eachTop(v, fn) })
}

// factsOf reads the facts from the top-level members each calls its argument with.
func factsOf(f llm.Format, each func(fn func(key, value []byte) error)) AnswerFacts {
	var a AnswerFacts
	var choices []byte
	each(func(key, value []byte) error {
		switch {
		case fold(key, "id"):
			a.ID, _ = stringValue(value)
		case fold(key, "model"):
			a.Model, _ = stringValue(value)
		case f == llm.FormatChat && fold(key, "choices"):
			choices = value
		case f == llm.FormatMessages && fold(key, "stop_reason"):
			a.FinishReason, _ = stringValue(value)
		case f == llm.FormatResponses && fold(key, "status"):
			a.FinishReason, _ = stringValue(value)
		}
		return nil
	})
	if f == llm.FormatChat {
		a.FinishReason = firstFinishReason(choices)
	}
	return a
}

// firstFinishReason is the finish_reason of the first choice in a chat answer's choices array
// ("" when there is none).
func firstFinishReason(choices []byte) string {
	if len(choices) < 2 || choices[0] != '[' {
		return ""
	}
	i := jsonview.SkipSpace(choices, 1)
	end, ok := jsonview.SkipValue(choices, i)
	if !ok {
		return ""
	}
	var reason string
	_ = eachMember(choices[i:end], func(key, value []byte) error {
		if fold(key, "finish_reason") {
			reason, _ = stringValue(value)
		}
		return nil
	})
	return reason
}

// ChatFinishReasons is the finish_reason of every choice of a chat answer read into v, in the
// order of its choices array (a choice without one is left out): gen_ai.response.finish_reasons
// of an answer of several choices (a request's n), one reason for each generation, as the GenAI
// conventions ask. ResponseFactsOf reads the first choice's alone, which is all one choice
// needs; this one allocates the slice, so it is for answers of more than one choice.
func ChatFinishReasons(v *jsonview.View) []string {
	var reasons []string
	_ = eachTop(v, func(key, value []byte) error {
		if !fold(key, "choices") || len(value) < 2 || value[0] != '[' {
			return nil
		}
		for i := jsonview.SkipSpace(value, 1); i < len(value) && value[i] != ']'; {
			end, ok := jsonview.SkipValue(value, i)
			if !ok {
				return nil
			}
			_ = eachMember(value[i:end], func(key, value []byte) error {
				if fold(key, "finish_reason") {
					if r, _ := stringValue(value); r != "" {
						reasons = append(reasons, r)
					}
				}
				return nil
			})
			i = jsonview.SkipSpace(value, end)
			if i < len(value) && value[i] == ',' {
				i = jsonview.SkipSpace(value, i+1)
			}
		}
		return nil
	})
	return reasons
}
