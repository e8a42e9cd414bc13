package convert

import (
	"strconv"

	"github.com/tollgate/tollgate/impl/jsonview"
)

// minThinkingBudget is the smallest thinking budget the Messages API accepts.
const minThinkingBudget = 1024

// FitThinking fits a Messages request's extended thinking (its view v) to an output bound it
// was clamped to, adding its change to edits: the API requires thinking.budget_tokens to be
// below max_tokens, so a budget at or above bound is lowered to bound-1 (lowered says to what),
// or, when that is below the API's minimum of 1024, thinking is left out (dropped). A request
// without a budget is left as it is.
func FitThinking(v *jsonview.View, bound int, edits *jsonview.Edits) (lowered int, dropped bool, err error) {
	m, ok := v.Lookup("thinking")
	if !ok {
		return 0, false, nil
	}
	thinking := v.ValueOf(m)
	if firstByte(thinking) != '{' {
		return 0, false, nil
	}
	var inner jsonview.View
	if inner.Parse(thinking) != nil {
		return 0, false, typeError("thinking", "an object")
	}
	budget, ok := inner.Lookup("budget_tokens")
	if !ok || isNull(inner.ValueOf(budget)) {
		return 0, false, nil
	}
	n, err := parseInt(inner.ValueOf(budget), "thinking.budget_tokens")
	if err != nil || n < bound {
		return 0, false, err
	}
	if bound-1 < minThinkingBudget {
		edits.Remove(m)
		return 0, true, nil
	}
	var change jsonview.Edits
	change.Replace(budget, strconv.AppendInt(nil, int64(bound-1), 10))
	edits.Replace(m, change.AppendTo(nil, &inner))
	return bound - 1, false, nil
}
