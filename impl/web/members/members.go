package members

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/gen/db"
)

// Roles of a membership.
const (
	RoleOwner  = "owner"
	RoleMember = "member"
)

// ErrNotFound reports an unknown user or membership.
var ErrNotFound = errors.New("not found")

// ValidRole reports whether role is one a membership may have.
func ValidRole(role string) bool { return role == RoleOwner || role == RoleMember }

// User is a person who signs in (or will: Subject is empty until the first sign-in).
type User struct {
	ID         uuid.UUID
	Email      string
	Name       string
	Subject    string
	LastSignIn *time.Time
}

// Membership is a user's role in an account.
type Membership struct {
	AccountID   uuid.UUID
	AccountName string
	Plan        string
	Role        string
}

// Member is one row of an account's member list.
type Member struct {
	User
	Role  string
	Added time.Time
}

// Identity is what a verified ID token says about the person signing in.
type Identity struct {
	Issuer, Subject string
	Email           string
	EmailVerified   bool
	Name            string
}

// Service reads and writes users and memberships.
type Service struct {
	DB db.DBTX
}

func (s *Service) q() *db.Queries { return db.New(s.DB) }

func userFromRow(r db.User) User {
	u := User{ID: r.ID, Email: r.Email, Name: r.Name, LastSignIn: r.LastSignInAt}
	if r.OidcSubject != nil {
		u.Subject = *r.OidcSubject
	}
	return u
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// normalEmail trims an address; addresses are compared without case.
func normalEmail(email string) string { return strings.TrimSpace(email) }

// Add makes the person with email a member of the account with role (creating the user when
// nobody has that address yet); an existing membership gets the new role.
func (s *Service) Add(ctx context.Context, accountID uuid.UUID, email, role string) (User, error) {
	email = normalEmail(email)
	if !strings.Contains(email, "@") {
		return User{}, fmt.Errorf("%q is not an e-mail address", email)
	}
	if !ValidRole(role) {
		return User{}, fmt.Errorf("role %q: want owner or member", role)
	}
	q := s.q()
	r, err := q.GetUserByEmail(ctx, email)
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = q.CreateUserByEmail(ctx, email)
		if isUniqueViolation(err) { // added at the same moment by someone else
			r, err = q.GetUserByEmail(ctx, email)
		}
	}
	if err != nil {
		return User{}, err
	}
	if _, err := q.UpsertMembership(ctx, db.UpsertMembershipParams{AccountID: accountID, UserID: r.ID, Role: role}); err != nil {
		return User{}, err
	}
	return userFromRow(r), nil
}

// Remove ends the membership of the person with email in the account.
func (s *Service) Remove(ctx context.Context, accountID uuid.UUID, email string) error {
	q := s.q()
	r, err := q.GetUserByEmail(ctx, normalEmail(email))
	if err != nil {
		return notFound(err)
	}
	n, err := q.DeleteMembership(ctx, db.DeleteMembershipParams{AccountID: accountID, UserID: r.ID})
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// List returns the account's members by e-mail.
func (s *Service) List(ctx context.Context, accountID uuid.UUID) ([]Member, error) {
	rows, err := s.q().ListAccountMembers(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(rows))
	for _, r := range rows {
		out = append(out, Member{User: User{ID: r.UserID, Email: r.Email, Name: r.Name, LastSignIn: r.LastSignInAt},
			Role: r.Role, Added: r.CreatedAt})
	}
	return out, nil
}

// SignIn finds the user an identity belongs to: by issuer and subject; else, when the e-mail is
// verified, the user the operator added with that address, or one bound to another issuer
// (which the subject then claims);
// else a new user (whose e-mail is kept only when verified). It records the sign-in.
func (s *Service) SignIn(ctx context.Context, id Identity) (User, error) {
	if id.Issuer == "" || id.Subject == "" {
		return User{}, errors.New("members: identity without issuer or subject")
	}
	q := s.q()
	email := ""
	if id.EmailVerified {
		email = normalEmail(id.Email)
	}
	r, err := q.GetUserBySubject(ctx, db.GetUserBySubjectParams{OidcIssuer: &id.Issuer, OidcSubject: &id.Subject})
	if errors.Is(err, pgx.ErrNoRows) && email != "" {
		var byEmail db.User
		if byEmail, err = q.GetUserByEmail(ctx, email); err == nil {
			// Unclaimed (added by the operator), or bound to an issuer that is no longer the
			// configured one (the provider was replaced: its identities can no longer sign in,
			// and the configured issuer has verified the address).
			if byEmail.OidcSubject == nil || byEmail.OidcIssuer == nil || *byEmail.OidcIssuer != id.Issuer {
				r, err = q.ClaimUser(ctx, db.ClaimUserParams{ID: byEmail.ID, OidcIssuer: &id.Issuer, OidcSubject: &id.Subject})
			} else {
				// The address belongs to another identity: this one gets a user of its own,
				// without the address (and so without that user's memberships).
				err, email = pgx.ErrNoRows, ""
			}
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		r, err = q.CreateUserBySubject(ctx, db.CreateUserBySubjectParams{OidcIssuer: &id.Issuer, OidcSubject: &id.Subject, Email: email, Name: id.Name})
		if isUniqueViolation(err) {
			r, err = q.CreateUserBySubject(ctx, db.CreateUserBySubjectParams{OidcIssuer: &id.Issuer, OidcSubject: &id.Subject, Name: id.Name})
		}
	}
	if err != nil {
		return User{}, err
	}
	if email == "" {
		email = r.Email
	}
	updated, err := q.RecordSignIn(ctx, db.RecordSignInParams{ID: r.ID, Email: email, Name: id.Name})
	if isUniqueViolation(err) { // the verified address moved here from another user: keep ours
		updated, err = q.RecordSignIn(ctx, db.RecordSignInParams{ID: r.ID, Email: r.Email, Name: id.Name})
	}
	if err != nil {
		return User{}, err
	}
	return userFromRow(updated), nil
}

// User returns the user with id.
func (s *Service) User(ctx context.Context, id uuid.UUID) (User, error) {
	r, err := s.q().GetUser(ctx, id)
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromRow(r), nil
}

// Memberships returns the accounts the user belongs to, by account name.
func (s *Service) Memberships(ctx context.Context, userID uuid.UUID) ([]Membership, error) {
	rows, err := s.q().ListUserMemberships(ctx, userID)
	if err != nil {
		return nil, err
	}
	out := make([]Membership, 0, len(rows))
	for _, r := range rows {
		out = append(out, Membership{AccountID: r.AccountID, AccountName: r.AccountName, Plan: r.Plan, Role: r.Role})
	}
	return out, nil
}

// Membership returns the user's membership of one account (ErrNotFound when none).
func (s *Service) Membership(ctx context.Context, userID, accountID uuid.UUID) (Membership, error) {
	r, err := s.q().GetMembership(ctx, db.GetMembershipParams{UserID: userID, AccountID: accountID})
	if err != nil {
		return Membership{}, notFound(err)
	}
	return Membership{AccountID: r.AccountID, AccountName: r.AccountName, Plan: r.Plan, Role: r.Role}, nil
}

// AddUser makes the user a member of the account with role (self-service sign-up makes its
// creator the owner).
func (s *Service) AddUser(ctx context.Context, accountID, userID uuid.UUID, role string) error {
	if !ValidRole(role) {
		return fmt.Errorf("role %q: want owner or member", role)
	}
	_, err := s.q().UpsertMembership(ctx, db.UpsertMembershipParams{AccountID: accountID, UserID: userID, Role: role})
	return err
}
