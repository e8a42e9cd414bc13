package httpapi

import (
	"context"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/convert"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// CountMessageTokens serves POST /v1/messages/count_tokens: the gateway's estimate of a
// Messages request's input tokens, the one that bounds its reservation (convert.
// EstimateInputTokens), for clients that account for their context before sending (Claude
// Code's /context). It calls no upstream and costs nothing; the model must be one of the
// account's Messages models, as for POST /v1/messages.
func (s *Server) CountMessageTokens(ctx context.Context, req api.CountMessageTokensRequestObject) (api.CountMessageTokensResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	body := []byte(*req.Body)
	view, err := convert.ReadRequest(body)
	if err != nil {
		return nil, err
	}
	peek, err := convert.PeekRequest(llm.FormatMessages, view)
	if err != nil {
		return nil, err
	}
	m, err := s.exchange.ResolveModel(ctx, p, peek.Model, llm.FormatMessages)
	if err != nil {
		return nil, err
	}
	return api.CountMessageTokens200JSONResponse{InputTokens: int64(estimateMessagesInput(view, m.ImageTokens))}, nil
}

// estimateMessagesInput estimates the input tokens of a count_tokens body, each image at
// imageTokens (the model's bound). A body the converter cannot put in the neutral form is
// estimated from its size and its image markers, as the exchange does.
func estimateMessagesInput(view *jsonview.View, imageTokens int) int {
	body := view.Body()
	if ir, err := convert.DecodeCountTokensRequest(view); err == nil {
		return convert.EstimateInputTokens(ir, imageTokens)
	}
	return exchange.EstimateBySize(body) + convert.ImageMarkers(llm.FormatMessages, body)*imageTokens
}
