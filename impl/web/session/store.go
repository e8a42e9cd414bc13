package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
)

// The session data keys the store reads at every commit.
const (
	// UserIDKey holds the signed-in user's id as a string (absent before sign-in).
	UserIDKey = "user_id"
	// UserAgentKey holds the browser's User-Agent as seen at sign-in.
	UserAgentKey = "user_agent"
)

// Store is an scs.CtxStore over PostgreSQL. Tokens are looked up by their SHA-256; the token
// itself is never stored.
type Store struct {
	st    *store.Store
	codec scs.Codec
}

var _ scs.CtxStore = (*Store)(nil)

// New returns a session store keeping its sessions in st. codec must be the session
// manager's codec (nil: scs.GobCodec).
func New(st *store.Store, codec scs.Codec) *Store {
	if codec == nil {
		codec = scs.GobCodec{}
	}
	return &Store{st: st, codec: codec}
}

// Hash is the SHA-256 of a session token, as stored.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// FindCtx returns the data of an unexpired session.
func (s *Store) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	b, err := s.st.FindWebSession(ctx, Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// CommitCtx writes the session's data and expiry, with the user id and user agent it holds.
func (s *Store) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	w := store.WebSessionSave{TokenHash: Hash(token), Data: b, Expiry: expiry}
	if _, values, err := s.codec.Decode(b); err == nil {
		if id, ok := values[UserIDKey].(string); ok {
			if u, err := uuid.Parse(id); err == nil {
				w.UserID = u
			}
		}
		if ua, ok := values[UserAgentKey].(string); ok {
			w.UserAgent = ua
		}
	}
	return s.st.SaveWebSession(ctx, w)
}

// DeleteCtx removes the session (nothing when it does not exist).
func (s *Store) DeleteCtx(ctx context.Context, token string) error {
	return s.st.EndWebSession(ctx, Hash(token))
}

// Find is FindCtx without a context (scs.Store).
func (s *Store) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

// Commit is CommitCtx without a context (scs.Store).
func (s *Store) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

// Delete is DeleteCtx without a context (scs.Store).
func (s *Store) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }

// Info describes one of a user's sessions, for the Sessions page.
type Info struct {
	ID        int64
	Created   time.Time
	LastSeen  time.Time
	Expiry    time.Time
	UserAgent string
	// Current is the session of the request that listed them.
	Current bool
}

// List returns the user's unexpired sessions, most recently used first; current is the token
// of the asking session (marked Current).
func (s *Store) List(ctx context.Context, userID uuid.UUID, current string) ([]Info, error) {
	sessions, err := s.st.ListUserWebSessions(ctx, userID)
	if err != nil {
		return nil, err
	}
	cur := Hash(current)
	out := make([]Info, 0, len(sessions))
	for _, r := range sessions {
		out = append(out, Info{ID: r.ID, Created: r.CreatedAt, LastSeen: r.LastSeenAt, Expiry: r.Expiry,
			UserAgent: r.UserAgent, Current: current != "" && string(r.TokenHash) == string(cur)})
	}
	return out, nil
}

// End ends one of the user's sessions; false when the user has no such session.
func (s *Store) End(ctx context.Context, userID uuid.UUID, id int64) (bool, error) {
	return s.st.EndUserWebSession(ctx, userID, id)
}

// EndAll ends every session of the user and returns how many there were.
func (s *Store) EndAll(ctx context.Context, userID uuid.UUID) (int64, error) {
	return s.st.EndUserWebSessions(ctx, userID)
}

// DeleteExpired removes the expired sessions (called at each sign-in: the table stays small
// without a background sweeper).
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	return s.st.DeleteEndedWebSessions(ctx)
}
