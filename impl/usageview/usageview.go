package usageview

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gen/db"
)

// ErrNotFound reports that the account does not exist.
var ErrNotFound = errors.New("account not found")

// BurnDays is how many UTC days the burn rate averages over: today so far and the six days
// before it.
const BurnDays = 7

// Service answers the Usage page's questions about one account at a time. It is safe for
// concurrent use.
type Service struct {
	q    *db.Queries
	pool *pgxpool.Pool
	now  func() time.Time
	// archive reads archived months (nil: Options.Archive was nil, and no month is read from
	// an archive).
	archive *archiveReader
}

// Options tune a Service.
type Options struct {
	// Now is the clock (time.Now when nil); tests set it to place the burn rate's window.
	Now func() time.Time
	// Archive gives the local files of archived months' objects (archive.go); nil when usage
	// is never archived.
	Archive ArchiveFiles
}

// New returns a Service reading through pool (the store's pool: store.Store.Pool).
func New(pool *pgxpool.Pool, o Options) *Service {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &Service{q: db.New(pool), pool: pool, now: now}
	if o.Archive != nil {
		s.archive = &archiveReader{files: o.Archive}
	}
	return s
}

// Balance is the account's credit.
type Balance struct {
	// BalanceMicros is the account's balance; HeldMicros the part of it that gateway processes
	// hold to reserve requests in flight against (it is still the account's).
	BalanceMicros int64
	HeldMicros    int64
}

// Balance returns the account's balance, or ErrNotFound.
func (s *Service) Balance(ctx context.Context, accountID uuid.UUID) (Balance, error) {
	row, err := s.q.UsageViewAccountBalance(ctx, accountID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Balance{}, ErrNotFound
	}
	if err != nil {
		return Balance{}, err
	}
	return Balance{BalanceMicros: row.BalanceMicros, HeldMicros: row.HeldMicros}, nil
}

// Burn is the account's recent spend: what its requests cost from Since (the UTC midnight
// that starts the first of the BurnDays days) until Until (now).
type Burn struct {
	Since, Until time.Time
	SpentMicros  int64
	Requests     int64
}

// perDay is the average daily spend over the window, in micro-units.
func (b Burn) perDay() float64 {
	days := b.Until.Sub(b.Since).Hours() / 24
	if days <= 0 {
		return 0
	}
	return float64(b.SpentMicros) / days
}

// PerDayMicros is the average daily spend over the window, rounded down.
func (b Burn) PerDayMicros() int64 { return int64(b.perDay()) }

// BurnRate returns the account's spend over the last BurnDays UTC days (today so far
// included), read from the daily rollup.
func (s *Service) BurnRate(ctx context.Context, accountID uuid.UUID) (Burn, error) {
	now := s.now()
	since := midnight(now, time.UTC).AddDate(0, 0, 1-BurnDays)
	row, err := s.q.UsageViewSpendSince(ctx, db.UsageViewSpendSinceParams{AccountID: accountID, SinceDay: utcDate(since)})
	if err != nil {
		return Burn{}, err
	}
	return Burn{Since: since, Until: now, SpentMicros: row.CostMicros, Requests: row.Requests}, nil
}

// DaysLeft is how many days the balance lasts at the burn rate; ok is false when there was no
// spend in the window ("no recent spend": the estimate would be infinite).
func DaysLeft(balanceMicros int64, b Burn) (days float64, ok bool) {
	rate := b.perDay()
	if b.SpentMicros <= 0 || rate <= 0 {
		return 0, false
	}
	return float64(balanceMicros) / rate, true
}

// Summary is the head of the Usage page: balance, burn rate and the days left.
type Summary struct {
	Balance
	Burn
	// DaysLeft is DaysLeft of the balance and the burn; NoRecentSpend is true (and DaysLeft 0)
	// when nothing was spent in the window.
	DaysLeft      float64
	NoRecentSpend bool
}

// Summary returns the account's balance, burn rate and days left, or ErrNotFound.
func (s *Service) Summary(ctx context.Context, accountID uuid.UUID) (Summary, error) {
	bal, err := s.Balance(ctx, accountID)
	if err != nil {
		return Summary{}, err
	}
	burn, err := s.BurnRate(ctx, accountID)
	if err != nil {
		return Summary{}, err
	}
	days, ok := DaysLeft(bal.BalanceMicros, burn)
	return Summary{Balance: bal, Burn: burn, DaysLeft: days, NoRecentSpend: !ok}, nil
}
