package store

import (
	"context"

	"github.com/google/uuid"
)

// A user's self-service sign-up on the web console makes one account however many sign-ups
// are sent at once: the request that claims the user's sign-up (ClaimSignup) creates the
// account, with its owner, and records it in one transaction (CreateSignupAccount); every
// other one finds it (SignupAccount).

// ClaimSignup claims the user's sign-up for the calling request: true for the one request that
// may create the account, false for every other (concurrent or later) one.
func (s *Store) ClaimSignup(ctx context.Context, userID uuid.UUID) (bool, error) {
	n, err := s.q.ClaimSignup(ctx, userID)
	return n != 0, err
}

// ReleaseSignup gives the user's claim back when the sign-up made no account, so that the user
// may try again.
func (s *Store) ReleaseSignup(ctx context.Context, userID uuid.UUID) error {
	return s.q.ReleaseSignup(ctx, userID)
}

// SignupAccount returns the account the user's sign-up made: uuid.Nil while it is being made,
// or when it made none; ErrNotFound when there is no such user.
func (s *Store) SignupAccount(ctx context.Context, userID uuid.UUID) (uuid.UUID, error) {
	id, err := s.q.GetSignupAccount(ctx, userID)
	if err != nil {
		return uuid.Nil, notFound(err)
	}
	if !id.Valid {
		return uuid.Nil, nil
	}
	return id.Bytes, nil
}
