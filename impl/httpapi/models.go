package httpapi

import (
	"context"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// apiModel is the wire form of a configured model granted to an account.
func apiModel(m config.Model, g store.ModelGrant) api.Model {
	family := m.Family
	display := m.DisplayName
	if display == "" {
		display = m.ID
	}
	createdAt := g.GrantedAt.UTC()
	typ := api.ModelTypeModel
	return api.Model{
		Id: m.ID, Object: api.ModelObjectModel, Created: createdAt.Unix(), OwnedBy: m.OwnedBy,
		Type: &typ, DisplayName: &display, CreatedAt: &createdAt, Family: &family,
	}
}

// ListModels lists the configured models granted to the caller's account, read through the
// same cache of grants as inference uses (kept current by the change feed), so that during a
// database outage a key in use lists what it may call, within the feed's staleness bound.
func (s *Server) ListModels(ctx context.Context, _ api.ListModelsRequestObject) (api.ListModelsResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	grants, err := s.exchange.Grants(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	list := api.ModelList{Object: api.List, Data: make([]api.Model, 0, len(grants.List()))}
	for _, g := range grants.List() {
		if !p.AllowsModel(g.ModelID) {
			continue
		}
		if m, ok := s.config.Model(g.ModelID); ok {
			list.Data = append(list.Data, apiModel(m, g))
		}
	}
	hasMore := false
	list.HasMore = &hasMore
	if n := len(list.Data); n > 0 {
		list.FirstId, list.LastId = &list.Data[0].Id, &list.Data[n-1].Id
	}
	return api.ListModels200JSONResponse{Body: list}, nil
}

// RetrieveModel returns one model granted to the caller's account, or 404; read as ListModels.
func (s *Server) RetrieveModel(ctx context.Context, req api.RetrieveModelRequestObject) (api.RetrieveModelResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, ok := s.config.Model(req.Model)
	if !ok || !p.AllowsModel(req.Model) {
		return nil, apierror.ModelNotFound(req.Model)
	}
	grants, err := s.exchange.Grants(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	g, ok := grants.Grant(req.Model)
	if !ok {
		return nil, apierror.ModelNotFound(req.Model)
	}
	return api.RetrieveModel200JSONResponse{Body: apiModel(m, g)}, nil
}

// GetCredits returns the caller's account balance. During a database outage it is the last
// balance this process read for the account, marked stale with the time it was read (the
// key's own check during the outage is the auth cache's, as for inference).
func (s *Server) GetCredits(ctx context.Context, _ api.GetCreditsRequestObject) (api.GetCreditsResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	b, err := s.meter.BalanceOrLastKnown(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	body := api.CreditBalance{BalanceMicros: b.Micros, BalanceUsd: float64(b.Micros) / 1e6}
	if b.Stale {
		stale, asOf := true, b.AsOf.UTC()
		body.Stale, body.AsOf = &stale, &asOf
	}
	return api.GetCredits200JSONResponse{Body: body}, nil
}
