package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/impl/plaintext"
)

// page is one entry of the navigation. Routes registers the page's handlers (nil: the page is
// not built yet; it shows a "coming soon" placeholder and the navigation marks it pending).
// See doc.go for how to add a page.
type page struct {
	Path   string
	Title  string
	Routes func(a *App, mux *http.ServeMux)
}

// navigation is the navigation, in order. Sign out follows it (a form, not a link).
func navigation() []page {
	return []page{
		{"/keys", "Keys", (*App).keysRoutes},
		{"/usage", "Usage", (*App).usageRoutes},
		{"/plan", "Plan & limits", (*App).planRoutes},
		{"/approvals", "Approvals", (*App).approvalsRoutes},
		{"/agents", "Agents", (*App).agentsRoutes},
		{"/datasets", "Datasets", (*App).datasetsRoutes},
		{"/oauth/grants", "Connected apps", (*App).oauthRoutes},
		{"/audit", "Audit log", (*App).auditRoutes},
		{"/sessions", "Sessions", (*App).sessionsRoutes},
	}
}

// routes registers every route of the application on mux.
func (a *App) routes(mux *http.ServeMux) {
	mux.Handle("GET /{$}", a.anyone(a.home))
	a.authRoutes(mux)
	for _, p := range a.nav {
		if p.Routes != nil {
			p.Routes(a, mux)
			continue
		}
		title := p.Title
		mux.Handle("GET "+p.Path, a.member(func(w http.ResponseWriter, r *http.Request, v *Visitor) {
			a.render(w, r, v, http.StatusOK, "pending", title, nil)
		}))
	}
	mux.Handle("/", a.anyone(a.noSuchPage))
}

// noSuchPage answers a path that no page has: 404, with a link home.
func (a *App) noSuchPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	a.fail(w, r, v, http.StatusNotFound, "There is no such page.")
}

// navItem is a rendered navigation entry.
type navItem struct {
	Path, Title string
	Current     bool
	Pending     bool
}

// view is what the layout renders: the page's own data is in Data.
type view struct {
	Title   string
	Nonce   string
	Visitor *Visitor
	Nav     []navItem
	// SwitchAccount shows "Switch account": the visitor belongs to more than one account.
	SwitchAccount bool
	Data          any
}

var funcs = template.FuncMap{
	// money writes an amount to the cent, with the exact amount in its title (money.go).
	"money": moneyHTML,
	// exact writes an amount to the micro-dollar, for arithmetic a person checks.
	"exact": moneyExact,
	"time": func(t any) string {
		switch t := t.(type) {
		case time.Time:
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		case *time.Time:
			if t == nil || t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		}
		return "—"
	},
	// timeSeconds is time to the second, for events that follow each other within a minute
	// (an agent session's log).
	"timeSeconds": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"datetime": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	// day and clock are the two halves of time, for a narrow column that breaks between them
	// only (the Keys page's reset of a cap period).
	"day":        func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04 UTC") },
	"capPeriods": func() []string { return []string{"none", "daily", "monthly"} },
	"dollars": func(micros int64) string {
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%d.%06d", micros/1_000_000, micros%1_000_000), "0"), ".")
	},
	"add": func(a, b int) int { return a + b },
	// shortID is an id as a person reads it in a list: its first eight characters and "…"
	// (the whole id goes in the link's title).
	"shortID": func(id string) string {
		if len(id) <= 9 {
			return id
		}
		return id[:8] + "…"
	},
	"neg": func(n int64) int64 { return -n },
	// endReason is a session's end reason in words (agents.go).
	"endReason": endReasonText,
	// visible is text a tenant wrote as it shows to someone else: every character that does
	// not show itself (a bidirectional override, a control) as its \u escape.
	"visible": func(s string) string { return plaintext.Visible(s, true) },
	"deref": func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	},
}

// parseTemplates parses layout.html with each page's template: the layout renders the page's
// "content" block. A page template is templates/<name>.html, rendered as <name>.
func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("web: template %s: %w", f, err)
		}
		out[name] = t
	}
	return out, nil
}

// render writes the page tmpl inside the layout, with the status.
func (a *App) render(w http.ResponseWriter, r *http.Request, v *Visitor, status int, tmpl, title string, data any) {
	t, ok := a.pages[tmpl]
	if !ok {
		a.log.Error("web: no such template", "template", tmpl)
		a.unavailable(w)
		return
	}
	vw := view{Title: title, Nonce: cspNonce(r), Visitor: v, Data: data}
	if v != nil && v.Account != nil {
		for _, p := range a.nav {
			vw.Nav = append(vw.Nav, navItem{Path: p.Path, Title: p.Title, Pending: p.Routes == nil,
				Current: r.URL.Path == p.Path || strings.HasPrefix(r.URL.Path, p.Path+"/")})
		}
		vw.SwitchAccount = a.belongsToSeveral(r, v)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", vw); err != nil {
		a.log.Error("web: render", "template", tmpl, "err", err)
		a.unavailable(w)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// belongsToSeveral reports whether the signed-in visitor is a member of more than one account
// (when the memberships cannot be read, the link is shown: the page it leads to says why).
func (a *App) belongsToSeveral(r *http.Request, v *Visitor) bool {
	if v.User == nil {
		return false
	}
	ms, err := a.members.Memberships(r.Context(), v.User.ID)
	if err != nil {
		a.log.Warn("web: memberships for the layout", "err", err)
		return true
	}
	return len(ms) > 1
}

// fail renders a plain error page with status and a message for people (never an internal
// error's text).
func (a *App) fail(w http.ResponseWriter, r *http.Request, v *Visitor, status int, message string) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	a.render(w, r, v, status, "error", http.StatusText(status), message)
}

// postedInShownAccount reports whether a form that creates something (a key, an agent
// session) was sent in the account its page showed: the page writes that account in the
// form's account_id field, and a form shown in one account and sent after the visitor
// switched to another (in another tab) is refused with a page, creating nothing in the account
// the visitor did not see named (as the consent page's decision is). A form without the field
// (a page shown before it was added) is taken as before. what says what was not done. The
// dataset upload, whose form is read as it streams, checks its field as it reads it
// (readUpload) and refuses with refuseSwitchedAccount.
func (a *App) postedInShownAccount(w http.ResponseWriter, r *http.Request, v *Visitor, what string) bool {
	shown, ok := r.PostForm["account_id"]
	if !ok || len(shown) == 1 && shown[0] == v.Account.AccountID.String() {
		return true
	}
	a.refuseSwitchedAccount(w, r, v, what)
	return false
}

// refuseSwitchedAccount is the 409 page of a form shown in one account and sent after the
// visitor switched to another (postedInShownAccount); what says what was not done.
func (a *App) refuseSwitchedAccount(w http.ResponseWriter, r *http.Request, v *Visitor, what string) {
	a.fail(w, r, v, http.StatusConflict, "You switched accounts after this page was shown: "+what+" "+
		"The page now names the account you are in; check it and send the form again.")
}

// failInternal logs err and renders 503 (a dependency failed; the error is not shown).
func (a *App) failInternal(w http.ResponseWriter, r *http.Request, v *Visitor, what string, err error) {
	a.log.Warn("web: "+what, "err", err, "path", r.URL.Path)
	a.fail(w, r, v, http.StatusServiceUnavailable, "Something we depend on did not answer. Try again in a moment.")
}
