package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
)

func (a *App) keysRoutes(mux *http.ServeMux) {
	mux.Handle("GET /keys", a.member(a.keysPage))
	mux.Handle("GET /keys/new", a.member(a.newKeyPage))
	mux.Handle("POST /keys", a.member(a.createKey))
	mux.Handle("POST /keys/revoke-all", a.owner(a.revokeAllKeys))
	mux.Handle("POST /keys/{id}/revoke", a.member(a.keyAction(a.revokeKey)))
	mux.Handle("POST /keys/{id}/rpm", a.member(a.keyAction(a.setKeyRPM)))
}

type keysData struct {
	Keys   []keyRow
	Active int
}

func (a *App) keysPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	keys, err := a.store.ListAPIKeys(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "list keys", err)
		return
	}
	d := keysData{}
	t := now()
	for i := len(keys) - 1; i >= 0; i-- { // newest first
		row := newKeyRow(keys[i], t)
		if row.Status == "active" {
			d.Active++
		}
		d.Keys = append(d.Keys, row)
	}
	a.render(w, r, v, http.StatusOK, "keys", "Keys", d)
}

// newKeyForm is the key creation form, with what was typed and what was wrong.
type newKeyForm struct {
	Name       string
	RPM        string
	DefaultRPM int
	Error      string
}

func (a *App) defaultRPM(plan string) int {
	if p, ok := a.cfg.Plan(plan); ok {
		return p.DefaultRPM
	}
	return 0
}

// newKeyPage shows the form; a sign-in older than reauth_after goes through the provider first.
func (a *App) newKeyPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if !a.fresh(v) {
		http.Redirect(w, r, signinURL(true, "/keys/new"), http.StatusSeeOther)
		return
	}
	a.render(w, r, v, http.StatusOK, "keynew", "Create a key", newKeyForm{DefaultRPM: a.defaultRPM(v.Account.Plan)})
}

// createKey mints a key and shows it, once, in this response (never stored, never shown
// again). A stale sign-in creates nothing and is sent to re-authenticate.
func (a *App) createKey(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if !a.fresh(v) {
		http.Redirect(w, r, signinURL(true, "/keys/new"), http.StatusSeeOther)
		return
	}
	form := newKeyForm{Name: strings.TrimSpace(r.PostFormValue("name")), RPM: strings.TrimSpace(r.PostFormValue("rpm")),
		DefaultRPM: a.defaultRPM(v.Account.Plan)}
	rpm := -1
	if form.RPM != "" {
		n, err := strconv.Atoi(form.RPM)
		if err != nil || n < 0 {
			form.Error = "The requests-per-minute cap must be a whole number, 0 or more."
		}
		rpm = n
	}
	if len(form.Name) > 100 {
		form.Error = "The name is longer than 100 characters."
	}
	if form.Error != "" {
		a.render(w, r, v, http.StatusUnprocessableEntity, "keynew", "Create a key", form)
		return
	}
	k, err := a.accounts.CreateKey(r.Context(), v.Account.AccountID, form.Name, rpm)
	if err != nil {
		a.failInternal(w, r, v, "create key", err)
		return
	}
	a.record(r, v, audit.ActionKeyCreated, "key "+k.Key.ID.String(), nil, keyState(k.Key))
	a.render(w, r, v, http.StatusCreated, "keycreated", "Key created", k)
}

// keyAction loads the {id} key of the visitor's account for h; any other id is not found.
func (a *App) keyAction(h func(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		id, err := uuid.Parse(r.PathValue("id"))
		if err != nil {
			a.fail(w, r, v, http.StatusNotFound, "There is no such key.")
			return
		}
		k, err := a.store.GetAPIKey(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && k.AccountID != v.Account.AccountID) {
			a.fail(w, r, v, http.StatusNotFound, "There is no such key.")
			return
		}
		if err != nil {
			a.failInternal(w, r, v, "get key", err)
			return
		}
		h(w, r, v, k)
	}
}

func (a *App) revokeKey(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	if k.RevokedAt == nil {
		after, err := a.store.RevokeAPIKey(r.Context(), k.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			a.failInternal(w, r, v, "revoke key", err)
			return
		}
		if err == nil {
			a.record(r, v, audit.ActionKeyRevoked, "key "+k.ID.String(), keyState(k), keyState(after))
		}
	}
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}

func (a *App) setKeyRPM(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	n, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("rpm")))
	if err != nil || n < 0 {
		a.fail(w, r, v, http.StatusUnprocessableEntity, "The requests-per-minute cap must be a whole number, 0 or more.")
		return
	}
	after, err := a.store.SetAPIKeyRPMLimit(r.Context(), k.ID, n)
	if err != nil {
		a.failInternal(w, r, v, "set key rpm", err)
		return
	}
	a.record(r, v, audit.ActionKeyChanged, "key "+k.ID.String(), keyState(k), keyState(after))
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}

// revokeAllKeys revokes every key of the account that is not revoked yet.
func (a *App) revokeAllKeys(w http.ResponseWriter, r *http.Request, v *Visitor) {
	keys, err := a.store.ListAPIKeys(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "list keys", err)
		return
	}
	for _, k := range keys {
		if k.RevokedAt != nil {
			continue
		}
		after, err := a.store.RevokeAPIKey(r.Context(), k.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			a.failInternal(w, r, v, "revoke key", err)
			return
		}
		a.record(r, v, audit.ActionKeyRevoked, "key "+k.ID.String(), keyState(k), keyState(after))
	}
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}

// record appends to the account's audit log; a failure is logged (the change is made).
func (a *App) record(r *http.Request, v *Visitor, action, target string, before, after any) {
	if err := a.audit.Record(r.Context(), audit.Entry{AccountID: v.Account.AccountID, Actor: actorName(v.User),
		ActorUserID: v.User.ID, Action: action, Target: target, Before: before, After: after}); err != nil {
		a.log.Warn("web: audit", "action", action, "err", err)
	}
}
