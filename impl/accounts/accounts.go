// Package accounts holds the operations that manage tenants: creating accounts on a plan,
// minting and revoking API keys, granting credit and model access. The operator's CLI and the
// web application call it; request handling never does.
//
// The key operations (keys.go) are scoped to an account: a key id of another account is
// store.ErrNotFound, whoever asks. A key is made with options (CreateKeyWith: name, expiry, an
// RPM cap within the plan's max_rpm, a credit cap with its reset period, a subset of the
// account's models, who made it), within the plan's key quota (max_keys: keys not revoked), listed with its spend in its current cap period and its last
// use (ListKeys, both read from the usage records), revoked (Revoke, RevokeAll), disabled and
// enabled again (Disable, Enable), and its limits changed (SetLimits, SetCreditCap). Every
// change reaches every gateway within a second (a database trigger announces it). Options that
// cannot be used are an *InvalidError naming the field.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
)

// Service manages accounts over the store, with the configured models and plans.
type Service struct {
	Store  *store.Store
	Config *config.Config
	// Now is the clock of expiry checks and cap periods (default time.Now).
	Now func() time.Time
	// Agents, when set, ends the live agent sessions started with a key when it is revoked or
	// disabled, in the change's transaction (an *agent.Service). Without it such a session runs
	// on until its next step finds the key revoked, and one waiting for a message keeps its slot
	// until the agents' sweep finds it: every process that revokes or disables keys sets it.
	Agents KeySessions
}

// KeySessions ends the live agent sessions of the account started with one of keys, in tx,
// the transaction that revokes the keys (agent.Service.EndKeySessions) or disables them
// (EndDisabledKeySessions). It is an interface so that this package does not import the
// agents, which import auth, whose tests import this package.
type KeySessions interface {
	EndKeySessions(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID) error
	EndDisabledKeySessions(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID) error
}

// NewKey is a freshly minted key: Plain is shown once and never stored.
type NewKey struct {
	Plain string
	Key   store.APIKey
}

// NameTakenError reports an account name that is taken: by an account of that very name, or
// of one that differs from it only in letter case (Existing). It is a store.ErrConflict.
type NameTakenError struct {
	Name, Existing string
}

func (e *NameTakenError) Error() string {
	if e.Existing == e.Name || e.Existing == "" {
		return fmt.Sprintf("account %q already exists", e.Name)
	}
	return fmt.Sprintf("account %q cannot be created: account %q already exists, and account names that differ only in letter case are the same name; choose another name", e.Name, e.Existing)
}

// Unwrap makes a NameTakenError a store.ErrConflict.
func (e *NameTakenError) Unwrap() error { return store.ErrConflict }

// CreateAccount creates an account on plan, with the plan's models and its starting credit,
// in one transaction: an error means that no account was made. A name that is taken, exactly
// or but for letter case, is a *NameTakenError.
func (s *Service) CreateAccount(ctx context.Context, name, plan string) (store.Account, error) {
	return s.createAccount(ctx, name, plan, uuid.Nil)
}

// CreateSignupAccount creates the account of the user's self-service sign-up: an account on
// plan, with the plan's models and its starting credit, the user as its owner, and the account
// recorded as the user's sign-up account, in one transaction (store.CreateSignupAccount). An
// error means that none of it was made, so the user may sign up again. A name that is taken,
// exactly or but for letter case, is a *NameTakenError.
func (s *Service) CreateSignupAccount(ctx context.Context, name, plan string, owner uuid.UUID) (store.Account, error) {
	return s.createAccount(ctx, name, plan, owner)
}

// createAccount creates an account on plan with the plan's set-up and, when owner is not
// uuid.Nil, with owner as the owner of the sign-up account.
func (s *Service) createAccount(ctx context.Context, name, plan string, owner uuid.UUID) (store.Account, error) {
	if err := CheckAccountName(name); err != nil {
		return store.Account{}, err
	}
	p, ok := s.Config.Plan(plan)
	if !ok {
		return store.Account{}, fmt.Errorf("unknown plan %q", plan)
	}
	setup := store.PlanSetup{Models: p.Models,
		StartingCreditMicros: p.StartingCreditMicros, CreditKey: "starting-credit", CreditNote: "starting credit of plan " + plan}
	var acct store.Account
	var err error
	if owner == uuid.Nil {
		acct, err = s.Store.CreateAccountOnPlan(ctx, name, plan, setup)
	} else {
		acct, err = s.Store.CreateSignupAccount(ctx, name, plan, setup, owner)
	}
	if errors.Is(err, store.ErrConflict) {
		taken := &NameTakenError{Name: name}
		if other, err := s.Store.GetAccountByNameAnyCase(ctx, name); err == nil {
			taken.Existing = other.Name
		}
		return store.Account{}, taken
	}
	if err != nil {
		return store.Account{}, err
	}
	return acct, nil
}

// CreateKey mints a key for the account with a name and an RPM cap (rpm < 0: the plan's
// default) and no other limit; see CreateKeyWith.
func (s *Service) CreateKey(ctx context.Context, accountID uuid.UUID, name string, rpm int) (NewKey, error) {
	return s.CreateKeyWith(ctx, accountID, KeyOptions{Name: name, RPM: rpm})
}

// GrantCredit adds micros to the account's balance as a ledger entry, once per idempotency key:
// created is false (and nothing is granted) when the key was used before.
func (s *Service) GrantCredit(ctx context.Context, accountID uuid.UUID, micros int64, idempotencyKey, note string) (e store.LedgerEntry, created bool, err error) {
	if micros <= 0 {
		return store.LedgerEntry{}, false, fmt.Errorf("a grant must be positive, got %d", micros)
	}
	if idempotencyKey == "" {
		idempotencyKey = "grant-" + uuid.NewString()
	}
	return s.Store.Append(ctx, store.LedgerChange{
		AccountID: accountID, AmountMicros: micros, Reason: store.ReasonGrant, IdempotencyKey: idempotencyKey, Note: note,
	})
}

// GrantModel lets the account use a configured model.
func (s *Service) GrantModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	if _, ok := s.Config.Model(modelID); !ok {
		return fmt.Errorf("model %q is not in the configuration", modelID)
	}
	if _, err := s.Store.GetAccount(ctx, accountID); err != nil {
		return err
	}
	return s.Store.GrantModel(ctx, accountID, modelID)
}

// RevokeModel withdraws a model from the account.
func (s *Service) RevokeModel(ctx context.Context, accountID uuid.UUID, modelID string) error {
	return s.Store.RevokeModel(ctx, accountID, modelID)
}

// ResolveAccount finds an account by id or by name.
func (s *Service) ResolveAccount(ctx context.Context, ref string) (store.Account, error) {
	id, err := uuid.Parse(ref)
	if err != nil {
		return s.Store.GetAccountByName(ctx, ref)
	}
	byID, err := s.Store.GetAccount(ctx, id)
	if err != nil {
		return byID, err
	}
	// A name that reads as another account's id (made before names were checked, trial h16
	// D7) makes the reference ambiguous: refused rather than acting on one of the two.
	if byName, err := s.Store.GetAccountByName(ctx, ref); err == nil && byName.ID != byID.ID {
		return store.Account{}, fmt.Errorf("%q is the id of account %q and the name of account %s: use the other account's id", ref, byID.Name, byName.ID)
	}
	return byID, nil
}

// MaxAccountNameLen is the most characters (Unicode code points) a new account's name may have:
// as many as a slot's or a dataset's name, enough for a company and a team, and short enough
// for a table column, a console heading and a log line. An account named longer before the
// limit keeps its name, and every command still finds it by it.
const MaxAccountNameLen = 64

// CheckAccountName refuses an account name that a reference to an account ("a name or an id")
// would read otherwise, or that shows other than it is: one that parses as an id (trial h16
// D7: an account named with another's id, and every command given that name acted on the
// other), one with spaces at either end, and one with control or invisible characters; and
// one longer than MaxAccountNameLen characters. Every account is created through it: the
// operator's CLI, the console's sign-up and the demo seed.
func CheckAccountName(name string) error {
	switch {
	case name == "":
		return errors.New("an account needs a name")
	case utf8.RuneCountInString(name) > MaxAccountNameLen:
		return fmt.Errorf("account name %q has %d characters: at most %d", name, utf8.RuneCountInString(name), MaxAccountNameLen)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("account name %q has spaces at an end", name)
	}
	if _, err := uuid.Parse(name); err == nil {
		return fmt.Errorf("account name %q reads as an account id, which commands taking an account would look up instead: choose another name", name)
	}
	if r, found := plaintext.Hidden(name); found {
		return fmt.Errorf("account name %q holds the character %U, which does not show as itself", name, r)
	}
	return nil
}
