package accounts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/apikey"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
)

// InvalidError is a key option or limit that cannot be used; Field names it (as the CLI's flag
// and the web form's field: "rpm", "expires", "credit_cap", "cap_period", "models"; "max_keys"
// is the plan's key quota, no field of the form) and the message says why, in words fit to show
// the user.
type InvalidError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *InvalidError) Error() string { return e.Message }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// KeyOptions are what a new key is made with. The zero value is a key with the plan's default
// RPM cap only when RPM is negative; see each field.
type KeyOptions struct {
	Name string
	// RPM is the requests-per-minute cap: negative for the plan's default, 0 for none (refused
	// when the plan has a maximum), else at most the plan's max_rpm.
	RPM int
	// ExpiresAt is when the key stops working (nil: never); it must be in the future.
	ExpiresAt *time.Time
	// CreditCapMicros is the most the key may spend in each CapPeriod (nil: no cap).
	CreditCapMicros *int64
	CapPeriod       store.CapPeriod
	// Models are the models the key may use, each one the account has (nil: all of them).
	Models []string
	// CreatedBy is who makes the key: "operator" (the default) or the web user's e-mail.
	CreatedBy string
	// CreatedByUser is the web user who makes the key on the console (uuid.Nil: the operator).
	CreatedByUser uuid.UUID
}

// KeyInfo is a key as the Keys page and `admin key list` show it.
type KeyInfo struct {
	store.KeyWithSpend
	// Status is "active", "disabled", "expired" or "revoked".
	Status string
}

// KeyStatus is the state of a key at t: revoked, disabled, expired or active, the first that
// applies.
func KeyStatus(k store.APIKey, t time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.DisabledAt != nil:
		return "disabled"
	case k.ExpiresAt != nil && !t.Before(*k.ExpiresAt):
		return "expired"
	}
	return "active"
}

// AuditState is what an audit log entry keeps of a key before or after a change, at t: its
// name, prefix, RPM cap, status and the limits it has. The web application's Keys page and
// `tollgate admin key` record the same shape.
func AuditState(k store.APIKey, t time.Time) map[string]any {
	m := map[string]any{"name": k.Name, "prefix": k.DisplayPrefix, "rpm_limit": k.RPMLimit,
		"status": KeyStatus(k, t)}
	if k.ExpiresAt != nil {
		m["expires_at"] = k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if k.CreditCapMicros != nil {
		m["credit_cap_micros"] = *k.CreditCapMicros
		m["cap_period"] = string(k.CapPeriod)
	}
	if k.Models != nil {
		m["models"] = k.Models
	}
	return m
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// CreateKeyWith mints a key for the account with the options o, checked against the account's
// plan (the RPM cap within its max_rpm; its key quota max_keys, counted atomically with the
// creation, so that concurrent creations never pass it together) and models (the subset within
// the account's). The key is in NewKey.Plain, shown once: only its hash is stored, with its first
// characters and its last four for lists.
func (s *Service) CreateKeyWith(ctx context.Context, accountID uuid.UUID, o KeyOptions) (NewKey, error) {
	acct, err := s.Store.GetAccount(ctx, accountID)
	if err != nil {
		return NewKey{}, err
	}
	if err := checkKeyName(o.Name); err != nil {
		return NewKey{}, err
	}
	if _, ok := s.Config.Plan(acct.Plan); !ok {
		// The plan's limits (its key quota, its RPM maximum) are unknown: a plan renamed or
		// removed in the configuration must not lift them (configuration trial: keys past the
		// quota, and without an RPM cap, were made for its accounts).
		return NewKey{}, invalid("plan", "the account's plan %q is not in the gateway's configuration, so its key quota and RPM limits are unknown: an operator must put the plan back in the configuration before the account makes keys", acct.Plan)
	}
	rpm, err := s.checkRPM(acct.Plan, o.RPM)
	if err != nil {
		return NewKey{}, err
	}
	if o.ExpiresAt != nil && !o.ExpiresAt.After(s.now()) {
		return NewKey{}, invalid("expires", "the expiry %s is not in the future", o.ExpiresAt.UTC().Format(time.RFC3339))
	}
	period, models, err := s.checkCapAndModels(ctx, accountID, o.CreditCapMicros, o.CapPeriod, o.Models)
	if err != nil {
		return NewKey{}, err
	}
	g, err := apikey.Generate()
	if err != nil {
		return NewKey{}, err
	}
	quota := s.KeyQuota(acct.Plan)
	k, err := s.Store.CreateAPIKey(ctx, store.NewAPIKey{
		AccountID: accountID, Name: o.Name, Hash: g.Hash[:], DisplayPrefix: g.DisplayPrefix,
		DisplaySuffix: g.Plain[len(g.Plain)-4:], RPMLimit: rpm,
		ExpiresAt: o.ExpiresAt, CreditCapMicros: o.CreditCapMicros, CapPeriod: period, Models: models,
		CreatedBy: o.CreatedBy, CreatedByUser: o.CreatedByUser, MaxKeys: quota,
	})
	if errors.Is(err, store.ErrKeyQuota) {
		return NewKey{}, invalid("max_keys", "the plan %s allows an account at most %d keys that are not revoked (disabled and expired ones count): revoke one to make room",
			acct.Plan, quota)
	}
	if err != nil {
		return NewKey{}, err
	}
	return NewKey{Plain: g.Plain, Key: k}, nil
}

// KeyQuota is the most keys that are not revoked an account on the plan may hold (0: no quota;
// an account on a plan missing from the configuration makes no keys, CreateKeyWith).
func (s *Service) KeyQuota(plan string) int {
	p, _ := s.Config.Plan(plan)
	return p.MaxKeys
}

// checkRPM resolves a requested RPM cap (negative: the plan's default) against the plan's
// maximum.
func (s *Service) checkRPM(plan string, rpm int) (int, error) {
	if rpm > math.MaxInt32 {
		return 0, invalid("rpm", "the requests-per-minute cap is at most %d", math.MaxInt32)
	}
	p, ok := s.Config.Plan(plan)
	if rpm < 0 {
		if !ok {
			return 0, nil
		}
		return p.DefaultRPM, nil
	}
	if ok && p.MaxRPM > 0 && (rpm == 0 || rpm > p.MaxRPM) {
		return 0, invalid("rpm", "the plan %s allows keys at most %d requests a minute", plan, p.MaxRPM)
	}
	return rpm, nil
}

// MaxKeyNameLength is the most characters a key's name has.
const MaxKeyNameLength = 100

// checkKeyName refuses a name that is longer than MaxKeyNameLength characters, is not UTF-8, or
// holds a control character or a bidirectional control: a name is shown on the console's pages,
// in audit entries and in the operator's terminal (admin key list), where such characters would
// reorder what is shown around it (a key's prefix read backwards) or drive the terminal.
func checkKeyName(name string) error {
	if !utf8.ValidString(name) {
		return invalid("name", "the name is not valid UTF-8 text")
	}
	if n := utf8.RuneCountInString(name); n > MaxKeyNameLength {
		return invalid("name", "the name is %d characters long; it may be at most %d", n, MaxKeyNameLength)
	}
	if r, found := plaintext.Hidden(name); found {
		return invalid("name", "the name holds the character U+%04X, which does not show as itself: use printable text", r)
	}
	return nil
}

// checkCapAndModels checks a credit cap, its period and a model subset (which must name models
// the account has, at least one; nil means every model), and returns the period and the subset
// sorted without repeats.
func (s *Service) checkCapAndModels(ctx context.Context, accountID uuid.UUID, capMicros *int64, period store.CapPeriod, models []string) (store.CapPeriod, []string, error) {
	p, err := store.ParseCapPeriod(string(period))
	if err != nil {
		return "", nil, invalid("cap_period", "the cap period %q is not none, daily or monthly", period)
	}
	if capMicros != nil && *capMicros < 0 {
		return "", nil, invalid("credit_cap", "a credit cap cannot be negative")
	}
	if capMicros == nil && p != store.CapPeriodNone {
		return "", nil, invalid("cap_period", "a cap period needs a credit cap")
	}
	if models == nil {
		return p, nil, nil
	}
	if len(models) == 0 {
		return "", nil, invalid("models", "a model subset needs at least one model (leave it out for every model of the account)")
	}
	grants, err := s.Store.AccountModels(ctx, accountID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", nil, err
	}
	has := make(map[string]bool, len(grants))
	for _, g := range grants {
		has[g.ModelID] = true
	}
	out := slices.Clone(models)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, m := range out {
		if !has[m] {
			return "", nil, invalid("models", "the account has no model %q", m)
		}
	}
	return p, out, nil
}

// ListKeys returns the account's keys, oldest first, revoked ones included, each with its
// status, its spend in its current cap period and its last use (both from the usage records).
func (s *Service) ListKeys(ctx context.Context, accountID uuid.UUID) ([]KeyInfo, error) {
	now := s.now()
	keys, err := s.Store.ListAPIKeysWithSpend(ctx, accountID, now)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = KeyInfo{KeyWithSpend: k, Status: KeyStatus(k.APIKey, now)}
	}
	return out, nil
}

// Namesakes returns the other keys of k's account that are not revoked and have k's name,
// whatever its letter case, oldest first; a key without a name has none. Names need not be
// unique, since a rotation keeps the old key beside the new one, both named ci, for a while;
// `tollgate admin key create` and the console's key-created page name the namesakes so that a
// second key made by mistake does not go unseen.
func (s *Service) Namesakes(ctx context.Context, k store.APIKey) ([]store.APIKey, error) {
	if k.Name == "" {
		return nil, nil
	}
	keys, err := s.Store.ListAPIKeys(ctx, k.AccountID)
	if err != nil {
		return nil, err
	}
	var others []store.APIKey
	for _, o := range keys {
		if o.ID != k.ID && o.RevokedAt == nil && strings.EqualFold(o.Name, k.Name) {
			others = append(others, o)
		}
	}
	return others, nil
}

// GetKey returns the account's key with id; another account's is store.ErrNotFound.
func (s *Service) GetKey(ctx context.Context, accountID, keyID uuid.UUID) (store.APIKey, error) {
	return s.Store.GetAccountAPIKey(ctx, accountID, keyID)
}

// Revoke revokes the account's key for ever; every gateway refuses it within a second. Another
// account's key, or one revoked already, is store.ErrNotFound. With Agents, the live agent
// sessions started with the key end with it (key_revoked).
func (s *Service) Revoke(ctx context.Context, accountID, keyID uuid.UUID) (store.APIKey, error) {
	return s.Store.RevokeAccountAPIKey(ctx, accountID, keyID, s.endSessions(ctx, accountID))
}

// RevokeAll revokes every key of the account and returns them. With Agents, the live agent
// sessions started with them end with them (key_revoked).
func (s *Service) RevokeAll(ctx context.Context, accountID uuid.UUID) ([]store.APIKey, error) {
	return s.Store.RevokeAccountAPIKeys(ctx, accountID, s.endSessions(ctx, accountID))
}

// endSessions is what ends the sessions started with revoked keys of the account in the
// transaction of their revocation (nil without Agents).
func (s *Service) endSessions(ctx context.Context, accountID uuid.UUID) func(tx *store.AgentTx, keys []uuid.UUID) error {
	if s.Agents == nil {
		return nil
	}
	return func(tx *store.AgentTx, keys []uuid.UUID) error {
		return s.Agents.EndKeySessions(ctx, tx, accountID, keys)
	}
}

// Disable stops the account's key until Enable; every gateway refuses it within a second with
// 401 "the key is disabled". Another account's key, or a revoked one, is store.ErrNotFound.
// With Agents, the live agent sessions started with the key end with it (key_disabled), in
// the same transaction: enabling the key again lets it start new ones, it revives none.
func (s *Service) Disable(ctx context.Context, accountID, keyID uuid.UUID) (store.APIKey, error) {
	var then func(tx *store.AgentTx, keys []uuid.UUID) error
	if s.Agents != nil {
		then = func(tx *store.AgentTx, keys []uuid.UUID) error {
			return s.Agents.EndDisabledKeySessions(ctx, tx, accountID, keys)
		}
	}
	return s.Store.SetAPIKeyDisabled(ctx, accountID, keyID, true, then)
}

// Enable lets a disabled key of the account work again.
func (s *Service) Enable(ctx context.Context, accountID, keyID uuid.UUID) (store.APIKey, error) {
	return s.Store.SetAPIKeyDisabled(ctx, accountID, keyID, false, nil)
}

// SetLimits sets every limit of the account's key at once (l.RPMLimit as KeyOptions.RPM, but
// not negative), checked as at creation (the RPM cap when it changes); an expiry must be in the future unless it is the key's
// current one. Every gateway applies the new limits within a second. Another account's key, or
// a revoked one, is store.ErrNotFound.
func (s *Service) SetLimits(ctx context.Context, accountID, keyID uuid.UUID, l store.KeyLimits) (store.APIKey, error) {
	k, err := s.Store.GetAccountAPIKey(ctx, accountID, keyID)
	if err != nil {
		return store.APIKey{}, err
	}
	acct, err := s.Store.GetAccount(ctx, accountID)
	if err != nil {
		return store.APIKey{}, err
	}
	if l.RPMLimit < 0 {
		return store.APIKey{}, invalid("rpm", "an RPM cap cannot be negative")
	}
	if l.RPMLimit != k.RPMLimit {
		if _, err := s.checkRPM(acct.Plan, l.RPMLimit); err != nil {
			return store.APIKey{}, err
		}
	}
	if l.ExpiresAt != nil && !l.ExpiresAt.After(s.now()) && (k.ExpiresAt == nil || !k.ExpiresAt.Equal(*l.ExpiresAt)) {
		return store.APIKey{}, invalid("expires", "the expiry %s is not in the future", l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if l.CapPeriod, l.Models, err = s.checkCapAndModels(ctx, accountID, l.CreditCapMicros, l.CapPeriod, l.Models); err != nil {
		return store.APIKey{}, err
	}
	return s.Store.SetAPIKeyLimits(ctx, accountID, keyID, l)
}

// LimitsOf are the key's limits as they are, for a change of some of them through SetLimits.
func LimitsOf(k store.APIKey) store.KeyLimits {
	return store.KeyLimits{RPMLimit: k.RPMLimit, ExpiresAt: k.ExpiresAt, CreditCapMicros: k.CreditCapMicros,
		CapPeriod: k.CapPeriod, Models: k.Models}
}

// SetCreditCap sets (capMicros non-nil) or removes the key's credit cap and its period, keeping
// its other limits.
func (s *Service) SetCreditCap(ctx context.Context, accountID, keyID uuid.UUID, capMicros *int64, period store.CapPeriod) (store.APIKey, error) {
	k, err := s.Store.GetAccountAPIKey(ctx, accountID, keyID)
	if err != nil {
		return store.APIKey{}, err
	}
	l := LimitsOf(k)
	l.CreditCapMicros, l.CapPeriod = capMicros, period
	if capMicros == nil {
		l.CapPeriod = store.CapPeriodNone
	}
	return s.SetLimits(ctx, accountID, keyID, l)
}
