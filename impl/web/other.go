package web

import (
	"net/http"
	"slices"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/sealedid"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/usageview"
	"github.com/tollgate/tollgate/impl/web/session"
)

// home is the landing page: a sign-in button, or the account's summary.
func (a *App) home(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if v.User == nil {
		a.render(w, r, v, http.StatusOK, "signedout", "Sign in", nil)
		return
	}
	notice := homeNotices[r.URL.Query().Get("notice")]
	if v.Account == nil {
		to := "/signin/account"
		if notice != "" {
			to = chooseAccountURL(r.URL.RequestURI()) // back here after the choice, to say it
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	d, err := a.homeData(r, v)
	if err != nil {
		a.failInternal(w, r, v, "home page", err)
		return
	}
	d.Notice = notice
	a.render(w, r, v, http.StatusOK, "home", v.Account.AccountName, d)
}

// homeNotices are the home page's words for why the visitor is there (?notice=).
var homeNotices = map[string]string{
	// nextTooLongPath: a sign-in asked to return to a page whose address was too long to keep.
	"next-too-long": "The page you asked for could not be kept across the sign-in: its address is longer than " +
		"the 8 KiB a sign-in keeps, so you are on the home page. If an application sent you here to connect it, " +
		"start again from the application.",
}

// homeData is the home page's summary of the account, each part linking to its page: the
// balance, the spend this month (UTC), the keys in use, the approvals waiting for a decision
// and the agents running.
type homeData struct {
	// Notice says why the visitor landed here, when a sign-in could not return them to the
	// page they asked for (homeNotices).
	Notice string
	Credit store.Credit
	// MonthSpent is the spend since MonthStart (the first day of this UTC month), MonthRequests
	// its requests.
	MonthSpent, MonthRequests int64
	MonthStart                time.Time
	// ActiveKeys are the keys that work now; UsedKeys those of them used in the last 24 hours.
	ActiveKeys, UsedKeys int
	// AgentsAvailable says whether the gateway runs agents (the last four fields are zero
	// when it does not).
	AgentsAvailable bool
	// PendingApprovals counts the approvals waiting for a decision (at most approvalsShown:
	// MorePending says there are more).
	PendingApprovals int
	MorePending      bool
	// RunningAgents counts the slots whose session has not ended, of Slots.
	RunningAgents, Slots int
	// FreeSlots counts the slots where a session can start now (Slots less RunningAgents), for
	// which the page offers to start an agent next to creating a key.
	FreeSlots int
}

func (a *App) homeData(r *http.Request, v *Visitor) (homeData, error) {
	ctx, acct := r.Context(), v.Account.AccountID
	var d homeData
	var err error
	if d.Credit, err = a.store.AccountCredit(ctx, acct); err != nil {
		return d, err
	}
	month := usageview.ThisMonth(now(), time.UTC)
	d.MonthStart = month.From
	daily, err := a.usage.DailySpend(ctx, acct, usageview.DailyQuery{From: month.From, To: month.To,
		GroupBy: usageview.GroupByModel, Location: time.UTC, MaxGroups: 1})
	if err != nil {
		return d, err
	}
	d.MonthSpent, d.MonthRequests = daily.TotalMicros, daily.Requests
	keys, err := a.accounts.ListKeys(ctx, acct)
	if err != nil {
		return d, err
	}
	dayAgo := now().Add(-24 * time.Hour)
	for _, k := range keys {
		if k.Status != "active" {
			continue
		}
		d.ActiveKeys++
		if (k.LastRequestAt != nil && k.LastRequestAt.After(dayAgo)) || (k.LastUsedAt != nil && k.LastUsedAt.After(dayAgo)) {
			d.UsedKeys++
		}
	}
	if a.agents == nil {
		return d, nil
	}
	d.AgentsAvailable = true
	pending, err := a.agents.ListApprovals(ctx, &acct, "pending", approvalsShown)
	if err != nil {
		return d, err
	}
	d.PendingApprovals, d.MorePending = len(pending), len(pending) == approvalsShown
	slots, err := a.agents.Overview(ctx, principal(v))
	if err != nil {
		return d, err
	}
	d.Slots = len(slots)
	for _, s := range slots {
		if s.Session != nil && !agent.Ended(s.Session.State) {
			d.RunningAgents++
		}
	}
	d.FreeSlots = d.Slots - d.RunningAgents
	return d, nil
}

func (a *App) planRoutes(mux *router) { mux.Handle("GET /plan", a.member(a.planPage)) }

type planData struct {
	Plan   config.Plan
	Known  bool
	Models []planModel
	// SomeUnreachable says that a model of Models cannot be called: the table then says which.
	SomeUnreachable bool
	Credit          store.Credit
	ActiveKeys      int
	// HeldKeys are the keys that count against the plan's key quota (Plan.MaxKeys, 0: none):
	// every key not revoked.
	HeldKeys int
	// UpstreamKeys are the account's own upstream keys (tollgate admin provider-key set), for
	// an owner only (nil for a member): the provider, the hint and when each was set, never
	// the sealed key.
	UpstreamKeys []upstreamKeyRow
}

// planModel is a model granted to the account, with why it cannot be called when it cannot
// (Unreachable: nil when it can).
type planModel struct {
	store.ModelGrant
	Unreachable *unreachableModel
}

// upstreamKeyRow is one of the account's own upstream keys as the plan page shows it.
type upstreamKeyRow struct {
	Provider string
	// Hint is the key's last four characters after an ellipsis (upstreamkeys.Hint).
	Hint  string
	SetAt time.Time
	// Configured is false for a provider the configuration no longer has (the key is not sent).
	Configured bool
	// Missing says that the account has no key for the provider, which takes only accounts
	// with a key of their own (account_keys: required): its requests there are refused.
	Missing bool
}

// planPage shows the plan's limits: its models, the default and highest requests-per-minute
// cap of keys, its key quota, its starting credit; and what the account has now (models
// granted, each one it cannot call marked with the reason, balance, keys held against the
// quota, active keys), and to an owner the account's own upstream keys (read-only: the
// operator sets them).
func (a *App) planPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ctx := r.Context()
	d := planData{}
	d.Plan, d.Known = a.cfg.Plan(v.Account.Plan)
	grants, err := a.store.AccountModels(ctx, v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "account models", err)
		return
	}
	// A granted model the account cannot call (no upstream key of its own where one is
	// required) is listed, marked with the reason: nothing granted is hidden from the account.
	unreachable, err := a.unreachableModels(ctx, v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "account models reachable", err)
		return
	}
	for _, g := range grants {
		m := planModel{ModelGrant: g}
		if provider, ok := unreachable[g.ModelID]; ok {
			m.Unreachable = &unreachableModel{ID: g.ModelID, Provider: provider, Account: v.Account.AccountName}
			d.SomeUnreachable = true
		}
		d.Models = append(d.Models, m)
	}
	if v.Owner() {
		keys, err := a.store.UpstreamKeys(ctx, v.Account.AccountID)
		if err != nil {
			a.failInternal(w, r, v, "account upstream keys", err)
			return
		}
		for _, k := range keys {
			_, configured := a.cfg.Provider(k.Provider)
			d.UpstreamKeys = append(d.UpstreamKeys, upstreamKeyRow{Provider: k.Provider, Hint: k.Hint, SetAt: k.SetAt, Configured: configured})
		}
		// A provider that serves only accounts with a key of their own is not reached with
		// the operator's key: one the account has none for is listed as missing.
		for _, p := range a.cfg.Providers {
			if p.AccountKeysRequired() && !slices.ContainsFunc(keys, func(k store.UpstreamKey) bool { return k.Provider == p.Name }) {
				d.UpstreamKeys = append(d.UpstreamKeys, upstreamKeyRow{Provider: p.Name, Configured: true, Missing: true})
			}
		}
	}
	if d.Credit, err = a.store.AccountCredit(ctx, v.Account.AccountID); err != nil {
		a.failInternal(w, r, v, "account credit", err)
		return
	}
	keys, err := a.accounts.ListKeys(ctx, v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "list keys", err)
		return
	}
	for _, k := range keys {
		if k.Status == "active" {
			d.ActiveKeys++
		}
		if k.Status != "revoked" {
			d.HeldKeys++
		}
	}
	a.render(w, r, v, http.StatusOK, "plan", "Plan & limits", d)
}

func (a *App) auditRoutes(mux *router) { mux.Handle("GET /audit", a.member(a.auditPage)) }

type auditData struct {
	Entries []auditRow
	Older   string // the before= of the next page, sealed (openAuditCursor; "": none)
}

const auditPageSize = 50

// auditTag is the kind of an audit page's sealed cursor (sealedid.Seal.Tagged): a token
// that opens to any other pair (a session's token, a request log cursor, a forgery) is no page.
const auditTag = 0x7467_6175_6469_7470 // "tgauditp"

// openAuditCursor is the entry id of an audit page's before= ("" is the first page: 0): the id
// sealed (Seal.Tagged with auditTag), since audit_log's ids count every account's entries
// together (plain, two of an account's own pages told how many entries every other account
// made between two of its own); ok is false when the token is not one.
func openAuditCursor(seal *sealedid.Seal, token string) (int64, bool) {
	if token == "" {
		return 0, true
	}
	return seal.OpenTagged(token, auditTag)
}

func (a *App) auditPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	seal, err := a.seals.Seal(r.Context())
	if err != nil {
		a.failInternal(w, r, v, "audit cursor key", err)
		return
	}
	before, ok := openAuditCursor(seal, r.URL.Query().Get("before"))
	if !ok {
		a.fail(w, r, v, http.StatusBadRequest, "This is not a page of the audit log: open the Audit log and follow its Older entries link.")
		return
	}
	entries, err := a.audit.List(r.Context(), v.Account.AccountID, before, auditPageSize+1)
	if err != nil {
		a.failInternal(w, r, v, "audit log", err)
		return
	}
	d := auditData{}
	if len(entries) > auditPageSize {
		entries = entries[:auditPageSize]
		d.Older = seal.Tagged(entries[auditPageSize-1].ID, auditTag)
	}
	if d.Entries, err = a.auditRows(r.Context(), v.Account.AccountID, entries); err != nil {
		a.failInternal(w, r, v, "audit log names", err)
		return
	}
	a.render(w, r, v, http.StatusOK, "audit", "Audit log", d)
}

func (a *App) sessionsRoutes(mux *router) {
	mux.Handle("GET /sessions", a.signedIn(a.sessionsPage))
	mux.Handle("POST /sessions/{id}/end", a.signedIn(a.endSession))
	mux.Handle("POST /sessions/end-all", a.signedIn(a.endAllSessions))
}

// signInRow is one of the visitor's sessions as the Sessions page shows it: the browser
// named as a person names it (browserSummary), the User-Agent header in its title.
type signInRow struct {
	session.Info
	Browser string
	// Token names the session in its End button's URL: its id sealed (Seal.Tagged), since
	// web_sessions' ids count every account's sign-ins together.
	Token string
}

// sessionTag is the kind of a session's sealed token (sealedid.Seal.Tagged): a token that
// opens to any other pair (a page cursor, a forgery) names no session.
const sessionTag = 0x7467_7365_7373_696f // "tgsessio"

func (a *App) sessionsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	seal, err := a.seals.Seal(r.Context())
	if err != nil {
		a.failInternal(w, r, v, "session id key", err)
		return
	}
	list, err := a.sessions.List(r.Context(), v.User.ID, a.sm.Token(r.Context()))
	if err != nil {
		a.failInternal(w, r, v, "list sessions", err)
		return
	}
	rows := make([]signInRow, 0, len(list))
	for _, s := range list {
		rows = append(rows, signInRow{Info: s, Browser: browserSummary(s.UserAgent), Token: seal.Tagged(s.ID, sessionTag)})
	}
	a.render(w, r, v, http.StatusOK, "sessions", "Sessions", rows)
}

// endSession ends one of the user's sessions (another user's id is not found); ending the
// current one is signing out here.
func (a *App) endSession(w http.ResponseWriter, r *http.Request, v *Visitor) {
	seal, err := a.seals.Seal(r.Context())
	if err != nil {
		a.failInternal(w, r, v, "session id key", err)
		return
	}
	id, ok := seal.OpenTagged(r.PathValue("id"), sessionTag)
	if !ok {
		a.fail(w, r, v, http.StatusNotFound, "There is no such session.")
		return
	}
	list, err := a.sessions.List(r.Context(), v.User.ID, a.sm.Token(r.Context()))
	if err != nil {
		a.failInternal(w, r, v, "list sessions", err)
		return
	}
	current := false
	for _, s := range list {
		if s.ID == id && s.Current {
			current = true
		}
	}
	ok, err = a.sessions.End(r.Context(), v.User.ID, id)
	if err != nil {
		a.failInternal(w, r, v, "end session", err)
		return
	}
	if !ok {
		a.fail(w, r, v, http.StatusNotFound, "There is no such session.")
		return
	}
	if current {
		a.signout(w, r, v)
		return
	}
	http.Redirect(w, r, "/sessions", http.StatusSeeOther)
}

// endAllSessions ends every session of the user, this one included, and signs out at the
// provider too.
func (a *App) endAllSessions(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if _, err := a.sessions.EndAll(r.Context(), v.User.ID); err != nil {
		a.failInternal(w, r, v, "end sessions", err)
		return
	}
	a.signout(w, r, v)
}
