package httpapi

import (
	"context"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/credits"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/store"
)

// apiModel is the wire form of a configured model granted to an account, with its limits and
// price as the engine holds them today (rm; nil leaves them out).
func apiModel(m config.Model, rm *routing.Model, g store.ModelGrant) api.Model {
	family := m.Family
	display := m.DisplayName
	if display == "" {
		display = m.ID
	}
	createdAt := g.GrantedAt.UTC()
	typ := api.ModelTypeModel
	out := api.Model{
		Id: m.ID, Object: api.ModelObjectModel, Created: createdAt.Unix(), OwnedBy: m.OwnedBy,
		Type: &typ, DisplayName: &display, CreatedAt: &createdAt, Family: &family,
	}
	if rm != nil {
		modelLimits(&out, rm)
		pricing := modelPricing(rm)
		out.Pricing = &pricing
	}
	return out
}

// listedModel is the wire form of the configured model granted to the caller's account by g,
// with grants, the account's grants; false when the account may not be sent to any of its
// experts (exchange.Engine.Reachable: each on a provider that takes only accounts with an
// upstream key of their own, and the account has none there), which is then not listed.
func (s *Server) listedModel(m config.Model, grants *exchange.Grants, g store.ModelGrant) (api.Model, bool) {
	rm, _ := s.exchange.Model(m.ID)
	if rm != nil && !s.exchange.Reachable(grants, rm) {
		return api.Model{}, false
	}
	return apiModel(m, rm, g), true
}

// ListModels lists the configured models granted to the caller's account that it can be sent
// to (listedModel), read through the same cache of grants (and of the account's upstream keys)
// as inference uses, kept current by the change feed, so that during a database outage a key
// in use lists what it may call, within the feed's staleness bound.
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
			if out, ok := s.listedModel(m, grants, g); ok {
				list.Data = append(list.Data, out)
			}
		}
	}
	hasMore := false
	list.HasMore = &hasMore
	if n := len(list.Data); n > 0 {
		list.FirstId, list.LastId = &list.Data[0].Id, &list.Data[n-1].Id
	}
	return api.ListModels200JSONResponse{Body: list}, nil
}

// RetrieveModel returns one model granted to the caller's account, or 404, also for a model
// that ListModels leaves out; read as ListModels.
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
	out, ok := s.listedModel(m, grants, g)
	if !ok {
		return nil, apierror.ModelNotFound(req.Model)
	}
	return api.RetrieveModel200JSONResponse{Body: out}, nil
}

// GetCredits returns the caller's account balance and, for a key with limits, the key's own,
// as credits.Read reads them (the MCP tool get_credits gives the same).
func (s *Server) GetCredits(ctx context.Context, _ api.GetCreditsRequestObject) (api.GetCreditsResponseObject, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	body, err := credits.Read(ctx, s.meter, p)
	if err != nil {
		return nil, err
	}
	return api.GetCredits200JSONResponse{Body: body}, nil
}
