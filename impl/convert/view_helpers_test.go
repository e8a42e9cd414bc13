package convert

import (
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// The tests hand bytes to the functions that read a request's view, as the validator would
// have read it (ReadRequest here).

func peek(f llm.Format, body []byte) (Peek, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return Peek{}, err
	}
	return PeekRequest(f, v)
}

func forUpstream(dst, body []byte, model string, ed UpstreamEdits) ([]byte, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return nil, err
	}
	var edits jsonview.Edits
	return ForUpstream(dst, v, model, ed, &edits)
}

// planHostedTools returns the plan and the body with its edits made.
func planHostedTools(f llm.Format, body []byte, policy HostedPolicy) (HostedPlan, []byte, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return HostedPlan{}, nil, err
	}
	var edits jsonview.Edits
	plan, err := PlanHostedTools(f, v, policy, &edits)
	return plan, edits.AppendTo(nil, v), err
}

func fitThinking(body []byte, bound int) ([]byte, int, bool, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return nil, 0, false, err
	}
	var edits jsonview.Edits
	lowered, dropped, err := FitThinking(v, bound, &edits)
	return edits.AppendTo(nil, v), lowered, dropped, err
}

func sharedState(f llm.Format, body []byte) ([]string, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return nil, err
	}
	return SharedStateFields(f, v)
}

func includeUsage(body []byte) bool {
	v, err := ReadRequest(body)
	return err == nil && IncludeUsage(v)
}

func decodeCountTokens(body []byte) (*llm.Request, error) {
	v, err := ReadRequest(body)
	if err != nil {
		return nil, err
	}
	return DecodeCountTokensRequest(v)
}
