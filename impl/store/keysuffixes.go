package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// The web console's Keys page shows each key it created by its last four characters, kept
// when the key is made (api_keys.display_suffix); the key's secret itself is never kept.

// SetAPIKeySuffix keeps suffix, the last characters of the account's new key keyID, for the
// Keys page.
func (s *Store) SetAPIKeySuffix(ctx context.Context, accountID, keyID uuid.UUID, suffix string) error {
	return s.q.SetAPIKeySuffix(ctx, db.SetAPIKeySuffixParams{ID: keyID, AccountID: accountID, DisplaySuffix: suffix})
}

// APIKeySuffixes returns the kept last characters of the account's keys, by key id (keys
// without any are absent).
func (s *Store) APIKeySuffixes(ctx context.Context, accountID uuid.UUID) (map[uuid.UUID]string, error) {
	rows, err := s.q.ListAPIKeySuffixes(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.DisplaySuffix
	}
	return out, nil
}
