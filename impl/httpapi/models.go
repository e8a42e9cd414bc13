package httpapi

import (
	"context"
	"errors"

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

// ListModels lists the configured models granted to the caller's account.
func (s *Server) ListModels(ctx context.Context, _ api.ListModelsRequestObject) (api.ListModelsResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	grants, err := s.store.AccountModels(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	list := api.ModelList{Object: api.List, Data: make([]api.Model, 0, len(grants))}
	for _, g := range grants {
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

// RetrieveModel returns one model granted to the caller's account, or 404.
func (s *Server) RetrieveModel(ctx context.Context, req api.RetrieveModelRequestObject) (api.RetrieveModelResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	m, ok := s.config.Model(req.Model)
	if !ok || !p.AllowsModel(req.Model) {
		return nil, apierror.ModelNotFound(req.Model)
	}
	g, err := s.store.AccountModel(ctx, p.AccountID, req.Model)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierror.ModelNotFound(req.Model)
	}
	if err != nil {
		return nil, err
	}
	return api.RetrieveModel200JSONResponse{Body: apiModel(m, g)}, nil
}

// GetCredits returns the caller's account balance.
func (s *Server) GetCredits(ctx context.Context, _ api.GetCreditsRequestObject) (api.GetCreditsResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	micros, err := s.store.Balance(ctx, p.AccountID)
	if err != nil {
		return nil, err
	}
	return api.GetCredits200JSONResponse{Body: api.CreditBalance{BalanceMicros: micros, BalanceUsd: float64(micros) / 1e6}}, nil
}
