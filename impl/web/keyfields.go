package web

import (
	"time"

	"github.com/tollgate/tollgate/impl/store"
)

// keyRow is one key as the Keys page shows it. The per-key limits (expiry, disabled, credit
// cap, model subset, creator) are filled from the key once impl/store has them (migration
// 0007); until then they show as not set.
type keyRow struct {
	store.APIKey
	Status    string
	Expires   *time.Time
	CreatedBy string
	CreditCap *int64
	CapPeriod string
}

func newKeyRow(k store.APIKey, at time.Time) keyRow {
	return keyRow{APIKey: k, Status: keyStatus(k, at)}
}

func keyStatus(k store.APIKey, _ time.Time) string {
	if k.RevokedAt != nil {
		return "revoked"
	}
	return "active"
}

// keyState is what the audit log keeps of a key before and after a change.
func keyState(k store.APIKey) map[string]any {
	return map[string]any{"name": k.Name, "prefix": k.DisplayPrefix, "rpm_limit": k.RPMLimit, "status": keyStatus(k, now())}
}
