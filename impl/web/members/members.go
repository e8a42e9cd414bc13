package members

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
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

// Membership is a user's role in an account: the store's record, as it is.
type Membership = store.Membership

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

// Service reads and writes users and memberships. Build it with New.
type Service struct {
	store  *store.Store
	agents Sessions
}

// New is the service on the database st, with the agents that end the agent sessions a
// removal or a lowered role ends (an *agent.Service). The agents are an argument of the
// constructor, not a field one may leave unset, nor an argument of Add alone: a service built
// without naming them does not compile. nil is for a service that only reads and signs in (a
// console without agents): its Remove and a change of Add that revokes a grant are refused.
func New(st *store.Store, agents Sessions) *Service { return &Service{store: st, agents: agents} }

// Sessions ends the live agent sessions a removal or a lowered role ends, in its transaction:
// those the member started on the console in the account (agent.Service.EndMemberSessions),
// those started with the keys the removal revokes (EndKeySessions), and those the apps whose
// grants a lowered role revokes started (EndGrantSessions). New takes it as an argument: a
// member removed without it would keep their sessions running, one waiting for a message
// holding its slot.
type Sessions interface {
	EndMemberSessions(ctx context.Context, tx *store.AgentTx, accountID, userID uuid.UUID) error
	EndKeySessions(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID) error
	EndGrantSessions(ctx context.Context, tx *store.AgentTx, accountID, grant uuid.UUID) error
}

// errNoSessions refuses a removal without the agents that end the member's sessions.
var errNoSessions = errors.New("members: a removal or a lowered role needs the agents (Sessions) that end the member's agent sessions")

// endSessions is what ends the sessions the user started in the account, and those started
// with the keys their removal revokes, in the transaction of their removal.
func endSessions(ctx context.Context, agents Sessions, accountID, userID uuid.UUID) func(tx *store.AgentTx, revoked []uuid.UUID) error {
	return func(tx *store.AgentTx, revoked []uuid.UUID) error {
		if err := agents.EndMemberSessions(ctx, tx, accountID, userID); err != nil {
			return err
		}
		if len(revoked) == 0 {
			return nil
		}
		return agents.EndKeySessions(ctx, tx, accountID, revoked)
	}
}

// endGrantSessions is what ends the sessions of the apps whose grants a lowered role revokes,
// in the transaction of the change: with a nil agents, a change that revokes a grant is refused
// (errNoSessions) and undone; one that revokes none, as adding a member does, goes through.
func endGrantSessions(ctx context.Context, agents Sessions) store.GrantRevoked {
	return func(tx *store.AgentTx, accountID, grant uuid.UUID) error {
		if agents == nil {
			return errNoSessions
		}
		return agents.EndGrantSessions(ctx, tx, accountID, grant)
	}
}

// st returns the store the service works on.
func (s *Service) st() *store.Store { return s.store }

func userFromStore(r store.User) User {
	u := User{ID: r.ID, Email: r.Email, Name: r.Name, LastSignIn: r.LastSignIn}
	if r.Subject != nil {
		u.Subject = *r.Subject
	}
	return u
}

// notFound maps the store's ErrNotFound to this package's and passes every other error through.
func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// normalEmail trims an address; addresses are compared without case.
func normalEmail(email string) string { return strings.TrimSpace(email) }

// Add makes the person with email a member of the account with role (creating the user when
// nobody has that address yet); an existing membership gets the new role. A role lowered
// revokes the OAuth grants the member made with a higher one, and the agent sessions their
// apps started end with them (access_revoked) through the service's agents (New), in the
// change's transaction; a service without agents refuses a change that revokes a grant.
func (s *Service) Add(ctx context.Context, accountID uuid.UUID, email, role string) (User, error) {
	email = normalEmail(email)
	if !strings.Contains(email, "@") {
		return User{}, fmt.Errorf("%q is not an e-mail address", email)
	}
	if !ValidRole(role) {
		return User{}, fmt.Errorf("role %q: want owner or member", role)
	}
	st := s.st()
	r, err := st.GetUserByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		r, err = st.CreateUserByEmail(ctx, email)
		if errors.Is(err, store.ErrConflict) { // added at the same moment by someone else
			r, err = st.GetUserByEmail(ctx, email)
		}
	}
	if err != nil {
		return User{}, err
	}
	if err := st.SetMembership(ctx, accountID, r.ID, role, endGrantSessions(ctx, s.agents)); err != nil {
		return User{}, err
	}
	return userFromStore(r), nil
}

// Remove ends the membership of the person with email in the account, and revokes the keys
// they made in it on the console unless keepKeys (returned: the keys revoked). Their OAuth
// grants end with the membership always, and so, through the service's agents (New, in the
// removal's transaction), do the agent sessions they started on the console in the account
// (member_removed) and those started with the keys revoked (key_revoked). A service without
// agents refuses it.
func (s *Service) Remove(ctx context.Context, accountID uuid.UUID, email string, keepKeys bool) ([]store.APIKey, error) {
	agents := s.agents
	if agents == nil {
		return nil, errNoSessions
	}
	st := s.st()
	r, err := st.GetUserByEmail(ctx, normalEmail(email))
	if err != nil {
		return nil, notFound(err)
	}
	removed, revoked, err := st.DeleteMembership(ctx, accountID, r.ID, !keepKeys, endSessions(ctx, agents, accountID, r.ID))
	if err != nil {
		return nil, err
	}
	if !removed {
		return nil, ErrNotFound
	}
	return revoked, nil
}

// List returns the account's members by e-mail.
func (s *Service) List(ctx context.Context, accountID uuid.UUID) ([]Member, error) {
	members, err := s.st().ListAccountMembers(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(members))
	for _, r := range members {
		out = append(out, Member{User: User{ID: r.UserID, Email: r.Email, Name: r.Name, LastSignIn: r.LastSignIn},
			Role: r.Role, Added: r.AddedAt})
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
	st := s.st()
	email := ""
	if id.EmailVerified {
		email = normalEmail(id.Email)
	}
	r, err := st.GetUserBySubject(ctx, id.Issuer, id.Subject)
	if errors.Is(err, store.ErrNotFound) && email != "" {
		var byEmail store.User
		if byEmail, err = st.GetUserByEmail(ctx, email); err == nil {
			// Unclaimed (added by the operator), or bound to an issuer that is no longer the
			// configured one (the provider was replaced: its identities can no longer sign in,
			// and the configured issuer has verified the address).
			if byEmail.Subject == nil || byEmail.Issuer == nil || *byEmail.Issuer != id.Issuer {
				r, err = st.ClaimUser(ctx, byEmail.ID, id.Issuer, id.Subject)
			} else {
				// The address belongs to another identity: this one gets a user of its own,
				// without the address (and so without that user's memberships).
				err, email = store.ErrNotFound, ""
			}
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		r, err = st.CreateUserBySubject(ctx, id.Issuer, id.Subject, email, id.Name)
		if errors.Is(err, store.ErrConflict) {
			r, err = st.CreateUserBySubject(ctx, id.Issuer, id.Subject, "", id.Name)
		}
	}
	if err != nil {
		return User{}, err
	}
	if email == "" {
		email = r.Email
	}
	updated, err := st.RecordSignIn(ctx, r.ID, email, id.Name)
	if errors.Is(err, store.ErrConflict) { // the verified address moved here from another user: keep ours
		updated, err = st.RecordSignIn(ctx, r.ID, r.Email, id.Name)
	}
	if err != nil {
		return User{}, err
	}
	return userFromStore(updated), nil
}

// User returns the user with id.
func (s *Service) User(ctx context.Context, id uuid.UUID) (User, error) {
	r, err := s.st().GetUser(ctx, id)
	if err != nil {
		return User{}, notFound(err)
	}
	return userFromStore(r), nil
}

// Memberships returns the accounts the user belongs to, by account name.
func (s *Service) Memberships(ctx context.Context, userID uuid.UUID) ([]Membership, error) {
	return s.st().ListUserMemberships(ctx, userID)
}

// Membership returns the user's membership of one account (ErrNotFound when none).
func (s *Service) Membership(ctx context.Context, userID, accountID uuid.UUID) (Membership, error) {
	r, err := s.st().GetMembership(ctx, userID, accountID)
	if err != nil {
		return Membership{}, notFound(err)
	}
	return r, nil
}
