package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// The web console's server-side sessions (web_sessions, migration 0008; impl/web/session is
// their scs store). A session is found by the SHA-256 of its token, never by the token. An
// ended session keeps its row as a tombstone (no data, no user, expired) until
// DeleteEndedWebSessions removes it, so that a save in flight cannot bring it back.

// WebSessionSave is what one save of a web session writes.
type WebSessionSave struct {
	// TokenHash is the SHA-256 of the session's token.
	TokenHash []byte
	// Data is the session's encoded data.
	Data []byte
	// Expiry is when the session ends unless saved again.
	Expiry time.Time
	// UserID is the signed-in user the session belongs to (uuid.Nil: nobody signed in yet).
	UserID uuid.UUID
	// UserAgent is the browser's User-Agent as seen at sign-in ("" when unknown).
	UserAgent string
}

// WebSession is one of a user's live web sessions, as the Sessions page lists them.
type WebSession struct {
	// ID numbers the session for the page's "end" buttons.
	ID int64
	// TokenHash is the SHA-256 of the session's token.
	TokenHash []byte
	// Expiry is when the session ends unless used again.
	Expiry time.Time
	// UserAgent is the browser's User-Agent as seen at sign-in.
	UserAgent string
	// CreatedAt is when the session was first saved.
	CreatedAt time.Time
	// LastSeenAt is when the session was last saved.
	LastSeenAt time.Time
}

// FindWebSession returns the data of the unexpired session whose token hashes to tokenHash,
// or ErrNotFound.
func (s *Store) FindWebSession(ctx context.Context, tokenHash []byte) ([]byte, error) {
	data, err := s.q.FindWebSession(ctx, tokenHash)
	if err != nil {
		return nil, notFound(err)
	}
	return data, nil
}

// SaveWebSession writes a session's data, expiry, user and user agent. A session that has
// ended stays ended: the save changes nothing then.
func (s *Store) SaveWebSession(ctx context.Context, w WebSessionSave) error {
	var user pgtype.UUID
	if w.UserID != uuid.Nil {
		user = pgtype.UUID{Bytes: w.UserID, Valid: true}
	}
	return s.q.CommitWebSession(ctx, db.CommitWebSessionParams{TokenHash: w.TokenHash, Data: w.Data, Expiry: w.Expiry,
		UserID: user, UserAgent: w.UserAgent})
}

// EndWebSession ends the session whose token hashes to tokenHash (nothing when there is none).
func (s *Store) EndWebSession(ctx context.Context, tokenHash []byte) error {
	return s.q.DeleteWebSession(ctx, tokenHash)
}

// ListUserWebSessions returns the user's live sessions, most recently used first.
func (s *Store) ListUserWebSessions(ctx context.Context, userID uuid.UUID) ([]WebSession, error) {
	rows, err := s.q.ListUserWebSessions(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]WebSession, 0, len(rows))
	for _, r := range rows {
		out = append(out, WebSession{ID: r.ID, TokenHash: r.TokenHash, Expiry: r.Expiry, UserAgent: r.UserAgent,
			CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt})
	}
	return out, nil
}

// EndUserWebSession ends the user's live session id: false when the user has no such session.
func (s *Store) EndUserWebSession(ctx context.Context, userID uuid.UUID, id int64) (bool, error) {
	n, err := s.q.DeleteUserWebSession(ctx, db.DeleteUserWebSessionParams{ID: id, UserID: userID})
	return n > 0, err
}

// EndUserWebSessions ends every live session of the user and returns how many there were.
func (s *Store) EndUserWebSessions(ctx context.Context, userID uuid.UUID) (int64, error) {
	return s.q.DeleteUserWebSessions(ctx, userID)
}

// DeleteEndedWebSessions removes the sessions (and tombstones) that ended more than a day ago,
// and returns how many it removed.
func (s *Store) DeleteEndedWebSessions(ctx context.Context) (int64, error) {
	return s.q.DeleteExpiredWebSessions(ctx)
}
