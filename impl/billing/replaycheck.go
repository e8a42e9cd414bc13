package billing

import (
	"context"
	"errors"
	"math"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usagespill"
)

// spilledFault says why a usage record an earlier process left in the spill file is not one
// this meter would have written (usageRecord), "" when it is. The spill file's checksums find
// damage, not forgery (CRC-32C is not a MAC): a record with a negative count or amount, counts
// whose cost overflows, or a priced record whose cost is not what its own counts cost at its
// own price (a bill is reproducible from its usage row alone) is not applied. An unpriced
// record has no price to reproduce its cost from; it is held to the rest.
func spilledFault(r store.UsageRecord) string {
	if r.InputTokens < 0 || r.OutputTokens < 0 || r.CacheReadTokens < 0 || r.CacheWrite5mTokens < 0 ||
		r.CacheWrite1hTokens < 0 || r.ReasoningTokens < 0 {
		return "a negative token count"
	}
	if r.CostMicros < 0 || r.HostedMicros < 0 || r.WaivedMicros < 0 {
		return "a negative amount"
	}
	for _, n := range r.HostedCalls {
		if n < 0 {
			return "a negative hosted call count"
		}
	}
	if r.Price == nil {
		if r.HostedMicros > r.CostMicros {
			return "a hosted cost beyond the record's cost"
		}
		return ""
	}
	if r.CacheReadTokens+r.CacheWrite5mTokens+r.CacheWrite1hTokens > r.InputTokens {
		return "cache counts beyond the input count"
	}
	want := price.Cost(r.Tokens(), *r.Price)
	if want.Total() == math.MaxInt64 {
		return "token counts whose cost overflows"
	}
	if r.Costs != want {
		return "cost parts not what its counts cost at its price"
	}
	if price.SaturatingAdd(want.Total(), r.HostedMicros)-r.WaivedMicros != r.CostMicros {
		return "a cost not its parts and hosted cost less the waived amount"
	}
	return ""
}

// replayFault says why an inherited record read back from the spill file is not applied (""
// when it is applied): recordFault against the meter's store.
func (m *Meter) replayFault(ctx context.Context, r store.UsageRecord, known map[uuid.UUID]bool) (string, error) {
	return recordFault(ctx, m.st, r, known)
}

// recordFault says why a record read back from the spill file, or from a file it set aside, is
// not applied ("" when it is): spilledFault, or an account the database does not know. known
// caches the accounts looked up during one pass. An error is the database's: the pass is
// retried.
func recordFault(ctx context.Context, st *store.Store, r store.UsageRecord, known map[uuid.UUID]bool) (string, error) {
	if f := spilledFault(r); f != "" {
		return f, nil
	}
	ok, seen := known[r.AccountID]
	if !seen {
		_, err := st.GetAccount(ctx, r.AccountID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		ok = err == nil
		known[r.AccountID] = ok
	}
	if !ok {
		return "an unknown account", nil
	}
	return "", nil
}

// quarantine keeps aside an inherited record that is not applied (replayFault): in the spill
// file's quarantine file, counted with the records set aside, and logged once with its
// request id. A record the quarantine file holds already (an earlier process kept it aside
// and died before it emptied the spill) is neither counted nor logged as an error again.
func (m *Meter) quarantine(e usagespill.Entry, fault string) {
	saved, added, err := "", true, error(nil)
	if m.opts.Spill != nil {
		saved, added, err = m.opts.Spill.Quarantine(e, fault)
	}
	if err == nil && !added {
		m.opts.Logger.Info("billing: a usage record in the spill file was kept aside already by an earlier process; it is passed over",
			"fault", fault, "request_id", e.Record.RequestID, "account", e.Record.AccountID, "holder", e.Holder, "saved_to", saved)
		return
	}
	m.setAside.Add(1)
	m.opts.Logger.Error("billing: a usage record in the spill file is not one the meter writes; it is kept aside, not billed",
		"fault", fault, "request_id", e.Record.RequestID, "account", e.Record.AccountID, "holder", e.Holder,
		"saved_to", saved, "save_err", err)
}
