package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
)

// The web console's people (users and memberships, migration 0008; impl/web/members owns the
// rules of signing in and adding members): a user signs in through OpenID Connect, or is
// added by e-mail before ever signing in, and is a member of accounts with a role.

// User is a person who signs in to the web console (or will: Issuer and Subject are nil until
// the first sign-in of a user added by e-mail).
type User struct {
	// ID is the user's id.
	ID uuid.UUID
	// Issuer is the OpenID provider the user signs in with (nil: none yet).
	Issuer *string
	// Subject is the user's subject at Issuer (nil: none yet).
	Subject *string
	// Email is the user's address ("" when none was verified).
	Email string
	// Name is the user's name as the provider last said it.
	Name string
	// LastSignIn is when the user last signed in (nil: never).
	LastSignIn *time.Time
}

func userFromRow(r db.User) User {
	return User{ID: r.ID, Issuer: r.OidcIssuer, Subject: r.OidcSubject, Email: r.Email, Name: r.Name,
		LastSignIn: r.LastSignInAt}
}

// Membership is a user's role in an account, with the account's name and plan.
type Membership struct {
	// AccountID is the account's id.
	AccountID uuid.UUID
	// AccountName is the account's name.
	AccountName string
	// Plan is the account's plan.
	Plan string
	// Role is the user's role in the account.
	Role string
}

// AccountMember is one member of an account.
type AccountMember struct {
	// UserID is the member's user id.
	UserID uuid.UUID
	// Email is the member's address.
	Email string
	// Name is the member's name.
	Name string
	// LastSignIn is when the member last signed in (nil: never).
	LastSignIn *time.Time
	// Role is the member's role in the account.
	Role string
	// AddedAt is when the member was added to the account.
	AddedAt time.Time
}

// GetUser returns the user with id, or ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id uuid.UUID) (User, error) {
	r, err := s.q.GetUser(ctx, id)
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// GetUserByEmail returns the user with the address email, compared without letter case, or
// ErrNotFound.
func (s *Store) GetUserByEmail(ctx context.Context, email string) (User, error) {
	r, err := s.q.GetUserByEmail(ctx, email)
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// GetUserBySubject returns the user who signs in as subject at issuer, or ErrNotFound.
func (s *Store) GetUserBySubject(ctx context.Context, issuer, subject string) (User, error) {
	r, err := s.q.GetUserBySubject(ctx, db.GetUserBySubjectParams{OidcIssuer: &issuer, OidcSubject: &subject})
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// CreateUserByEmail creates a user with the address email and no sign-in yet (one the operator
// adds). ErrConflict when a user has that address already.
func (s *Store) CreateUserByEmail(ctx context.Context, email string) (User, error) {
	r, err := s.q.CreateUserByEmail(ctx, email)
	if isUniqueViolation(err) {
		return User{}, ErrConflict
	}
	if err != nil {
		return User{}, err
	}
	return userFromRow(r), nil
}

// CreateUserBySubject creates the user who signs in as subject at issuer, with email ("":
// none) and name. ErrConflict when that subject, or another user, has the address already.
func (s *Store) CreateUserBySubject(ctx context.Context, issuer, subject, email, name string) (User, error) {
	r, err := s.q.CreateUserBySubject(ctx, db.CreateUserBySubjectParams{OidcIssuer: &issuer, OidcSubject: &subject,
		Email: email, Name: name})
	if isUniqueViolation(err) {
		return User{}, ErrConflict
	}
	if err != nil {
		return User{}, err
	}
	return userFromRow(r), nil
}

// ClaimUser binds the user id, when it has no subject yet or one at another issuer than issuer,
// to subject at issuer; ErrNotFound when there is no such user (or it is bound at issuer
// already).
func (s *Store) ClaimUser(ctx context.Context, id uuid.UUID, issuer, subject string) (User, error) {
	r, err := s.q.ClaimUser(ctx, db.ClaimUserParams{ID: id, OidcIssuer: &issuer, OidcSubject: &subject})
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// RecordSignIn records a sign-in of the user id now, with the address and name it signed in
// with. ErrConflict when another user has that address; ErrNotFound when there is no such
// user.
func (s *Store) RecordSignIn(ctx context.Context, id uuid.UUID, email, name string) (User, error) {
	r, err := s.q.RecordSignIn(ctx, db.RecordSignInParams{ID: id, Email: email, Name: name})
	if isUniqueViolation(err) {
		return User{}, ErrConflict
	}
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// SetMembership makes the user a member of the account with role, or sets the role of a member.
// The member's OAuth grants made with a role above the new one are revoked in the same
// transaction, after the membership is locked (lockMembership), and then (nil: nothing) runs
// in it for each (the agents end the sessions their app started); its error undoes the change.
func (s *Store) SetMembership(ctx context.Context, accountID, userID uuid.UUID, role string, then GrantRevoked) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := lockMembership(ctx, q, accountID, userID); err != nil {
			return err
		}
		lowered, err := q.RevokeOAuthGrantsAboveRole(ctx, db.RevokeOAuthGrantsAboveRoleParams{AccountID: accountID, UserID: userID, Role: role})
		if err != nil {
			return err
		}
		if _, err := q.UpsertMembership(ctx, db.UpsertMembershipParams{AccountID: accountID, UserID: userID, Role: role}); err != nil {
			return err
		}
		return grantsRevoked(q, tx, accountID, lowered, then)
	})
}

// lockMembership locks the membership row of the user in the account (if there is one) for the
// rest of the transaction, before the statement that changes it and revokes the member's OAuth
// grants: an authorization code redeemed meanwhile holds the row (RedeemOAuthCode) until its
// grant is committed, and the revoking statement, which starts after the lock, sees that grant
// and revokes it; a redemption that comes after the lock waits, and then finds the change.
func lockMembership(ctx context.Context, q *db.Queries, accountID, userID uuid.UUID) error {
	_, err := q.LockMembershipForChange(ctx, db.LockMembershipForChangeParams{AccountID: accountID, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// DeleteMembership ends the user's membership of the account, and revokes in the same
// statement the OAuth grants the member made in it: false when there was no such membership.
// With revokeKeys, the keys the member made in the account on the console are revoked in the
// same transaction, and returned: a person who leaves takes no working key along. When there
// was a membership, then (nil: nothing) runs in the same transaction after its removal, with
// the ids of the keys revoked (the agents end the sessions the member started on the console
// in the account, and those started with the keys); its error undoes the removal.
func (s *Store) DeleteMembership(ctx context.Context, accountID, userID uuid.UUID, revokeKeys bool, then KeysRevoked) (removed bool, revoked []APIKey, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := lockMembership(ctx, q, accountID, userID); err != nil {
			return err
		}
		n, err := q.DeleteMembership(ctx, db.DeleteMembershipParams{AccountID: accountID, UserID: userID})
		removed = n > 0
		if err != nil || !removed {
			return err
		}
		if revokeKeys {
			rows, err := q.RevokeMemberAPIKeys(ctx, db.RevokeMemberAPIKeysParams{AccountID: accountID,
				UserID: pgtype.UUID{Bytes: userID, Valid: true}})
			if err != nil {
				return err
			}
			for _, r := range rows {
				revoked = append(revoked, keyFromRow(r))
			}
		}
		if then == nil {
			return nil
		}
		ids := make([]uuid.UUID, len(revoked))
		for i, k := range revoked {
			ids[i] = k.ID
		}
		return then(newAgentTx(s.q, tx), ids)
	})
	if err != nil {
		return false, nil, err
	}
	return removed, revoked, nil
}

// ListAccountMembers returns the account's members by e-mail.
func (s *Store) ListAccountMembers(ctx context.Context, accountID uuid.UUID) ([]AccountMember, error) {
	rows, err := s.q.ListAccountMembers(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]AccountMember, 0, len(rows))
	for _, r := range rows {
		out = append(out, AccountMember{UserID: r.UserID, Email: r.Email, Name: r.Name, LastSignIn: r.LastSignInAt,
			Role: r.Role, AddedAt: r.CreatedAt})
	}
	return out, nil
}

// ListUserMemberships returns the accounts the user belongs to, by account name.
func (s *Store) ListUserMemberships(ctx context.Context, userID uuid.UUID) ([]Membership, error) {
	rows, err := s.q.ListUserMemberships(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]Membership, 0, len(rows))
	for _, r := range rows {
		out = append(out, Membership{AccountID: r.AccountID, AccountName: r.AccountName, Plan: r.Plan, Role: r.Role})
	}
	return out, nil
}

// GetMembership returns the user's membership of the account, or ErrNotFound.
func (s *Store) GetMembership(ctx context.Context, userID, accountID uuid.UUID) (Membership, error) {
	r, err := s.q.GetMembership(ctx, db.GetMembershipParams{UserID: userID, AccountID: accountID})
	if err != nil {
		return Membership{}, notFound(err)
	}
	return Membership{AccountID: r.AccountID, AccountName: r.AccountName, Plan: r.Plan, Role: r.Role}, nil
}
