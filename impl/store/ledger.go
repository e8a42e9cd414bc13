package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gen/db"
)

// Reasons a ledger entry may give.
const (
	ReasonGrant      = "grant"      // credit bought or granted by an operator
	ReasonUsage      = "usage"      // settled cost of one request
	ReasonHold       = "hold"       // reserved word; holds are not ledger movements (see credit_holds)
	ReasonRelease    = "release"    // reserved word; releasing a hold moves no balance
	ReasonAdjustment = "adjustment" // an operator's correction
)

// LedgerEntry is one append-only row of the credit ledger.
type LedgerEntry struct {
	ID                 int64
	AccountID          uuid.UUID
	AmountMicros       int64
	BalanceAfterMicros int64
	Reason             string
	IdempotencyKey     string
	Note               string
	CreatedAt          time.Time
}

// LedgerChange is what Append records.
type LedgerChange struct {
	AccountID      uuid.UUID
	AmountMicros   int64 // positive credits the account, negative debits it
	Reason         string
	IdempotencyKey string
	Note           string
}

func entryFromRow(r db.CreditLedger) LedgerEntry {
	return LedgerEntry{
		ID: r.ID, AccountID: r.AccountID, AmountMicros: r.AmountMicros, BalanceAfterMicros: r.BalanceAfterMicros,
		Reason: r.Reason, IdempotencyKey: r.IdempotencyKey, Note: r.Note, CreatedAt: r.CreatedAt,
	}
}

// Append moves the account's balance by c.AmountMicros and records the entry, atomically. It is
// idempotent on (account, idempotency key): a repeated key changes nothing and returns the
// entry first recorded, with created false. A debit the balance cannot cover is
// ErrInsufficientCredit; an unknown account is ErrNotFound.
//
// Usage entries (reason usage, or a key made by UsageLedgerKey) are refused: WriteUsage alone
// writes them, each together with its usage record, whose unique index is what bills a request
// once. An entry made here would make the usage of that request id fail to write.
func (s *Store) Append(ctx context.Context, c LedgerChange) (entry LedgerEntry, created bool, err error) {
	if c.Reason == ReasonUsage || strings.HasPrefix(c.IdempotencyKey, UsageLedgerKey("")) {
		return LedgerEntry{}, false, fmt.Errorf("store: usage ledger entries (reason %q, keys %q...) are written only with their usage records",
			ReasonUsage, UsageLedgerKey(""))
	}
	row, err := s.q.AppendLedgerEntry(ctx, db.AppendLedgerEntryParams{
		AccountID: c.AccountID, AmountMicros: c.AmountMicros, Reason: c.Reason, IdempotencyKey: c.IdempotencyKey, Note: c.Note,
	})
	if err == nil {
		return entryFromRow(row), true, nil
	}
	if !isUniqueViolation(err) && !errors.Is(err, pgx.ErrNoRows) {
		return LedgerEntry{}, false, err
	}
	prior, perr := s.q.GetLedgerEntryByKey(ctx, db.GetLedgerEntryByKeyParams{AccountID: c.AccountID, IdempotencyKey: c.IdempotencyKey})
	if perr == nil {
		return entryFromRow(prior), false, nil
	}
	if !errors.Is(perr, pgx.ErrNoRows) {
		return LedgerEntry{}, false, perr
	}
	if _, aerr := s.q.GetAccountBalance(ctx, c.AccountID); aerr != nil {
		return LedgerEntry{}, false, notFound(aerr)
	}
	return LedgerEntry{}, false, ErrInsufficientCredit
}

// LedgerEntries returns the account's newest entries, newest first, at most limit.
func (s *Store) LedgerEntries(ctx context.Context, accountID uuid.UUID, limit int) ([]LedgerEntry, error) {
	rows, err := s.q.ListLedgerEntries(ctx, db.ListLedgerEntriesParams{AccountID: accountID, Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]LedgerEntry, len(rows))
	for i, r := range rows {
		out[i] = entryFromRow(r)
	}
	return out, nil
}

// LedgerSum adds up every entry of the account; it always equals the account's balance.
func (s *Store) LedgerSum(ctx context.Context, accountID uuid.UUID) (int64, error) {
	return s.q.SumLedger(ctx, accountID)
}
