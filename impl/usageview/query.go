package usageview

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/sealedid"
)

// The URL query parameters of the Usage page that ParseLogQuery and ParseDailyQuery read.
const (
	ParamFrom   = "from"   // the first day (YYYY-MM-DD) or an RFC 3339 time
	ParamTo     = "to"     // the last day (YYYY-MM-DD, included) or an RFC 3339 time (excluded)
	ParamModel  = "model"  // a model name
	ParamKey    = "key"    // a key id
	ParamRoute  = "route"  // an API route, e.g. /v1/chat/completions
	ParamStatus = "status" // a usage record's status: ok, client_disconnected, upstream_error, ... (store.UsageRecord.Status)
	ParamAfter  = "after"  // the page cursor
	ParamLimit  = "limit"  // rows per page
	ParamGroup  = "group"  // the chart's grouping: model or key
	ParamDays   = "days"   // the chart's days, up to today
)

// maxTextFilter bounds a model, route or status filter, in bytes.
const maxTextFilter = 200

// DefaultDays is the chart's span when the URL does not say.
const DefaultDays = 30

// Problem is one URL query parameter that could not be read.
type Problem struct {
	Param   string
	Message string
}

// QueryError lists what was wrong with a URL query; its text is fit to show the person who
// wrote it (it quotes no more than the start of a value).
type QueryError struct{ Problems []Problem }

func (e *QueryError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Param + ": " + p.Message
	}
	return strings.Join(parts, "; ")
}

// LogQuery is what a request log URL asks for.
type LogQuery struct {
	Filter Filter
	After  Cursor
	// Limit is the page size (DefaultPageSize when the URL does not say).
	Limit int

	// seal writes the cursors of NextValues.
	seal *sealedid.Seal
}

// ParseLogQuery reads the request log's filter, cursor (sealed with seal) and page size from
// URL query values (the parameters Param...; others are ignored). Days are read in loc (nil: UTC): from=DAY
// starts at that day's midnight, to=DAY ends at the next midnight; RFC 3339 times are taken as
// they are (to excluded). Every parameter that cannot be read is named in the *QueryError.
func ParseLogQuery(v url.Values, loc *time.Location, seal *sealedid.Seal) (LogQuery, error) {
	if loc == nil {
		loc = time.UTC
	}
	q := LogQuery{Limit: DefaultPageSize, seal: seal}
	var probs []Problem
	bad := func(param, format string, args ...any) {
		probs = append(probs, Problem{Param: param, Message: fmt.Sprintf(format, args...)})
	}
	if s := v.Get(ParamFrom); s != "" {
		t, err := parseTime(s, loc, false)
		if err != nil {
			bad(ParamFrom, "%v", err)
		}
		q.Filter.From = t
	}
	if s := v.Get(ParamTo); s != "" {
		t, err := parseTime(s, loc, true)
		if err != nil {
			bad(ParamTo, "%v", err)
		}
		q.Filter.To = t
	}
	if !q.Filter.From.IsZero() && !q.Filter.To.IsZero() && !q.Filter.To.After(q.Filter.From) {
		bad(ParamTo, "must be after %s", ParamFrom)
	}
	for _, p := range []struct {
		param string
		dst   *string
	}{{ParamModel, &q.Filter.Model}, {ParamRoute, &q.Filter.Route}, {ParamStatus, &q.Filter.Status}} {
		s := strings.TrimSpace(v.Get(p.param))
		if err := checkText(s); err != nil {
			bad(p.param, "%v", err)
			continue
		}
		*p.dst = s
	}
	if s := strings.TrimSpace(v.Get(ParamKey)); s != "" {
		id, err := uuid.Parse(s)
		if err != nil || id == uuid.Nil || len(s) != 36 {
			bad(ParamKey, "%s is not a key id", quote(s))
		} else {
			q.Filter.KeyID = id
		}
	}
	if s := v.Get(ParamAfter); s != "" {
		c, err := OpenCursor(seal, s)
		if err != nil {
			bad(ParamAfter, "%s is not a page cursor: start again from the first page", quote(s))
		}
		q.After = c
	}
	if s := v.Get(ParamLimit); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			bad(ParamLimit, "%s is not a whole number from 1 to %d", quote(s), MaxPageSize)
		} else {
			q.Limit = n
		}
	}
	if len(probs) > 0 {
		return LogQuery{}, &QueryError{Problems: probs}
	}
	return q, nil
}

// Values is the query as URL query values (without the cursor): what a link to the same
// filtered log carries. Days read by ParseLogQuery are written back as days.
func (q LogQuery) Values(loc *time.Location) url.Values {
	if loc == nil {
		loc = time.UTC
	}
	v := url.Values{}
	f := q.Filter
	if !f.From.IsZero() {
		v.Set(ParamFrom, formatTime(f.From, loc, false))
	}
	if !f.To.IsZero() {
		v.Set(ParamTo, formatTime(f.To, loc, true))
	}
	for param, s := range map[string]string{ParamModel: f.Model, ParamRoute: f.Route, ParamStatus: f.Status} {
		if s != "" {
			v.Set(param, s)
		}
	}
	if f.KeyID != uuid.Nil {
		v.Set(ParamKey, f.KeyID.String())
	}
	if q.Limit != 0 && q.Limit != DefaultPageSize {
		v.Set(ParamLimit, strconv.Itoa(q.Limit))
	}
	return v
}

// NextValues is Values with the cursor of the page after p ("" when p is the last page).
func (q LogQuery) NextValues(loc *time.Location, p Page) url.Values {
	v := q.Values(loc)
	if !p.Next.IsZero() {
		v.Set(ParamAfter, p.Next.Seal(q.seal))
	}
	return v
}

// ParseDailyQuery reads the chart's grouping (group=model|key, default model) and span
// (days=N up to and including today in loc, default DefaultDays, at most MaxDays) from URL
// query values.
func ParseDailyQuery(v url.Values, now time.Time, loc *time.Location) (DailyQuery, error) {
	var probs []Problem
	by := GroupByModel
	switch s := v.Get(ParamGroup); s {
	case "", string(GroupByModel):
	case string(GroupByKey):
		by = GroupByKey
	default:
		probs = append(probs, Problem{ParamGroup, fmt.Sprintf("%s is neither model nor key", quote(s))})
	}
	days := DefaultDays
	if s := v.Get(ParamDays); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDays {
			probs = append(probs, Problem{ParamDays, fmt.Sprintf("%s is not a whole number from 1 to %d", quote(s), MaxDays)})
		} else {
			days = n
		}
	}
	if len(probs) > 0 {
		return DailyQuery{}, &QueryError{Problems: probs}
	}
	return LastDays(days, now, loc, by), nil
}

// parseTime reads a day (its midnight in loc, or the next midnight when end is true) or an
// RFC 3339 time.
func parseTime(s string, loc *time.Location, end bool) (time.Time, error) {
	if d, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1 || t.Year() > 9998 {
		return time.Time{}, fmt.Errorf("%s is neither a day (YYYY-MM-DD) nor a time (RFC 3339, e.g. 2025-01-31T13:00:00Z)", quote(s))
	}
	return t, nil
}

// formatTime writes what parseTime reads back to t.
func formatTime(t time.Time, loc *time.Location, end bool) string {
	l := t.In(loc)
	if l.Hour() == 0 && l.Minute() == 0 && l.Second() == 0 && l.Nanosecond() == 0 {
		if end {
			l = l.AddDate(0, 0, -1)
		}
		return l.Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}

// checkText refuses a filter value that no usage record can hold: too long, not UTF-8, or
// with control characters.
func checkText(s string) error {
	switch {
	case len(s) > maxTextFilter:
		return fmt.Errorf("longer than %d bytes", maxTextFilter)
	case !utf8.ValidString(s):
		return fmt.Errorf("not valid UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		return fmt.Errorf("contains control characters")
	}
	return nil
}

// quote is the start of a value, quoted, for an error message.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40]
		for !utf8.ValidString(s) && len(s) > 0 {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strconv.Quote(s)
}
