package web

import (
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/session"
)

// home is the landing page: a sign-in button, or the account's summary.
func (a *App) home(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if v.User == nil {
		a.render(w, r, v, http.StatusOK, "signedout", "Sign in", nil)
		return
	}
	if v.Account == nil {
		http.Redirect(w, r, "/signin/account", http.StatusSeeOther)
		return
	}
	credit, err := a.store.AccountCredit(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "account credit", err)
		return
	}
	a.render(w, r, v, http.StatusOK, "home", v.Account.AccountName, credit)
}

func (a *App) planRoutes(mux *http.ServeMux) { mux.Handle("GET /plan", a.member(a.planPage)) }

type planData struct {
	Plan       config.Plan
	Known      bool
	Models     []store.ModelGrant
	Credit     store.Credit
	ActiveKeys int
	// HeldKeys are the keys that count against the plan's key quota (Plan.MaxKeys, 0: none):
	// every key not revoked.
	HeldKeys int
}

// planPage shows the plan's limits: its models, the default and highest requests-per-minute
// cap of keys, its key quota, its starting credit; and what the account has now (models
// granted, balance, keys held against the quota, active keys).
func (a *App) planPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ctx := r.Context()
	d := planData{}
	d.Plan, d.Known = a.cfg.Plan(v.Account.Plan)
	var err error
	if d.Models, err = a.store.AccountModels(ctx, v.Account.AccountID); err != nil {
		a.failInternal(w, r, v, "account models", err)
		return
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

func (a *App) auditRoutes(mux *http.ServeMux) { mux.Handle("GET /audit", a.member(a.auditPage)) }

type auditData struct {
	Entries []audit.Entry
	Older   int64 // the before= of the next page (0: none)
}

const auditPageSize = 50

func (a *App) auditPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	entries, err := a.audit.List(r.Context(), v.Account.AccountID, max(before, 0), auditPageSize+1)
	if err != nil {
		a.failInternal(w, r, v, "audit log", err)
		return
	}
	d := auditData{Entries: entries}
	if len(entries) > auditPageSize {
		d.Entries = entries[:auditPageSize]
		d.Older = d.Entries[auditPageSize-1].ID
	}
	a.render(w, r, v, http.StatusOK, "audit", "Audit log", d)
}

func (a *App) sessionsRoutes(mux *http.ServeMux) {
	mux.Handle("GET /sessions", a.signedIn(a.sessionsPage))
	mux.Handle("POST /sessions/{id}/end", a.signedIn(a.endSession))
	mux.Handle("POST /sessions/end-all", a.signedIn(a.endAllSessions))
}

func (a *App) sessionsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	list, err := a.sessions.List(r.Context(), v.User.ID, a.sm.Token(r.Context()))
	if err != nil {
		a.failInternal(w, r, v, "list sessions", err)
		return
	}
	a.render(w, r, v, http.StatusOK, "sessions", "Sessions", list)
}

// endSession ends one of the user's sessions (another user's id is not found); ending the
// current one is signing out here.
func (a *App) endSession(w http.ResponseWriter, r *http.Request, v *Visitor) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
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
	ok, err := a.sessions.End(r.Context(), v.User.ID, id)
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

var _ = session.UserIDKey
