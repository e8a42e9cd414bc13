package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
)

// SecretSize is the length in bytes of every server secret.
const SecretSize = 32

// Secret is the server secret of that name, shared by every replica and kept across restarts:
// the first call anywhere makes it (32 bytes from crypto/rand) and every later one reads the
// same bytes.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, SecretSize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("server secret %s: %w", name, err)
	}
	if err := s.q.InsertServerSecret(ctx, db.InsertServerSecretParams{Name: name, Secret: fresh}); err != nil {
		return nil, fmt.Errorf("server secret %s: %w", name, err)
	}
	secret, err := s.q.ServerSecret(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("server secret %s: %w", name, err)
	}
	return secret, nil
}

// ExistingSecret is the server secret of that name when one was made, without making it: ok is
// false when there is none (a database restored without its server secrets, say), for a reader
// that must not make one in passing (tollgate admin provider-key list).
func (s *Store) ExistingSecret(ctx context.Context, name string) (secret []byte, ok bool, err error) {
	secret, err = s.q.ServerSecret(ctx, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("server secret %s: %w", name, err)
	}
	return secret, true, nil
}
