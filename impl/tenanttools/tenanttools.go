// Package tenanttools binds tollgate's services to the MCP tenant tool profile: it adapts the
// dataset service (impl/dataset) to the dataset tools of impl/mcp, translating results and
// errors (not-owned names to the exact refusal, caller mistakes to readable tool errors,
// anything else to an internal error the MCP layer logs). The dataset service names each
// dataset for the tools by its short name and its full name tenant/<account-id>/<name>
// (dataset.FullName), and takes either back. It adapts the agent service (impl/agent) to the
// agent tools the same way (AgentTools): a session or approval id of another account, or of
// none, answers the same not-owned refusal. It adapts the meter (impl/billing) to the credit
// tool (CreditTools), which answers what GET /v1/credits does (impl/credits).
package tenanttools

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/tool"
)

// Tools returns the tenant profile's tools over the dataset service.
func Tools(ds *dataset.Service) []tool.Tool {
	return mcp.DatasetTools(datasets{ds})
}

// datasets adapts *dataset.Service to mcp.DatasetService.
type datasets struct{ svc *dataset.Service }

var _ mcp.DatasetService = datasets{}

// mapError turns the dataset service's errors into what the MCP layer shows.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, dataset.ErrNotOwned) {
		return errors.Join(mcp.ErrNotOwned, err)
	}
	if msg, ok := dataset.CallerMessage(err); ok {
		return &tool.PublicError{Message: msg}
	}
	return err
}

func columns(cs []dataset.Column) []mcp.Column {
	out := make([]mcp.Column, len(cs))
	for i, c := range cs {
		out[i] = mcp.Column{Name: c.Name, Type: c.Type}
	}
	return out
}

// ListStorage implements mcp.DatasetService.
func (d datasets) ListStorage(ctx context.Context, account uuid.UUID) ([]mcp.StoredDataset, error) {
	list, err := d.svc.ListStorage(ctx, account)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]mcp.StoredDataset, len(list))
	for i, s := range list {
		out[i] = mcp.StoredDataset{Name: s.Name, FullName: dataset.FullName(account, s.Name), Format: string(s.Format),
			Size: s.SizeBytes, Updated: s.Updated}
	}
	return out, nil
}

// Load implements mcp.DatasetService.
func (d datasets) Load(ctx context.Context, account uuid.UUID, req mcp.LoadRequest) (mcp.LoadedDataset, error) {
	opts := dataset.LoadOptions{Columns: req.Columns, Limit: int(req.Limit), Filter: req.Filter}
	res, err := d.svc.Load(ctx, account, req.Name, opts)
	if err != nil {
		return mcp.LoadedDataset{}, mapError(err)
	}
	return mcp.LoadedDataset{Name: res.Dataset, FullName: dataset.FullName(account, res.Dataset), Rows: res.Rows, Columns: columns(res.Columns),
		Limit: req.Limit, Filter: req.Filter, LoadedAt: res.LoadedAt}, nil
}

// Loaded implements mcp.DatasetService.
func (d datasets) Loaded(ctx context.Context, account uuid.UUID) ([]mcp.LoadedDataset, error) {
	list, err := d.svc.Loaded(ctx, account)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]mcp.LoadedDataset, len(list))
	for i, l := range list {
		out[i] = mcp.LoadedDataset{Name: l.Name, FullName: dataset.FullName(account, l.Name), Rows: l.Rows, Columns: columns(l.Columns),
			Limit: int64(l.Options.Limit), Filter: l.Options.Filter, LoadedAt: l.LoadedAt}
	}
	return out, nil
}

// Schema implements mcp.DatasetService.
func (d datasets) Schema(ctx context.Context, account uuid.UUID, name string) ([]mcp.Column, error) {
	cs, err := d.svc.Schema(ctx, account, name)
	if err != nil {
		return nil, mapError(err)
	}
	return columns(cs), nil
}

// Query implements mcp.DatasetService.
func (d datasets) Query(ctx context.Context, account uuid.UUID, name, sql string) (mcp.QueryResult, error) {
	res, err := d.svc.Query(ctx, account, name, sql)
	if err != nil {
		return mcp.QueryResult{}, mapError(err)
	}
	return mcp.QueryResult{Columns: columns(res.Columns), Text: res.Text}, nil
}
