package convert

import (
	"bytes"
	"strconv"
)

// minThinkingBudget is the smallest thinking budget the Messages API accepts.
const minThinkingBudget = 1024

// FitThinking fits a Messages request's extended thinking to an output bound it was clamped
// to: the API requires thinking.budget_tokens to be below max_tokens, so a budget at or above
// bound is lowered to bound-1 (lowered says to what), or, when that is below the API's minimum
// of 1024, thinking is left out (dropped). A body without a budget is returned as it is.
func FitThinking(body []byte, bound int) (out []byte, lowered int, dropped bool, err error) {
	if !bytes.Contains(body, []byte(`"budget_tokens"`)) {
		return body, 0, false, nil
	}
	var edits memberEdits
	err = scanTopSpans(body, func(key []byte, start, end int) error {
		if string(key) != "thinking" || firstByte(body[start:end]) != '{' {
			return nil
		}
		obj, err := parseObject(body[start:end], "thinking")
		if err != nil {
			return err
		}
		raw := obj.get("budget_tokens")
		if isNull(raw) {
			return nil
		}
		budget, err := parseInt(raw, "thinking.budget_tokens")
		if err != nil || budget < bound {
			return err
		}
		if bound-1 < minThinkingBudget {
			edits.remove(start, end)
			dropped = true
			return nil
		}
		lowered = bound - 1
		var inner memberEdits
		_ = scanTopSpans(body[start:end], func(k []byte, s, e int) error {
			if string(k) == "budget_tokens" {
				inner.replace(s, e, strconv.AppendInt(nil, int64(bound-1), 10))
			}
			return nil
		})
		edits.replace(start, end, inner.apply(body[start:end]))
		return nil
	})
	if err != nil || len(edits.spans) == 0 {
		return body, 0, false, err
	}
	return edits.apply(body), lowered, dropped, nil
}
