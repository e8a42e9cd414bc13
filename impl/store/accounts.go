package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/gen/db"
)

// Account is one tenant.
type Account struct {
	ID            uuid.UUID
	Name          string
	Plan          string
	BalanceMicros int64
	CreatedAt     time.Time
}

func accountFromRow(r db.Account) Account {
	return Account{ID: r.ID, Name: r.Name, Plan: r.Plan, BalanceMicros: r.BalanceMicros, CreatedAt: r.CreatedAt}
}

// PlanSetup is what a new account is given by its plan: the plan's models and its starting
// credit.
type PlanSetup struct {
	// Models are the model ids the account may use.
	Models []string
	// StartingCreditMicros, when positive, is granted as one ledger entry (reason grant) with
	// the idempotency key CreditKey and the note CreditNote.
	StartingCreditMicros int64
	CreditKey            string
	CreditNote           string
}

// CreateAccount creates an account on a plan, with nothing granted. A second account with the
// same name, or with one that differs from it only in letter case, is ErrConflict.
func (s *Store) CreateAccount(ctx context.Context, name, plan string) (Account, error) {
	return s.CreateAccountOnPlan(ctx, name, plan, PlanSetup{})
}

// CreateAccountOnPlan creates an account on a plan with the plan's set-up in one transaction:
// the account's row, its models and its starting credit are stored together or not at all, so
// that a failure (or a crash) part of the way never leaves an account without what its plan
// gives it. A name that is taken, exactly or but for letter case, is ErrConflict. The account
// is returned as committed, its balance the starting credit.
func (s *Store) CreateAccountOnPlan(ctx context.Context, name, plan string, setup PlanSetup) (Account, error) {
	return s.createAccount(ctx, name, plan, setup, uuid.Nil)
}

// CreateSignupAccount creates the account of a user's self-service sign-up: the account on a
// plan with the plan's set-up (as CreateAccountOnPlan), the user as its owner (a membership
// with the role owner), and the account recorded as the user's sign-up account
// (SignupAccount), all in one transaction. An error means that none of it was made: no
// account, model access, ledger entry or membership is left, and the user's sign-up claim
// (ClaimSignup) can be given back (ReleaseSignup) for the user to try again. A name that is
// taken, exactly or but for letter case, is ErrConflict.
func (s *Store) CreateSignupAccount(ctx context.Context, name, plan string, setup PlanSetup, owner uuid.UUID) (Account, error) {
	if owner == uuid.Nil {
		return Account{}, fmt.Errorf("create the sign-up account %q: no owner", name)
	}
	return s.createAccount(ctx, name, plan, setup, owner)
}

// createAccount creates an account on a plan with the plan's set-up and, when owner is not
// uuid.Nil, the owner's membership and sign-up record, in one transaction.
func (s *Store) createAccount(ctx context.Context, name, plan string, setup PlanSetup, owner uuid.UUID) (Account, error) {
	var acct Account
	err := s.inTx(ctx, func(q *db.Queries) error {
		row, err := q.CreateAccount(ctx, db.CreateAccountParams{Name: name, Plan: plan})
		if isUniqueViolation(err) {
			return ErrConflict
		}
		if err != nil {
			return err
		}
		for _, m := range setup.Models {
			if err := q.GrantModel(ctx, db.GrantModelParams{AccountID: row.ID, ModelID: m}); err != nil {
				return fmt.Errorf("grant model %q: %w", m, err)
			}
		}
		if setup.StartingCreditMicros > 0 {
			// The account is new and uncommitted: no entry can hold the key yet, so the
			// idempotency of Append has nothing to find here.
			if _, err := q.AppendLedgerEntry(ctx, db.AppendLedgerEntryParams{AccountID: row.ID, AmountMicros: setup.StartingCreditMicros,
				Reason: ReasonGrant, IdempotencyKey: setup.CreditKey, Note: setup.CreditNote}); err != nil {
				return fmt.Errorf("grant the starting credit: %w", err)
			}
			if row, err = q.GetAccount(ctx, row.ID); err != nil {
				return err
			}
		}
		if owner != uuid.Nil {
			// The account is new: the member has no OAuth grants in it for the upsert to revoke.
			if _, err := q.UpsertMembership(ctx, db.UpsertMembershipParams{AccountID: row.ID, UserID: owner, Role: "owner"}); err != nil {
				return fmt.Errorf("make the user the account's owner: %w", err)
			}
			// Recorded with the membership, so that a request that finds the sign-up account
			// (SignupAccount) finds the owner's membership too, and a claim given back after an
			// error (ReleaseSignup, only while no account is recorded) is never given back for
			// an account that was made.
			n, err := q.SetSignupAccount(ctx, db.SetSignupAccountParams{ID: owner, AccountID: row.ID})
			if err != nil {
				return fmt.Errorf("record the sign-up account: %w", err)
			}
			if n == 0 {
				// Another sign-up of the user (one claimed again after its claim went stale)
				// made the account first: this one is not kept.
				return ErrSignupMade
			}
		}
		acct = accountFromRow(row)
		return nil
	})
	if err != nil {
		return Account{}, err
	}
	return acct, nil
}

// GetAccount returns the account with id, or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, id uuid.UUID) (Account, error) {
	row, err := s.q.GetAccount(ctx, id)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// GetAccountByName returns the account called name, or ErrNotFound.
func (s *Store) GetAccountByName(ctx context.Context, name string) (Account, error) {
	row, err := s.q.GetAccountByName(ctx, name)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// GetAccountByNameAnyCase returns the account whose name is name but for letter case (names
// are unique that way), or ErrNotFound.
func (s *Store) GetAccountByNameAnyCase(ctx context.Context, name string) (Account, error) {
	row, err := s.q.GetAccountByNameAnyCase(ctx, name)
	if err != nil {
		return Account{}, notFound(err)
	}
	return accountFromRow(row), nil
}

// ListAccounts returns every account, oldest first.
func (s *Store) ListAccounts(ctx context.Context) ([]Account, error) {
	rows, err := s.q.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Account, len(rows))
	for i, r := range rows {
		out[i] = accountFromRow(r)
	}
	return out, nil
}

// Balance returns the account's balance in micro-units, or ErrNotFound.
func (s *Store) Balance(ctx context.Context, accountID uuid.UUID) (int64, error) {
	b, err := s.q.GetAccountBalance(ctx, accountID)
	if err != nil {
		return 0, notFound(err)
	}
	return b, nil
}
