package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// APIKey is the stored record of an API key: never the key itself, only its hash.
type APIKey struct {
	ID            uuid.UUID
	AccountID     uuid.UUID
	Name          string
	Hash          []byte
	DisplayPrefix string
	// DisplaySuffix is the key's last four characters (empty for keys made before they were
	// kept): lists show a key as DisplayPrefix…DisplaySuffix.
	DisplaySuffix string
	// RPMLimit is the key's requests-per-minute cap; 0 means no cap.
	RPMLimit   int
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// ExpiresAt is when the key stops working (nil: never); DisabledAt when it was disabled
	// (nil: enabled).
	ExpiresAt  *time.Time
	DisabledAt *time.Time
	// CreditCapMicros is the most the key may spend in a CapPeriod (nil: no cap).
	CreditCapMicros *int64
	CapPeriod       CapPeriod
	// Models are the models the key may use (nil: every model of its account).
	Models []string
	// CreatedBy is who made the key: "operator" or a web user's e-mail.
	CreatedBy string
	// CreatedByUser is the web user who made the key on the console (uuid.Nil for the
	// operator's keys and for keys made before it was kept).
	CreatedByUser uuid.UUID
}

// NewAPIKey is what CreateAPIKey stores.
type NewAPIKey struct {
	AccountID     uuid.UUID
	Name          string
	Hash          []byte
	DisplayPrefix string
	// DisplaySuffix is the key's last four characters (at most four: the column's check).
	DisplaySuffix string
	RPMLimit      int
	// ExpiresAt, CreditCapMicros, CapPeriod (default none), Models and CreatedBy (default
	// "operator") are as in APIKey.
	ExpiresAt       *time.Time
	CreditCapMicros *int64
	CapPeriod       CapPeriod
	Models          []string
	CreatedBy       string
	CreatedByUser   uuid.UUID
	// MaxKeys is the account's key quota: the key is not stored (ErrKeyQuota) when the account
	// holds this many keys that are not revoked already. 0: no quota.
	MaxKeys int
}

// ErrKeyQuota is a key refused because its account holds its plan's quota of keys that are not
// revoked.
var ErrKeyQuota = errors.New("key quota reached")

func keyFromRow(r db.ApiKey) APIKey {
	return APIKey{
		ID: r.ID, AccountID: r.AccountID, Name: r.Name, Hash: r.KeyHash, DisplayPrefix: r.DisplayPrefix,
		DisplaySuffix: r.DisplaySuffix, RPMLimit: int(r.RpmLimit), CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt,
		ExpiresAt: r.ExpiresAt, DisabledAt: r.DisabledAt, CreditCapMicros: r.CreditCapMicros,
		CapPeriod: CapPeriod(r.CapPeriod), Models: r.Models, CreatedBy: r.CreatedBy, CreatedByUser: fromPGUUID(r.CreatedByUser),
	}
}

// fromPGUUID is a nullable uuid column's value, uuid.Nil for NULL.
func fromPGUUID(u pgtype.UUID) uuid.UUID {
	if !u.Valid {
		return uuid.Nil
	}
	return u.Bytes
}

// CreateAPIKey stores a new key for an account. With a quota (k.MaxKeys > 0) the account's key
// creations are serialized in a transaction (its account row locked, the keys not revoked
// counted, the key inserted), so that concurrent creations never pass the quota together; a
// creation at the quota is ErrKeyQuota. An unknown account is ErrNotFound.
func (s *Store) CreateAPIKey(ctx context.Context, k NewAPIKey) (APIKey, error) {
	if k.CapPeriod == "" {
		k.CapPeriod = CapPeriodNone
	}
	if k.CreatedBy == "" {
		k.CreatedBy = "operator"
	}
	params := db.CreateAPIKeyParams{
		AccountID: k.AccountID, Name: k.Name, KeyHash: k.Hash, DisplayPrefix: k.DisplayPrefix, DisplaySuffix: k.DisplaySuffix,
		RpmLimit: int32(k.RPMLimit), ExpiresAt: k.ExpiresAt, CreditCapMicros: k.CreditCapMicros,
		CapPeriod: string(k.CapPeriod), Models: k.Models, CreatedBy: k.CreatedBy,
		CreatedByUser: pgtype.UUID{Bytes: k.CreatedByUser, Valid: k.CreatedByUser != uuid.Nil},
	}
	var row db.ApiKey
	err := s.inTx(ctx, func(q *db.Queries) error {
		if k.MaxKeys > 0 {
			if _, err := q.LockAccountKeys(ctx, k.AccountID); err != nil {
				return notFound(err)
			}
			n, err := q.CountUnrevokedAPIKeys(ctx, k.AccountID)
			if err != nil {
				return err
			}
			if n >= int64(k.MaxKeys) {
				return ErrKeyQuota
			}
		}
		var err error
		row, err = q.CreateAPIKey(ctx, params)
		return err
	})
	if isUniqueViolation(err) {
		return APIKey{}, ErrConflict
	}
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// CountUnrevokedAPIKeys returns how many keys of the account are not revoked: what counts
// against its plan's key quota.
func (s *Store) CountUnrevokedAPIKeys(ctx context.Context, accountID uuid.UUID) (int, error) {
	n, err := s.q.CountUnrevokedAPIKeys(ctx, accountID)
	return int(n), err
}

// ActiveAPIKeyByHash returns the unrevoked key with this hash, or ErrNotFound. A disabled or
// expired key is returned: the caller says why it refuses it.
func (s *Store) ActiveAPIKeyByHash(ctx context.Context, hash []byte) (APIKey, error) {
	row, err := s.q.GetActiveAPIKeyByHash(ctx, hash)
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// GetAPIKey returns the key with id, revoked or not, of any account, or ErrNotFound: for the
// operator's commands, whose KEY_ID names the account. A path that serves a tenant reads
// GetAccountAPIKey.
func (s *Store) GetAPIKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	row, err := s.q.GetAPIKey(ctx, id)
	if err != nil {
		return APIKey{}, notFound(err)
	}
	return keyFromRow(row), nil
}

// ListAPIKeys returns the account's keys, oldest first, revoked ones included.
func (s *Store) ListAPIKeys(ctx context.Context, accountID uuid.UUID) ([]APIKey, error) {
	rows, err := s.q.ListAPIKeys(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, nil
}

// TouchAPIKeys records that each key of uses was last used at its time (never moving a
// timestamp backwards).
func (s *Store) TouchAPIKeys(ctx context.Context, uses map[uuid.UUID]time.Time) error {
	if len(uses) == 0 {
		return nil
	}
	ids, at := make([]uuid.UUID, 0, len(uses)), make([]time.Time, 0, len(uses))
	for id, t := range uses {
		ids, at = append(ids, id), append(at, t)
	}
	return s.q.TouchAPIKeys(ctx, db.TouchAPIKeysParams{Ids: ids, UsedAt: at})
}
