package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// A user's self-service sign-up on the web console makes one account however many sign-ups
// are sent at once: the request that claims the user's sign-up (ClaimSignup) creates the
// account, with its owner, and records it in one transaction (CreateSignupAccount); every
// other one finds it (SignupAccount).

// SignupClaimStale is how old a claim that made no account must be for a new sign-up of the
// user to claim it again: its request failed and could not give it back (ReleaseSignup, the
// database gone between the two), and the user would otherwise never sign up. It is far longer
// than a sign-up takes; should one still be running, CreateSignupAccount keeps the user to one
// account (ErrSignupMade).
const SignupClaimStale = 10 * time.Minute

// ErrSignupMade is CreateSignupAccount's error when another sign-up of the user made its
// account first: nothing was made, and the user's account is that one (SignupAccount).
var ErrSignupMade = errors.New("the user's sign-up made an account already")

// ClaimSignup claims the user's sign-up for the calling request: true for the one request that
// may create the account, false for every other (concurrent or later) one, and for every one
// after an account was made. A claim left by a failed sign-up that could not give it back is
// claimed again once it is SignupClaimStale old.
func (s *Store) ClaimSignup(ctx context.Context, userID uuid.UUID) (bool, error) {
	n, err := s.q.ClaimSignup(ctx, db.ClaimSignupParams{ID: userID, StaleSeconds: int32(SignupClaimStale / time.Second)})
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
