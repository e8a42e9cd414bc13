package devoidc

import (
	"html/template"
	"net/http"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// page is the provider's only page layout: the login form, or a short message.
var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — development OpenID provider</title>
<style>
body{font-family:system-ui,sans-serif;max-width:26rem;margin:2rem auto;padding:0 1rem;color:#111}
.banner{background:#ffe08a;border:2px solid #b58100;padding:.6rem .8rem;font-weight:bold}
label{display:block;margin-top:1rem}
input{display:block;width:100%;padding:.4rem;margin-top:.25rem;box-sizing:border-box}
button{margin-top:1.2rem;padding:.5rem 1.2rem}
.error{color:#a00000;font-weight:bold}
</style>
</head>
<body>
<p class="banner" role="note">development provider — not for production</p>
<main>
<h1>{{.Title}}</h1>
{{if .Error}}<p class="error" role="alert" id="login-error">{{.Error}}</p>{{end}}
{{if .RequestID}}
<form method="post" action="/login">
<input type="hidden" name="authRequestID" value="{{.RequestID}}">
<label for="email">E-mail</label>
<input id="email" name="email" type="email" autocomplete="username" required value="{{.Email}}"{{if .Error}} aria-describedby="login-error"{{end}}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
{{else}}<p>{{.Message}}</p>{{end}}
</main>
</body>
</html>
`))

// pageData fills page.
type pageData struct {
	Title, Message, Error, RequestID, Email string
}

// render writes page with the headers every page gets.
func (p *Provider) render(w http.ResponseWriter, status int, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := page.Execute(w, d); err != nil {
		p.log.Warn("devoidc: rendering a page failed", "err", err)
	}
}

// unknownRequest answers a login for an authorization request that does not exist (any
// more): the browser has to start again at the relying party.
func (p *Provider) unknownRequest(w http.ResponseWriter) {
	p.render(w, http.StatusBadRequest, pageData{
		Title:   "Sign-in expired",
		Message: "This sign-in request is unknown or has expired. Go back to the application and sign in again.",
	})
}

// showLogin is where op sends the browser for an authorization request: a provider session
// that is good enough completes the request at once (single sign-on); otherwise the form.
func (p *Provider) showLogin(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("authRequestID")
	req, ok := p.store.pendingRequest(id)
	if !ok || req.done {
		p.unknownRequest(w)
		return
	}
	if c, err := r.Cookie(p.cookie); err == nil {
		if sess, ok := p.store.sessionByCookie(c.Value); ok && (p.ignoreForcedLogin || !req.forcesLogin(sess.authTime, time.Now())) {
			p.finish(w, r, id, sess, http.StatusFound)
			return
		}
	}
	if req.promptNone() {
		op.AuthRequestError(w, r, req, oidc.ErrLoginRequired(), p.op)
		return
	}
	email := req.req.LoginHint
	if email == "" {
		email = p.onlyEmail
	}
	p.render(w, http.StatusOK, pageData{Title: "Sign in", RequestID: id, Email: email})
}

// postLogin checks the form's e-mail and password; on success it starts (or renews) the
// browser's provider session and completes the authorization request, otherwise it shows the
// form again with an error.
func (p *Provider) postLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		p.unknownRequest(w)
		return
	}
	id := r.PostForm.Get("authRequestID")
	req, ok := p.store.pendingRequest(id)
	if !ok || req.done {
		p.unknownRequest(w)
		return
	}
	email := r.PostForm.Get("email")
	user, ok := p.store.checkPassword(email, r.PostForm.Get("password"))
	if !ok {
		p.log.Info("devoidc: sign-in refused", "email", email)
		p.render(w, http.StatusUnauthorized, pageData{
			Title: "Sign in", RequestID: id, Email: email,
			Error: "The e-mail or the password is wrong.",
		})
		return
	}
	var old string
	if c, err := r.Cookie(p.cookie); err == nil {
		old = c.Value
	}
	sess := p.store.signIn(old, user.Subject, time.Now())
	http.SetCookie(w, &http.Cookie{
		Name: p.cookie, Value: sess.token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
	p.log.Info("devoidc: signed in", "subject", user.Subject)
	p.finish(w, r, id, sess, http.StatusSeeOther)
}

// finish marks the authorization request as signed in by sess and sends the browser to op's
// callback, which redirects it to the relying party with the code.
func (p *Provider) finish(w http.ResponseWriter, r *http.Request, id string, sess session, status int) {
	if err := p.store.complete(id, sess); err != nil {
		p.unknownRequest(w)
		return
	}
	http.Redirect(w, r, p.callbackURL(id), status)
}

// loggedOut is where logout lands when the relying party names no post-logout redirect.
func (p *Provider) loggedOut(w http.ResponseWriter, _ *http.Request) {
	p.render(w, http.StatusOK, pageData{Title: "Signed out", Message: "You are signed out of the development provider."})
}
