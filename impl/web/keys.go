package web

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/connect"
)

func (a *App) keysRoutes(mux *router) {
	mux.Handle("GET /keys", a.member(a.keysPage))
	mux.Handle("GET /keys/new", a.member(a.newKeyPage))
	mux.Handle("POST /keys", a.member(a.createKey))
	mux.Handle("POST /keys/revoke-all", a.owner(a.revokeAllKeys))
	// Members may revoke or disable the keys they created; the rest is the owners' (mayStop).
	mux.Handle("POST /keys/{id}/revoke", a.member(a.keyAction(a.revokeKey)))
	mux.Handle("POST /keys/{id}/disable", a.member(a.keyAction(a.disableKey)))
	mux.Handle("POST /keys/{id}/enable", a.member(a.keyAction(a.ownersOnly(a.enableKey))))
	mux.Handle("POST /keys/{id}/limits", a.member(a.keyAction(a.ownersOnly(a.setKeyLimits))))
}

// createdBy reports whether k was created by the visitor: by the creator's user id, kept since
// it was (the person for good, whatever their e-mail becomes at the provider: trial h11 D9),
// else, for a key made before, by created_by's e-mail.
func createdBy(k store.APIKey, v *Visitor) bool {
	if v == nil || v.User == nil {
		return false
	}
	if k.CreatedByUser != uuid.Nil {
		return k.CreatedByUser == v.User.ID
	}
	return k.CreatedBy != "" && k.CreatedBy != "operator" && strings.EqualFold(k.CreatedBy, actorName(v.User))
}

// mayStop reports whether the visitor may revoke or disable k: owners any key of the account,
// members the keys they created themselves. Changing limits and enabling a disabled key are
// the owners' only, so that a member cannot lift a limit an owner set.
func mayStop(k store.APIKey, v *Visitor) bool {
	return v.Owner() || createdBy(k, v)
}

// ownersOnly serves h, a change of a key's limits or status, to owners; a member gets 403.
func (a *App) ownersOnly(h func(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey)) func(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	return func(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
		if !v.Owner() {
			a.fail(w, r, v, http.StatusForbidden, "Only the account's owners may change a key's limits or enable a disabled key.")
			return
		}
		h(w, r, v, k)
	}
}

// refuseOthersKey answers a member's attempt to stop a key someone else created.
func (a *App) refuseOthersKey(w http.ResponseWriter, r *http.Request, v *Visitor) {
	a.fail(w, r, v, http.StatusForbidden, "Members may revoke or disable only the keys they created; ask an owner of the account for this one.")
}

// keyState is what the audit log keeps of a key before and after a change (accounts.AuditState,
// which the admin commands use too).
func keyState(k store.APIKey) map[string]any { return accounts.AuditState(k, now()) }

// keyRow is one key on the Keys page: its LastFour are kept for keys made on the page.
type keyRow struct {
	accounts.KeyInfo
	LastFour string
	MayStop  bool // the visitor may revoke or disable it (see mayStop)
	// Budget is where a capped key stands in its cap period, the figures GET /v1/credits gives
	// the key (keyBudgets); nil for a key without a cap, a revoked one, or without a meter.
	Budget *billing.KeyBudgetReading
}

type keysData struct {
	Keys   []keyRow
	Active int
	// Notice says what the visitor just did (from the redirect's query: keyNotices).
	Notice string
	// Warning says, after a key's limits were changed (?done=limits&key=), that its credit cap
	// is now below what a Claude Code turn holds, as the key-created page says (limitsWarning).
	Warning string
}

// keyNotices are the Keys page's words for the change just made (?done=), as the Approvals and
// Connected apps pages say theirs (trial h6: revoking a key said nothing).
var keyNotices = map[string]string{
	"revoked":     "Revoked: the key is refused everywhere within a second.",
	"revoked-all": "Revoked every key of the account.",
	"status":      "Done: the key's status is changed.",
	"limits":      "Saved: the key's new limits hold from its next request.",
}

// doneQuery is the ?done= of the Keys page after the audited action on the key; a change of
// limits names the key too, for what the page says of its new cap (limitsWarning).
func doneQuery(action string, key uuid.UUID) string {
	switch action {
	case audit.ActionKeyRevoked:
		return "?done=revoked"
	case audit.ActionLimitChanged:
		return "?done=limits&key=" + key.String()
	}
	return "?done=status"
}

func (a *App) keysPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	keys, err := a.accounts.ListKeys(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "list keys", err)
		return
	}
	last, err := a.store.APIKeySuffixes(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "key suffixes", err)
		return
	}
	budgets, err := a.keyBudgets(r.Context(), keys)
	if err != nil {
		a.failInternal(w, r, v, "key budgets", err)
		return
	}
	q := r.URL.Query()
	d := keysData{Notice: keyNotices[q.Get("done")]}
	for i := len(keys) - 1; i >= 0; i-- { // newest first
		if keys[i].Status == "active" {
			d.Active++
		}
		row := keyRow{KeyInfo: keys[i], LastFour: last[keys[i].ID], MayStop: mayStop(keys[i].APIKey, v)}
		if b, ok := budgets[keys[i].ID]; ok {
			row.Budget = &b
		}
		if q.Get("done") == "limits" && q.Get("key") == keys[i].ID.String() && keys[i].Status != "revoked" {
			if d.Warning, err = a.limitsWarning(r.Context(), v.Account.AccountID, keys[i].APIKey); err != nil {
				a.failInternal(w, r, v, "key models", err)
				return
			}
		}
		d.Keys = append(d.Keys, row)
	}
	a.render(w, r, v, http.StatusOK, "keys", "Keys", d)
}

// limitsWarning is what the Keys page says after k's limits were changed when its credit cap
// is now below what one Claude Code turn on its Messages model holds: the key-created page's
// warning (connect.ClaudeCodeCapWarning), naming the key. It is "" when the cap holds a turn,
// the key has none, or it may use no Messages model.
func (a *App) limitsWarning(ctx context.Context, account uuid.UUID, k store.APIKey) (string, error) {
	if k.CreditCapMicros == nil {
		return "", nil
	}
	models := k.Models
	if len(models) == 0 {
		grants, err := a.store.AccountModels(ctx, account)
		if err != nil {
			return "", err
		}
		for _, g := range grants {
			models = append(models, g.ModelID)
		}
	}
	w := connect.ClaudeCodeCapWarning(a.connectTarget("", models, k.CreditCapMicros))
	if w == "" {
		return "", nil
	}
	return "key " + keyLabel(k) + ": " + w, nil
}

// connectTarget is the connect.Target of a key (plain, "" when it is not shown) that may use
// models and has the credit cap capMicros (nil: none): the models its settings name and, for
// Claude Code's, what a turn holds against the cap.
func (a *App) connectTarget(plain string, models []string, capMicros *int64) connect.Target {
	t := connect.Target{BaseURL: strings.TrimSuffix(a.web.PublicURL, "/"), Key: plain}
	t.ChatModel, t.MessagesModel = connect.ChooseModels(a.cfg, models)
	if t.ChatModel != "" {
		// What Codex and opencode are told the model costs and holds.
		t.Chat = a.facts(t.ChatModel)
	}
	if t.MessagesModel != "" {
		// What a turn holds against the key's cap, said beside the settings it would refuse.
		t.Messages, t.CreditCapMicros = a.facts(t.MessagesModel), capMicros
	}
	return t
}

// facts are model id's facts as the exchange holds it today (Options.Models): priced for the
// day, as the meter bills it and GET /v1/models shows it; nil for a model it does not have.
func (a *App) facts(id string) *connect.ModelFacts {
	m, ok := a.models(id)
	if !ok {
		return nil
	}
	return connect.FactsFor(m)
}

// keyBudgets is where each capped key of keys stands in the cap period that holds now: what it
// spent, what its requests in flight reserve and what its cap leaves, read as GET /v1/credits
// reads them for the key (billing.Meter.KeyBudget, the figures its 402 gives), for all of them
// in one read (billing.Meter.KeyBudgets). A key without a cap and a revoked one (whose cap no
// longer matters) have none, and no key has one when the application has no meter.
func (a *App) keyBudgets(ctx context.Context, keys []accounts.KeyInfo) (map[uuid.UUID]billing.KeyBudgetReading, error) {
	var caps []billing.KeyCap
	for _, k := range keys {
		if k.CreditCapMicros != nil && k.Status != "revoked" {
			caps = append(caps, billing.KeyCap{KeyID: k.ID, CapMicros: *k.CreditCapMicros, Period: k.CapPeriod})
		}
	}
	if a.meter == nil || len(caps) == 0 {
		return nil, nil
	}
	return a.meter.KeyBudgets(ctx, caps)
}

// modelChoice is one model of the account on the key form.
type modelChoice struct {
	ID      string
	Checked bool
}

// unreachableModel is a model granted to the account that it cannot call: every upstream of it
// is on Provider, which serves only accounts with an upstream key of their own
// (account_keys: required), and the account has none there. Account is the account's name, for
// the operator's command that sets the key.
type unreachableModel struct {
	ID, Provider, Account string
}

// Command is the operator's command that sets the account's key for the provider, its
// arguments quoted for a shell.
func (m unreachableModel) Command() string {
	return "tollgate admin provider-key set " + connect.ShellWord(m.Account) + " " + connect.ShellWord(m.Provider)
}

// unreachableModels are the account's granted models it cannot call, by id, each with the
// provider whose upstream key of its own it lacks (Options.UnreachableModels; nil without it).
func (a *App) unreachableModels(ctx context.Context, account uuid.UUID) (map[string]string, error) {
	if a.unreachable == nil {
		return nil, nil
	}
	return a.unreachable(ctx, account)
}

// newKeyForm is the key creation form, with what was typed and what was wrong.
type newKeyForm struct {
	// FormID identifies this showing of the form: of every POST of it (a reload of the page
	// that shows the new key, a double click) exactly one creates a key (claimKeyForm).
	FormID                                   string
	Name, RPM, Expires, CreditCap, CapPeriod string
	// Models are the account's models the key may be limited to: those it can call.
	Models []modelChoice
	// Unreachable are the account's other models, not offered, each with why it cannot be
	// called (an upstream key of its own the account lacks).
	Unreachable        []unreachableModel
	DefaultRPM, MaxRPM int
	Error, Field       string
	// created says that this post of the form created its key (createKey).
	created bool
}

func (a *App) keyForm(r *http.Request, v *Visitor) (newKeyForm, error) {
	f := newKeyForm{CapPeriod: string(store.CapPeriodNone)}
	if p, ok := a.cfg.Plan(v.Account.Plan); ok {
		f.DefaultRPM, f.MaxRPM = p.DefaultRPM, p.MaxRPM
	}
	grants, err := a.store.AccountModels(r.Context(), v.Account.AccountID)
	if err != nil {
		return f, err
	}
	unreachable, err := a.unreachableModels(r.Context(), v.Account.AccountID)
	if err != nil {
		return f, err
	}
	for _, g := range grants {
		// A model the account cannot call is not offered: a key limited to it could never be
		// used. A post naming it is still taken (the key may be prepared before the operator
		// sets the account's upstream key), as by the CLI.
		if provider, ok := unreachable[g.ModelID]; ok {
			f.Unreachable = append(f.Unreachable, unreachableModel{ID: g.ModelID, Provider: provider, Account: v.Account.AccountName})
			continue
		}
		f.Models = append(f.Models, modelChoice{ID: g.ModelID})
	}
	return f, nil
}

// freshKeyForm is the creation form for a visitor whose sign-in is recent enough to create a
// key; it has answered the request (sent an older sign-in to re-authenticate, or failed) when
// it returns false.
func (a *App) freshKeyForm(w http.ResponseWriter, r *http.Request, v *Visitor) (newKeyForm, bool) {
	if !a.fresh(v) {
		http.Redirect(w, r, signinURL(true, "/keys/new"), http.StatusSeeOther)
		return newKeyForm{}, false
	}
	f, err := a.keyForm(r, v)
	if err != nil {
		a.failInternal(w, r, v, "key form", err)
		return f, false
	}
	return f, true
}

// newKeyPage shows the form; a sign-in older than reauth_after goes through the provider first.
func (a *App) newKeyPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	f, ok := a.freshKeyForm(w, r, v)
	if !ok {
		return
	}
	f.FormID = rand.Text()
	a.render(w, r, v, http.StatusOK, "keynew", "Create a key", f)
}

// keyFormWait bounds how long a post of a new-key form that another post of it has claimed
// waits for that one to finish: to name the key it created, or to take the claim over when
// it created none.
const keyFormWait = 5 * time.Second

// claimKeyForm claims the new-key form formID of the account for this request, atomically in
// the database (web_key_forms): of any number of posts of one form at once, on any gateway
// process, exactly one gets it (claimed) and creates the key. Another post waits up to
// keyFormWait for the claiming one: when it created a key, that key is returned (sentBefore);
// when it gave the claim back (it created none), this post claims the form in turn; when it is
// still at work, sentBefore is true and the key uuid.Nil. Its error is a dependency failure.
func (a *App) claimKeyForm(r *http.Request, account uuid.UUID, formID string) (claimed bool, key uuid.UUID, sentBefore bool, err error) {
	ctx := r.Context()
	deadline := time.Now().Add(keyFormWait)
	for {
		if claimed, err := a.store.ClaimKeyForm(ctx, account, formID); err != nil || claimed {
			return claimed, uuid.Nil, false, err
		}
		k, held, err := a.store.KeyFormKey(ctx, account, formID)
		switch {
		case err != nil:
			return false, uuid.Nil, false, err
		case !held && time.Now().Before(deadline):
			continue // given back just now: claim it in turn
		case !held:
			return false, uuid.Nil, true, nil
		case k != uuid.Nil:
			return false, k, true, nil
		case !time.Now().Before(deadline):
			return false, uuid.Nil, true, nil
		}
		select {
		case <-ctx.Done():
			return false, uuid.Nil, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// parseUSD reads an amount of dollars ("5", "0.25", ".5") as micros, also as the pages write
// it ("$1,234.50": thousands separated by commas in groups of three). An amount without a digit
// ("$", ".") is not one.
func parseUSD(s string) (int64, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, _ := strings.Cut(s, ".")
	if whole+frac == "" {
		return 0, false
	}
	if whole == "" {
		whole = "0"
	}
	whole, ok := withoutThousands(whole)
	if !ok || len(frac) > 6 || strings.ContainsAny(whole+frac, "+-") {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 1<<40 {
		return 0, false
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt((frac + "000000")[:6], 10, 64); err != nil {
			return 0, false
		}
	}
	return w*1_000_000 + f, true
}

// withoutThousands is whole without the commas that separate its thousands ("1,234,500" is
// "1234500"); a comma elsewhere ("1,23", ",5") is refused.
func withoutThousands(whole string) (string, bool) {
	groups := strings.Split(whole, ",")
	for i, g := range groups[1:] {
		if len(g) != 3 || (i == 0 && (groups[0] == "" || len(groups[0]) > 3)) {
			return "", false
		}
	}
	return strings.Join(groups, ""), true
}

// limitsFromForm reads the limit fields shared by the creation and the limits forms: rpm
// (empty: def), expires (a date: the key stops at 00:00 UTC that day; empty: never),
// credit_cap in dollars with cap_period (empty: no cap), and the models checked (none: all).
func limitsFromForm(r *http.Request, def int) (store.KeyLimits, *accounts.InvalidError) {
	l := store.KeyLimits{RPMLimit: def, CapPeriod: store.CapPeriodNone}
	if s := strings.TrimSpace(r.PostFormValue("rpm")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return l, &accounts.InvalidError{Field: "rpm", Message: "The requests-per-minute cap must be a whole number, 0 or more."}
		}
		l.RPMLimit = n
	}
	if s := strings.TrimSpace(r.PostFormValue("expires")); s != "" {
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return l, &accounts.InvalidError{Field: "expires", Message: "The expiry must be a date (YYYY-MM-DD)."}
		}
		l.ExpiresAt = &t
	}
	if s := strings.TrimSpace(r.PostFormValue("credit_cap")); s != "" {
		m, ok := parseUSD(s)
		if !ok {
			return l, &accounts.InvalidError{Field: "credit_cap", Message: "The credit cap must be an amount of dollars, such as 5 or 2.50."}
		}
		l.CreditCapMicros = &m
		if p := r.PostFormValue("cap_period"); p != "" {
			l.CapPeriod = store.CapPeriod(p)
		}
	}
	if ms := r.PostForm["models"]; len(ms) > 0 {
		l.Models = ms
	}
	return l, nil
}

// createKey mints a key and shows it, once, in this response (never stored, never shown
// again). A stale sign-in creates nothing and is sent to re-authenticate.
func (a *App) createKey(w http.ResponseWriter, r *http.Request, v *Visitor) {
	f, ok := a.freshKeyForm(w, r, v)
	if !ok {
		return
	}
	_ = r.ParseForm()
	// A form sent again (the browser's reload of the page that showed the key, "Continue"
	// on its resubmit question, a double click) creates no second key: the page says which key
	// it made, whose secret was shown once (newcomer trial: a reload made a second active key of
	// the name). The claim is the database's, so that posts at the same instant, which each
	// load the web session before either saves it, cannot both create one.
	f.FormID = r.PostFormValue("form_id")
	if len(f.FormID) > 64 {
		f.FormID = ""
	}
	if f.FormID != "" {
		claimed, id, sentBefore, err := a.claimKeyForm(r, v.Account.AccountID, f.FormID)
		if err != nil {
			a.failInternal(w, r, v, "claim the key form", err)
			return
		}
		if sentBefore {
			what := "a key"
			if id == uuid.Nil {
				a.fail(w, r, v, http.StatusConflict, "This form is being sent already (twice at once: a double click?), and that sending "+
					"is creating the key. No other key is created from it: see the Keys page.")
				return
			}
			if k, err := a.accounts.GetKey(r.Context(), v.Account.AccountID, id); err == nil {
				what = "the key “" + k.Name + "” (" + k.DisplayPrefix + "…), created at " + k.CreatedAt.UTC().Format("15:04 UTC") + ","
			}
			a.fail(w, r, v, http.StatusConflict, "This form was sent already: it created "+what+" whose secret was shown once, then. "+
				"No other key was created. If you did not keep the secret, revoke that key on the Keys page and create another.")
			return
		}
		if claimed {
			// Until the key is recorded, this request holds the form: when it creates none (an
			// invalid field, a failure), the claim is given back for the corrected form.
			defer func() {
				if !f.created {
					if err := a.store.ReleaseKeyForm(context.WithoutCancel(r.Context()), v.Account.AccountID, f.FormID); err != nil {
						a.log.Warn("web: give back the key form's claim", "err", err)
					}
				}
			}()
		}
	}
	f.Name = strings.TrimSpace(r.PostFormValue("name"))
	f.RPM, f.Expires = r.PostFormValue("rpm"), r.PostFormValue("expires")
	f.CreditCap, f.CapPeriod = r.PostFormValue("credit_cap"), r.PostFormValue("cap_period")
	for i := range f.Models {
		for _, m := range r.PostForm["models"] {
			f.Models[i].Checked = f.Models[i].Checked || m == f.Models[i].ID
		}
	}
	refuse := func(e *accounts.InvalidError) {
		f.Error, f.Field = e.Message, e.Field
		a.render(w, r, v, http.StatusUnprocessableEntity, "keynew", "Create a key", f)
	}
	l, bad := limitsFromForm(r, -1)
	if bad != nil {
		refuse(bad)
		return
	}
	k, err := a.accounts.CreateKeyWith(r.Context(), v.Account.AccountID, accounts.KeyOptions{Name: f.Name, RPM: l.RPMLimit,
		ExpiresAt: l.ExpiresAt, CreditCapMicros: l.CreditCapMicros, CapPeriod: l.CapPeriod, Models: l.Models,
		CreatedBy: actorName(v.User), CreatedByUser: v.User.ID})
	var inv *accounts.InvalidError
	if errors.As(err, &inv) {
		refuse(inv)
		return
	}
	if err != nil {
		a.failInternal(w, r, v, "create key", err)
		return
	}
	if err := a.store.SetAPIKeySuffix(r.Context(), v.Account.AccountID, k.Key.ID, k.Plain[len(k.Plain)-4:]); err != nil {
		a.log.Warn("web: keep the key's last four", "err", err) // the key works; the page shows its prefix only
	}
	f.created = true
	if f.FormID != "" {
		if err := a.store.SetKeyFormKey(context.WithoutCancel(r.Context()), v.Account.AccountID, f.FormID, k.Key.ID); err != nil {
			// The claim stays, without its key: a post of the form again is told it is being
			// sent, and still creates nothing.
			a.log.Warn("web: record the key the form created", "err", err)
		}
	}
	a.record(r, v, audit.ActionKeyCreated, "key "+k.Key.ID.String(), nil, keyState(k.Key))
	models := k.Key.Models
	if len(models) == 0 {
		for _, m := range f.Models {
			models = append(models, m.ID)
		}
	}
	t := a.connectTarget(k.Plain, models, k.Key.CreditCapMicros)
	d := keyCreated{Key: k.Key, Plain: k.Plain, Setups: connect.All(t)}
	if namesakes, err := a.accounts.Namesakes(r.Context(), k.Key); err != nil {
		// The key is made and its secret must be shown now: the warning is left out.
		a.log.Warn("web: list the new key's namesakes", "err", err)
	} else {
		d.NamesakeWarning = namesakeWarning(k.Key, namesakes)
	}
	a.render(w, r, v, http.StatusCreated, "keycreated", "Key created", d)
}

// namesakeWarning is what the key-created page says when other keys of the account that are
// not revoked have the new key k's name (namesakes, accounts.Service.Namesakes), as `tollgate
// admin key create` notes it: which keys, by name, prefix and last four, and the new key's last
// four, by which the Keys page tells them apart. It is "" without namesakes.
func namesakeWarning(k store.APIKey, namesakes []store.APIKey) string {
	if len(namesakes) == 0 {
		return ""
	}
	labels := make([]string, len(namesakes))
	for i, o := range namesakes {
		labels[i] = keyLabel(o) + ", created " + o.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	keys := "1 other key"
	verb := "is"
	if len(namesakes) > 1 {
		keys, verb = fmt.Sprintf("%d other keys", len(namesakes)), "are"
	}
	return fmt.Sprintf("the account has %s named “%s” that %s not revoked: %s. The new key ends …%s. "+
		"The Keys page tells keys of one name apart by their last four. A rotation keeps two keys of a name for a while; "+
		"if this one was made by mistake, revoke one of them on the Keys page.",
		keys, plaintext.Visible(k.Name, false), verb, strings.Join(labels, "; "), k.DisplaySuffix)
}

// keyCreated is the page that shows a new key, once, with the settings of each client filled
// with it and the gateway's public URL (package connect).
type keyCreated struct {
	Key    store.APIKey
	Plain  string
	Setups []connect.Setup
	// NamesakeWarning names the other keys of the account that are not revoked and have the
	// new key's name (namesakeWarning); "" when there are none.
	NamesakeWarning string
}

// keyAction loads the {id} key of the visitor's account for h; any other id is not found.
func (a *App) keyAction(h func(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		id, err := uuid.Parse(r.PathValue("id"))
		if err != nil {
			a.fail(w, r, v, http.StatusNotFound, "There is no such key.")
			return
		}
		k, err := a.accounts.GetKey(r.Context(), v.Account.AccountID, id)
		if errors.Is(err, store.ErrNotFound) {
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

// changed finishes a key change: audited, back to the list; a key revoked meanwhile is not
// found; an invalid limit is shown.
func (a *App) changed(w http.ResponseWriter, r *http.Request, v *Visitor, action string, before, after store.APIKey, err error) {
	var inv *accounts.InvalidError
	switch {
	case errors.As(err, &inv):
		a.fail(w, r, v, http.StatusUnprocessableEntity, inv.Message)
	case errors.Is(err, store.ErrNotFound):
		a.fail(w, r, v, http.StatusNotFound, "There is no such key (or it is revoked).")
	case err != nil:
		a.failInternal(w, r, v, action, err)
	default:
		a.record(r, v, action, "key "+before.ID.String(), keyState(before), keyState(after))
		http.Redirect(w, r, "/keys"+doneQuery(action, before.ID), http.StatusSeeOther)
	}
}

// revokeKey revokes the key once the visitor has confirmed it (confirm.go): the first post
// answers with what revoking it stops.
func (a *App) revokeKey(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	if !mayStop(k, v) {
		a.refuseOthersKey(w, r, v)
		return
	}
	if k.RevokedAt != nil {
		a.fail(w, r, v, http.StatusNotFound, "There is no such key (or it is revoked).")
		return
	}
	label := keyLabel(k)
	c := confirmation{Title: "Revoke key " + keyName(k) + "?", Action: "/keys/" + k.ID.String() + "/revoke",
		Button: "Revoke key " + keyName(k), Back: "/keys", Consequences: []string{
			"Revoking key " + label + " stops every client that uses it, at once: from within a second every gateway " +
				"refuses its requests (401), and the agent sessions it started end before their next model call.",
			lastUsedText(k),
			"A revoked key cannot be brought back: its clients will need a new key.",
		}}
	if k.DisabledAt == nil {
		c.Consequences[2] += " To stop it for a while instead, disable it."
	}
	if !a.confirmed(w, r, v, c) {
		return
	}
	after, err := a.accounts.Revoke(r.Context(), v.Account.AccountID, k.ID)
	a.changed(w, r, v, audit.ActionKeyRevoked, k, after, err)
}

// disableKey disables the key once the visitor has confirmed it, as revokeKey does.
func (a *App) disableKey(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	if !mayStop(k, v) {
		a.refuseOthersKey(w, r, v)
		return
	}
	if k.RevokedAt != nil {
		a.fail(w, r, v, http.StatusNotFound, "There is no such key (or it is revoked).")
		return
	}
	again := "An owner of the account can enable it again on the Keys page; its clients then work again within a second."
	if v.Owner() {
		again = "You can enable it again on the Keys page; its clients then work again within a second."
	}
	if !a.confirmed(w, r, v, confirmation{Title: "Disable key " + keyName(k) + "?", Action: "/keys/" + k.ID.String() + "/disable",
		Button: "Disable key " + keyName(k), Back: "/keys", Consequences: []string{
			"Disabling key " + keyLabel(k) + " stops every client that uses it: from within a second every gateway " +
				"refuses its requests (401), and the agent sessions it started end before their next model call.",
			lastUsedText(k), again,
		}}) {
		return
	}
	after, err := a.accounts.Disable(r.Context(), v.Account.AccountID, k.ID)
	a.changed(w, r, v, audit.ActionKeyChanged, k, after, err)
}

// keyName is the key's name for a sentence or a button: its name in quotes, or its prefix.
func keyName(k store.APIKey) string {
	if k.Name == "" {
		return k.DisplayPrefix + "…"
	}
	return "“" + k.Name + "”"
}

// keyLabel names the key as the Keys page shows it: its name and its prefix…last four.
func keyLabel(k store.APIKey) string {
	shown := k.DisplayPrefix + "…" + k.DisplaySuffix
	if k.Name == "" {
		return shown
	}
	return "“" + plaintext.Visible(k.Name, false) + "” (" + shown + ")"
}

// lastUsedText says when the key was last used.
func lastUsedText(k store.APIKey) string {
	if k.LastUsedAt == nil {
		return "It has not been used yet."
	}
	return "It was last used " + k.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC") + "."
}

func (a *App) enableKey(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	after, err := a.accounts.Enable(r.Context(), v.Account.AccountID, k.ID)
	a.changed(w, r, v, audit.ActionKeyChanged, k, after, err)
}

// setKeyLimits sets the key's RPM cap and credit cap (with its period) from the row's form;
// the expiry and the model subset are kept unless the form sends them (expires, models).
func (a *App) setKeyLimits(w http.ResponseWriter, r *http.Request, v *Visitor, k store.APIKey) {
	_ = r.ParseForm()
	l, bad := limitsFromForm(r, k.RPMLimit)
	if bad != nil {
		a.fail(w, r, v, http.StatusUnprocessableEntity, bad.Message)
		return
	}
	if _, sent := r.PostForm["expires"]; !sent {
		l.ExpiresAt = k.ExpiresAt
	}
	if _, sent := r.PostForm["models"]; !sent {
		l.Models = k.Models
	}
	after, err := a.accounts.SetLimits(r.Context(), v.Account.AccountID, k.ID, l)
	a.changed(w, r, v, audit.ActionLimitChanged, k, after, err)
}

// revokeAllKeys revokes every key of the account that is not revoked yet, once the visitor
// has confirmed it by typing the account's name.
func (a *App) revokeAllKeys(w http.ResponseWriter, r *http.Request, v *Visitor) {
	list, err := a.store.ListAPIKeys(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "list keys", err)
		return
	}
	c := confirmation{Title: "Revoke all keys of " + v.Account.AccountName + "?", Action: "/keys/revoke-all",
		Button: "Revoke all keys of " + v.Account.AccountName, Back: "/keys", TypeToConfirm: v.Account.AccountName}
	for _, k := range list {
		if k.RevokedAt == nil {
			used := "never used"
			if k.LastUsedAt != nil {
				used = "last used " + k.LastUsedAt.UTC().Format("2006-01-02 15:04 UTC")
			}
			c.Items = append(c.Items, keyLabel(k)+": "+accounts.KeyStatus(k, now())+", "+used)
		}
	}
	if len(c.Items) == 0 {
		http.Redirect(w, r, "/keys", http.StatusSeeOther)
		return
	}
	c.Consequences = []string{
		fmt.Sprintf("Revoking all keys of %s stops every client and agent that uses any of its %d keys, at once: from within a second "+
			"every gateway refuses their requests (401), and the agent sessions they started end before their next model call.",
			v.Account.AccountName, len(c.Items)),
		"Revoked keys cannot be brought back: every client will need a new key. The keys:",
	}
	if !a.confirmed(w, r, v, c) {
		return
	}
	keys, err := a.accounts.RevokeAll(r.Context(), v.Account.AccountID)
	if err != nil {
		a.failInternal(w, r, v, "revoke all keys", err)
		return
	}
	for _, k := range keys {
		before := k
		before.RevokedAt = nil
		a.record(r, v, audit.ActionKeyRevoked, "key "+k.ID.String()+" (revoke all)", keyState(before), keyState(k))
	}
	http.Redirect(w, r, "/keys?done=revoked-all", http.StatusSeeOther)
}

// record appends to the account's audit log; a failure is logged (the change is made).
func (a *App) record(r *http.Request, v *Visitor, action, target string, before, after any) {
	if err := a.audit.Record(r.Context(), audit.Entry{AccountID: v.Account.AccountID, Actor: actorName(v.User),
		ActorUserID: v.User.ID, Action: action, Target: target, Before: before, After: after}); err != nil {
		a.log.Warn("web: audit", "action", action, "err", err)
	}
}
