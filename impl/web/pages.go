package web

import (
	"bufio"
	"bytes"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/plaintext"
)

// page is one entry of the navigation. Routes registers the page's handlers (nil: the page is
// not built yet; it shows a "coming soon" placeholder and the navigation marks it pending).
// See doc.go for how to add a page.
type page struct {
	Path   string
	Title  string
	Routes func(a *App, mux *router)
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
func (a *App) routes(mux *router) {
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

// router is the console's mux, which remembers the patterns registered on it so that a test
// can list every route from it (TestEveryPostIsBoundToTheShownAccount).
type router struct {
	mux      *http.ServeMux
	patterns []string
}

// Handle registers h for pattern, as http.ServeMux.Handle does.
func (rt *router) Handle(pattern string, h http.Handler) {
	rt.mux.Handle(pattern, h)
	rt.patterns = append(rt.patterns, pattern)
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

// postedInShownAccount is the console's one rule for the account a state-changing request
// acts on (docs/web.md, "Forms bound to the account they were shown in"): every form of a page
// shown in an account carries that account's id (account_id), and a request other than GET or
// HEAD to a route of an account (member, and so owner, runs it before the handler) is served
// only when its form names exactly one account and it is the visitor's current one. One whose
// form names none, several, or another account (the page was shown in one account and the
// visitor switched to another in another tab since) is refused with the 409 page naming both
// accounts, before the handler runs: it acts on nothing and audits nothing. A multipart form
// (the dataset upload, read as it streams) must name it in its first part, which is read from
// the body's beginning without consuming it; a urlencoded form is parsed (r.PostForm).
func (a *App) postedInShownAccount(w http.ResponseWriter, r *http.Request, v *Visitor) bool {
	shown, ok := shownAccount(r)
	if ok && shown == v.Account.AccountID.String() {
		return true
	}
	if isMultipart(r) {
		w.Header().Set("Connection", "close") // the rest of the form is not read
	}
	a.refuseOtherAccount(w, r, v, shown)
	return false
}

// changesState reports whether r may change something: every method but GET and HEAD (the
// console's GET routes only read).
func changesState(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// isMultipart reports whether r's body is a multipart form.
func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// firstPartLimit bounds what is read of a multipart form to find its first part (account_id).
const firstPartLimit = 4096

// shownAccount is the account id r's form names (its account_id field) and whether it names
// exactly one. A multipart form's must be its first part: that part is read from a peek at
// the body's first firstPartLimit bytes, and r.Body is replaced by a reader that still yields
// the whole body to the handler.
func shownAccount(r *http.Request) (string, bool) {
	if !isMultipart(r) {
		if err := r.ParseForm(); err != nil {
			return "", false
		}
		shown := r.PostForm["account_id"]
		if len(shown) != 1 {
			return "", false
		}
		return shown[0], true
	}
	_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	buffered := bufio.NewReaderSize(r.Body, firstPartLimit)
	r.Body = struct {
		io.Reader
		io.Closer
	}{buffered, r.Body}
	// Peek at what has arrived, one more byte at a time at least, until the first part is
	// whole: a refusal does not wait for the rest of the form (the file).
	for n := 1; ; {
		_, peekErr := buffered.Peek(n)                // waits for n bytes (at the body's end, fewer)
		head, _ := buffered.Peek(buffered.Buffered()) // all that has arrived, without waiting
		part, err := multipart.NewReader(bytes.NewReader(head), params["boundary"]).NextPart()
		if err == nil && part.FormName() != "account_id" {
			return "", false
		}
		if err == nil {
			value, err := io.ReadAll(io.LimitReader(part, 256))
			if err == nil {
				return strings.TrimSpace(string(value)), true
			}
		}
		if peekErr != nil || n >= firstPartLimit {
			return "", false
		}
		n = min(len(head)+1, firstPartLimit)
	}
}

// refuseOtherAccount is the 409 page of a state-changing request whose form does not name the
// visitor's current account (postedInShownAccount): it names the account the page was for
// (when the visitor is a member of it) and the one they are working in now.
func (a *App) refuseOtherAccount(w http.ResponseWriter, r *http.Request, v *Visitor, shown string) {
	now := v.Account.AccountName
	was := "another account"
	if shown == "" {
		was = "no account (the form does not say which account it was made for)"
	}
	if id, err := uuid.Parse(shown); err == nil && v.User != nil {
		if m, err := a.members.Membership(r.Context(), v.User.ID, id); err == nil {
			was = m.AccountName
		}
	}
	a.fail(w, r, v, http.StatusConflict, "This page was for "+was+"; you are now working in "+now+
		" (you switched accounts after the page was shown, maybe in another tab). Nothing was done: "+
		"go back and reload the page, which then names the account you are in, and check it before sending the form again.")
}

// failInternal logs err and renders 503 (a dependency failed; the error is not shown).
func (a *App) failInternal(w http.ResponseWriter, r *http.Request, v *Visitor, what string, err error) {
	a.log.Warn("web: "+what, "err", err, "path", r.URL.Path)
	a.fail(w, r, v, http.StatusServiceUnavailable, "Something we depend on did not answer. Try again in a moment.")
}
