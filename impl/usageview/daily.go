package usageview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/plaintext"
)

// GroupBy is what the daily spend is stacked by.
type GroupBy string

// The groupings of the daily spend.
const (
	GroupByModel GroupBy = "model"
	GroupByKey   GroupBy = "key"
)

// MaxDays bounds the days of one daily spend query.
const MaxDays = 366

// DailyQuery asks for an account's spend per day.
type DailyQuery struct {
	// From is the first day and To the day after the last, each a midnight in Location (a
	// time within a day stands for that day's midnight).
	From, To time.Time
	GroupBy  GroupBy
	// Location is the time zone whose midnights divide the days: a named IANA zone (nil: UTC).
	Location *time.Location
	// MaxGroups, when above zero, keeps the MaxGroups-1 groups that cost the most and adds up
	// the rest into one group marked Other, so that a stacked chart stays readable.
	MaxGroups int
}

// LastDays is the query for the n days up to and including now's day in loc (nil: UTC).
func LastDays(n int, now time.Time, loc *time.Location, by GroupBy) DailyQuery {
	if loc == nil {
		loc = time.UTC
	}
	today := midnight(now, loc)
	return DailyQuery{From: today.AddDate(0, 0, 1-n), To: today.AddDate(0, 0, 1), GroupBy: by, Location: loc}
}

// Daily is the spend per day and group of DailyQuery's days.
type Daily struct {
	// Days are the midnights of the days, in Location, oldest first, one per day of the query
	// (days without spend too).
	Days     []time.Time
	Location *time.Location
	GroupBy  GroupBy
	// Groups are the models or keys that had requests, the most costly first; each one's
	// Micros is aligned with Days.
	Groups []Group
	// DayMicros is each day's spend (aligned with Days); TotalMicros and Requests are the
	// whole range's.
	DayMicros   []int64
	TotalMicros int64
	Requests    int64
	// Tokens are the whole range's tokens per kind and what prompt caching saved.
	Tokens Tokens
}

// Tokens are the tokens of a set of requests by the kinds they are priced at, and what prompt
// caching saved them. Requests billed before per-kind prices (migration 0012) count all their
// input as uncached and saved nothing, as they were billed.
type Tokens struct {
	// Input is every input token; Uncached the part neither read from nor written to the
	// provider's prompt cache; CacheRead the part read from it; CacheWrite the part written to
	// it (for five minutes or for an hour).
	Input, Uncached, CacheRead, CacheWrite int64
	// Output is every output token (reasoning included).
	Output int64
	// CacheSavingsMicros is what the cache reads saved against the uncached input price, less
	// what the cache writes cost above it (negative when writing cost more than reading saved).
	CacheSavingsMicros int64
}

// add adds the sums of one row of a daily query.
func (t *Tokens) add(input, cacheRead, cacheWrite, output, savings int64) {
	t.Input += input
	t.CacheRead += cacheRead
	t.CacheWrite += cacheWrite
	t.Uncached += max(input-cacheRead-cacheWrite, 0)
	t.Output += output
	t.CacheSavingsMicros += savings
}

// plus is the sum of t and o.
func (t Tokens) plus(o Tokens) Tokens {
	return Tokens{Input: t.Input + o.Input, Uncached: t.Uncached + o.Uncached, CacheRead: t.CacheRead + o.CacheRead,
		CacheWrite: t.CacheWrite + o.CacheWrite, Output: t.Output + o.Output,
		CacheSavingsMicros: t.CacheSavingsMicros + o.CacheSavingsMicros}
}

// Group is one model's or one key's spend per day.
type Group struct {
	// Key is the model name, or the key id ("" for requests that came with no key, and for
	// Other). Label is what a person reads: the model name, or the key's name and prefix.
	Key   string
	Label string
	// KeyID is the key's id when grouped by key (uuid.Nil: no key).
	KeyID uuid.UUID
	// Other marks the group that adds up the groups beyond MaxGroups.
	Other       bool
	Micros      []int64
	TotalMicros int64
	Requests    int64
	// Tokens are the group's tokens per kind and savings over the whole range.
	Tokens Tokens
}

// DailySpend returns the account's spend per day and model or key over the query's days.
func (s *Service) DailySpend(ctx context.Context, accountID uuid.UUID, q DailyQuery) (Daily, error) {
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	if loc.String() == "Local" {
		return Daily{}, errors.New("usageview: the daily spend needs a named time zone, not Local")
	}
	from, to := midnight(q.From, loc), midnight(q.To, loc)
	days := []time.Time{}
	for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
		if len(days) == MaxDays {
			return Daily{}, fmt.Errorf("usageview: at most %d days at once", MaxDays)
		}
		days = append(days, d)
	}
	out := Daily{Days: days, Location: loc, GroupBy: q.GroupBy, DayMicros: make([]int64, len(days))}
	if len(days) == 0 {
		return out, nil
	}
	index := make(map[[3]int]int, len(days))
	for i, d := range days {
		index[dateOf(d)] = i
	}
	groups := map[string]*Group{}
	add := func(day time.Time, key string, keyID uuid.UUID, r dailySums) {
		i, ok := index[dateOf(day.In(loc))]
		if !ok {
			return
		}
		g := groups[key]
		if g == nil {
			g = &Group{Key: key, Label: key, KeyID: keyID, Micros: make([]int64, len(days))}
			groups[key] = g
		}
		g.Micros[i] += r.CostMicros
		g.TotalMicros += r.CostMicros
		g.Requests += r.Requests
		g.Tokens.add(r.InputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.OutputTokens, r.CacheSavingsMicros)
		out.DayMicros[i] += r.CostMicros
		out.TotalMicros += r.CostMicros
		out.Requests += r.Requests
		out.Tokens.add(r.InputTokens, r.CacheReadTokens, r.CacheWriteTokens, r.OutputTokens, r.CacheSavingsMicros)
	}
	// UTC days come from the daily rollup (usage_daily), which keeps archived months; another
	// time zone's days are added up from the requests themselves, in PostgreSQL and in the
	// archives of the months archived (archivedDaily).
	utc := loc.String() == "UTC"
	switch q.GroupBy {
	case GroupByModel:
		var rows []db.UsageViewDailyByModelRow
		var err error
		if utc {
			var got []db.UsageViewRollupByModelRow
			got, err = s.q.UsageViewRollupByModel(ctx, db.UsageViewRollupByModelParams{AccountID: accountID, FromDay: utcDate(from), ToDay: utcDate(to)})
			for _, r := range got {
				rows = append(rows, db.UsageViewDailyByModelRow(r))
			}
		} else {
			rows, err = s.q.UsageViewDailyByModel(ctx, db.UsageViewDailyByModelParams{
				Tz: loc.String(), AccountID: accountID, FromTime: from, ToTime: to})
		}
		if err != nil {
			return Daily{}, err
		}
		for _, r := range rows {
			add(r.Day, r.GroupKey, uuid.Nil, sumsOfModelRow(r))
		}
		if !utc {
			if err := s.archivedDaily(ctx, accountID, from, to, GroupByModel, func(at time.Time, key string, r dailySums) {
				add(midnight(at, loc), key, uuid.Nil, r)
			}); err != nil {
				return Daily{}, err
			}
		}
	case GroupByKey:
		var rows []db.UsageViewDailyByKeyRow
		var err error
		if utc {
			var got []db.UsageViewRollupByKeyRow
			got, err = s.q.UsageViewRollupByKey(ctx, db.UsageViewRollupByKeyParams{AccountID: accountID, FromDay: utcDate(from), ToDay: utcDate(to)})
			for _, r := range got {
				rows = append(rows, db.UsageViewDailyByKeyRow(r))
			}
		} else {
			rows, err = s.q.UsageViewDailyByKey(ctx, db.UsageViewDailyByKeyParams{
				Tz: loc.String(), AccountID: accountID, FromTime: from, ToTime: to})
		}
		if err != nil {
			return Daily{}, err
		}
		var ids []uuid.UUID
		for _, r := range rows {
			key := ""
			if r.GroupKey != uuid.Nil {
				key = r.GroupKey.String()
				if groups[key] == nil {
					ids = append(ids, r.GroupKey)
				}
			}
			add(r.Day, key, r.GroupKey, sumsOfKeyRow(r))
		}
		if !utc {
			if err := s.archivedDaily(ctx, accountID, from, to, GroupByKey, func(at time.Time, key string, r dailySums) {
				id := uuid.Nil
				if key != "" {
					id = uuid.MustParse(key)
					if groups[key] == nil {
						ids = append(ids, id)
					}
				}
				add(midnight(at, loc), key, id, r)
			}); err != nil {
				return Daily{}, err
			}
		}
		if err := s.labelKeys(ctx, accountID, ids, groups); err != nil {
			return Daily{}, err
		}
	default:
		return Daily{}, fmt.Errorf("usageview: unknown grouping %q", q.GroupBy)
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b Group) int {
		if c := cmp.Compare(b.TotalMicros, a.TotalMicros); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if q.MaxGroups > 0 && len(out.Groups) > q.MaxGroups {
		other := Group{Other: true, Micros: make([]int64, len(days))}
		for _, g := range out.Groups[q.MaxGroups-1:] {
			for i, m := range g.Micros {
				other.Micros[i] += m
			}
			other.TotalMicros += g.TotalMicros
			other.Requests += g.Requests
			other.Tokens = other.Tokens.plus(g.Tokens)
		}
		other.Label = fmt.Sprintf("%d others", len(out.Groups)-(q.MaxGroups-1))
		out.Groups = append(out.Groups[:q.MaxGroups-1:q.MaxGroups-1], other)
	}
	return out, nil
}

// dailySums are the sums of one row of a daily query (per day and model, or per day and key).
type dailySums struct {
	CostMicros, Requests                                         int64
	InputTokens, CacheReadTokens, CacheWriteTokens, OutputTokens int64
	CacheSavingsMicros                                           int64
}

// sumsOfModelRow is the sums of a row per day and model.
func sumsOfModelRow(r db.UsageViewDailyByModelRow) dailySums {
	return dailySums{CostMicros: r.CostMicros, Requests: r.Requests, InputTokens: r.InputTokens,
		CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens, OutputTokens: r.OutputTokens,
		CacheSavingsMicros: r.CacheSavingsMicros}
}

// sumsOfKeyRow is the sums of a row per day and key.
func sumsOfKeyRow(r db.UsageViewDailyByKeyRow) dailySums {
	return dailySums{CostMicros: r.CostMicros, Requests: r.Requests, InputTokens: r.InputTokens,
		CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens, OutputTokens: r.OutputTokens,
		CacheSavingsMicros: r.CacheSavingsMicros}
}

// labelKeys sets the labels of the key groups: the key's name and prefix, "no key" for the
// requests that came without one, and the id's first characters for a key that is gone.
func (s *Service) labelKeys(ctx context.Context, accountID uuid.UUID, ids []uuid.UUID, groups map[string]*Group) error {
	if g := groups[""]; g != nil {
		g.Label = "no key"
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.q.UsageViewKeyLabels(ctx, db.UsageViewKeyLabelsParams{AccountID: accountID, Ids: ids})
	if err != nil {
		return err
	}
	for _, id := range ids {
		groups[id.String()].Label = "key " + id.String()[:8]
	}
	for _, r := range rows {
		groups[r.ID.String()].Label = KeyLabel(r.Name, r.DisplayPrefix)
	}
	return nil
}

// KeyLabel is how the page names a key: its name and its prefix ("ci (tgk_ab12…)"), or one of
// them when the other is empty. The name is a tenant's text, shown as itself
// (plaintext.Visible): a bidirectional override in it cannot reverse the prefix beside it.
func KeyLabel(name, prefix string) string {
	name = plaintext.Visible(name, false)
	switch {
	case name == "" && prefix == "":
		return ""
	case name == "":
		return prefix + "…"
	case prefix == "":
		return name
	}
	return name + " (" + prefix + "…)"
}

// KeyLabelLastFour names a key as the Keys page shows it, by its prefix and last four
// characters ("ci (tgk_ab12…wxyz)"); without the last four it is KeyLabel.
func KeyLabelLastFour(name, prefix, lastFour string) string {
	if prefix == "" || lastFour == "" {
		return KeyLabel(name, prefix)
	}
	if name == "" {
		return prefix + "…" + lastFour
	}
	return plaintext.Visible(name, false) + " (" + prefix + "…" + lastFour + ")"
}

// midnight is the start of t's day in loc.
func midnight(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

// utcDate is t's UTC calendar date as a date parameter.
func utcDate(t time.Time) pgtype.Date {
	y, m, d := t.UTC().Date()
	return pgtype.Date{Time: time.Date(y, m, d, 0, 0, 0, 0, time.UTC), Valid: true}
}

// dateOf is t's calendar date in its own location.
func dateOf(t time.Time) [3]int {
	y, m, d := t.Date()
	return [3]int{y, int(m), d}
}
