package tenanttools

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/credits"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/tool"
)

// CreditTools returns the tenant profile's credit tool, get_credits, over the meter: what GET
// /v1/credits answers the caller (credits.Read).
func CreditTools(m *billing.Meter) []tool.Tool {
	return mcp.CreditTools(meterCredits{m})
}

// meterCredits adapts *billing.Meter to mcp.CreditService.
type meterCredits struct{ m *billing.Meter }

var _ mcp.CreditService = meterCredits{}

// Credits implements mcp.CreditService. A capped key's budget that cannot be read while the
// database is away (GET /v1/credits' 503) is said to the caller.
func (c meterCredits) Credits(ctx context.Context, p auth.Principal) (api.CreditBalance, error) {
	b, err := credits.Read(ctx, c.m, p)
	if errors.Is(err, billing.ErrKeyCapUnavailable) {
		return b, tool.Errorf("the key's credit cap is kept in the database, which cannot be reached now; try again shortly")
	}
	return b, err
}
