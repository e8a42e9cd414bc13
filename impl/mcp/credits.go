package mcp

import (
	"context"
	"encoding/json"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// CreditService is what get_credits needs: what GET /v1/credits answers the verified caller p,
// its account's balance and, for a key with limits, that key's own allowance (never another
// key's). An expected failure the caller should read (a capped key's budget that cannot be
// read during a database outage) is a [*tool.PublicError]; any other error is logged and
// reported as internal.
type CreditService interface {
	Credits(ctx context.Context, p auth.Principal) (api.CreditBalance, error)
}

// ToolGetCredits is the credit tool's name.
const ToolGetCredits = "get_credits"

// CreditTools returns the read-only tool get_credits over svc, whose input schema is the
// OpenAPI component GetCreditsInput. Its answer is the JSON of GET /v1/credits, one line.
//
// CreditTools panics if the embedded OpenAPI document lacks the schema, which this package's
// tests rule out.
func CreditTools(svc CreditService) []tool.Tool {
	return []tool.Tool{{
		Name:  ToolGetCredits,
		Title: "Get credits",
		Description: "What the caller may still spend, as GET /v1/credits answers it, as JSON (amounts in micro-dollars: 1 USD = 1000000): " +
			"balance_micros and balance_usd, the account's prepaid balance (with stale and as_of when the gateway could only give the last one it read); " +
			"and, for an API key with limits, key: its expires_at, its models and, for a credit cap, credit_cap with cap_micros, period (none, daily or monthly, UTC), " +
			"period_start and period_end, spent_micros (settled this period), reserved_micros (requests in flight), remaining_micros (what the cap leaves: " +
			"a request whose worst case is more is refused with a 402) and spendable_micros (the lesser of that and the balance). " +
			"A key without limits, or a client signed in with OAuth, gets the balance alone.",
		InputSchema: mustComponentSchema("GetCreditsInput"),
		Annotations: tool.ReadOnlyAnnotations("Get credits"),
		Handler: func(ctx context.Context, p auth.Principal, _ json.RawMessage) (tool.Result, error) {
			b, err := svc.Credits(ctx, p)
			if err != nil {
				return tool.Result{}, err
			}
			out, err := marshalNoEscape(b)
			if err != nil {
				return tool.Result{}, err
			}
			return tool.TextResult(string(out)), nil
		},
	}}
}
