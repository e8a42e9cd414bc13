// Package credits reads what a verified caller may spend, in the contract's shape
// (api.CreditBalance): its account's balance and, for a key with limits, the key's own
// (api.KeyAllowance), a credit cap's figures read from the key's budget as its requests'
// reservations read it (billing.Meter.KeyBudget), so that they agree with the 402. GET
// /v1/credits (impl/httpapi) answers it, and the MCP tool get_credits (impl/tenanttools) gives
// the same text; neither has a formula of its own.
package credits

import (
	"context"
	"maps"
	"slices"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
)

// Read returns p's account balance and, for a key with limits, the key's own (Allowance).
// During a database outage the balance is the last one this process read for the account,
// marked stale with the time it was read; a capped key then gets a 503 (apierror.Unavailable
// wrapping billing.ErrKeyCapUnavailable), its budget being kept only in the database, as its
// inference requests do.
func Read(ctx context.Context, m *billing.Meter, p auth.Principal) (api.CreditBalance, error) {
	b, err := m.BalanceOrLastKnown(ctx, p.AccountID)
	if err != nil {
		return api.CreditBalance{}, err
	}
	body := api.CreditBalance{BalanceMicros: b.Micros, BalanceUsd: float64(b.Micros) / 1e6}
	if b.Stale {
		stale, asOf := true, b.AsOf.UTC()
		body.Stale, body.AsOf = &stale, &asOf
	}
	if body.Key, err = Allowance(ctx, m, p, b); err != nil {
		return api.CreditBalance{}, err
	}
	return body, nil
}

// Allowance is the calling key's own limits, or nil for a key without any (and an OAuth
// client): its expiry, its models and, for a credit cap, where the key stands in the cap period
// that holds now and what it can actually spend (the lesser of what the cap leaves and the
// account's balance).
func Allowance(ctx context.Context, m *billing.Meter, p auth.Principal, balance billing.BalanceReading) (*api.KeyAllowance, error) {
	l := p.Limits
	if l == nil || (!l.HasCap && l.ExpiresAt.IsZero() && l.Models == nil) {
		return nil, nil
	}
	a := &api.KeyAllowance{}
	if !l.ExpiresAt.IsZero() {
		at := l.ExpiresAt.UTC()
		a.ExpiresAt = &at
	}
	if l.Models != nil {
		models := slices.Sorted(maps.Keys(l.Models))
		a.Models = &models
	}
	if !l.HasCap {
		return a, nil
	}
	if balance.Stale {
		return nil, apierror.Unavailable("the database", billing.ErrKeyCapUnavailable)
	}
	kb, err := m.KeyBudget(ctx, billing.KeyCap{KeyID: p.KeyID, CapMicros: l.CapMicros, Period: l.CapPeriod})
	if err != nil {
		return nil, err
	}
	spendable := max(min(kb.RemainingMicros, balance.Micros), 0)
	a.CreditCap = &api.KeyCreditCap{
		CapMicros: l.CapMicros, Period: api.KeyCreditCapPeriod(l.CapPeriod), PeriodStart: kb.PeriodStart,
		SpentMicros: kb.SpentMicros, ReservedMicros: kb.ReservedMicros,
		RemainingMicros: kb.RemainingMicros, RemainingUsd: float64(kb.RemainingMicros) / 1e6,
		SpendableMicros: spendable, SpendableUsd: float64(spendable) / 1e6,
	}
	if !kb.PeriodEnd.IsZero() {
		a.CreditCap.PeriodEnd = &kb.PeriodEnd
	}
	return a, nil
}
