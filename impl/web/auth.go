package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/addrlimit"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
	"github.com/tollgate/tollgate/impl/web/session"
	"github.com/tollgate/tollgate/impl/web/signin"
)

// Session data keys (besides session.UserIDKey and session.UserAgentKey).
const (
	keySignin    = "signin"     // the sign-in in progress (signin.Request, encoded)
	keyAuthTime  = "auth_time"  // when the provider last authenticated the user (Unix seconds; absent: it did not say)
	keyIDToken   = "id_token"   // the raw ID token, for the logout's id_token_hint
	keyAccountID = "account_id" // the account the user works in
)

// Visitor is who makes a request: nobody (User nil), a signed-in user without an account
// chosen (Account nil), or a member of Account.
type Visitor struct {
	User    *members.User
	Account *members.Membership
	// AuthTime is when the provider last authenticated the user (its auth_time), zero when it
	// did not say: then no sign-in of the session counts as recent (fresh).
	AuthTime time.Time
}

// Owner reports whether the visitor is an owner of the account.
func (v *Visitor) Owner() bool {
	return v != nil && v.Account != nil && v.Account.Role == members.RoleOwner
}

// handlerFunc is a page handler: it gets the request's visitor.
type handlerFunc func(w http.ResponseWriter, r *http.Request, v *Visitor)

// visitor loads the request's visitor from its session.
func (a *App) visitor(r *http.Request) (*Visitor, error) {
	ctx := r.Context()
	v := &Visitor{}
	id, err := uuid.Parse(a.sm.GetString(ctx, session.UserIDKey))
	if err != nil {
		return v, nil
	}
	u, err := a.members.User(ctx, id)
	if errors.Is(err, members.ErrNotFound) {
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	v.User = &u
	if at := a.sm.GetInt64(ctx, keyAuthTime); at != 0 {
		v.AuthTime = time.Unix(at, 0)
	}
	if acct, err := uuid.Parse(a.sm.GetString(ctx, keyAccountID)); err == nil {
		m, err := a.members.Membership(ctx, u.ID, acct)
		switch {
		case errors.Is(err, members.ErrNotFound): // the membership was removed
			a.sm.Remove(ctx, keyAccountID)
		case err != nil:
			return nil, err
		default:
			v.Account = &m
		}
	}
	return v, nil
}

// anyone serves h to every visitor, signed in or not.
func (a *App) anyone(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := a.visitor(r)
		if err != nil {
			a.failInternal(w, r, nil, "load visitor", err)
			return
		}
		h(w, r, v)
	})
}

// signedIn serves h to signed-in users; others are sent to sign in (and back here after).
func (a *App) signedIn(h handlerFunc) http.Handler {
	return a.anyone(func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		if v.User == nil {
			next := ""
			if r.Method == http.MethodGet {
				next = r.URL.RequestURI()
			}
			http.Redirect(w, r, signinURL(false, next), http.StatusSeeOther)
			return
		}
		h(w, r, v)
	})
}

// member serves h to members of an account; a signed-in user without one chooses it first,
// and comes back to the page they asked for (a GET's): an MCP client's authorization request,
// say, which is lost when the person lands on the home page instead. A request that changes
// something must have been made for the account the visitor is in now (postedInShownAccount,
// the one place of that rule): every route of an account goes through here.
func (a *App) member(h handlerFunc) http.Handler {
	return a.signedIn(func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		if v.Account == nil {
			next := ""
			if r.Method == http.MethodGet {
				next = r.URL.RequestURI()
			}
			http.Redirect(w, r, chooseAccountURL(next), http.StatusSeeOther)
			return
		}
		if changesState(r) && !a.postedInShownAccount(w, r, v) {
			return
		}
		h(w, r, v)
	})
}

// owner serves h to owners of the account; members get 403.
func (a *App) owner(h handlerFunc) http.Handler {
	return a.member(func(w http.ResponseWriter, r *http.Request, v *Visitor) {
		if !v.Owner() {
			a.fail(w, r, v, http.StatusForbidden, "Only the account's owners may do this.")
			return
		}
		h(w, r, v)
	})
}

// fresh reports whether the visitor signed in at the provider within reauth_after.
func (a *App) fresh(v *Visitor) bool {
	return v != nil && !v.AuthTime.IsZero() && now().Sub(v.AuthTime) <= a.web.ReauthAfter
}

// signinURL is the application's sign-in path (re-authentication when reauth), returning to
// next (a local path) afterwards.
func signinURL(reauth bool, next string) string {
	q := url.Values{}
	if reauth {
		q.Set("reauth", "1")
	}
	if kept := keptNext(next); kept != "" {
		q.Set("next", kept)
	}
	if len(q) == 0 {
		return "/signin"
	}
	return "/signin?" + q.Encode()
}

// chooseAccountURL is the account choice's path, returning to next (a local path) afterwards.
func chooseAccountURL(next string) string {
	kept := keptNext(next)
	if kept == "" {
		return "/signin/account"
	}
	return "/signin/account?" + url.Values{"next": {kept}}.Encode()
}

// maxNextLength bounds the page a sign-in returns to (next), which the pre-sign-in session
// keeps: a longer one is replaced by nextTooLongPath (the person lands on the home page, which
// says why: keptNext). Trial h11 D11: an
// anonymous /signin?next= of a megabyte stored a megabyte in web_sessions, for two hours.
// 8 KiB, not the 2 KiB it was: the longest page a sign-in (or a re-authentication, or the
// account choice) returns to is an MCP client's authorization request, whose redirect URI
// may have 2 KiB (registration's bound), whose client ID may be the URL of a metadata
// document, and whose state is the client's to choose; at 2 KiB a client with a long state
// (3 KiB) lost its request and waited for ever. Each client address still starts at most
// signinLimit sign-ins, so an anonymous loop stores at most 8 KiB a row, 60 rows a minute.
const maxNextLength = 8192

// signinLimit bounds the sign-ins one client address starts in each process: each keeps a
// pre-sign-in session row (its state, nonce and PKCE verifier) and allows one code exchange at
// the provider with the console's client secret (trial h11 D12: an anonymous loop of /signin
// and /auth/callback drove the provider's token endpoint without limit). Generous, because
// behind a reverse proxy every person shares the proxy's address (impl/addrlimit).
var signinLimit = addrlimit.Rate{Burst: 60, PerMinute: 60}

// localPath reports whether next is a path of this application (never another host: no
// "//host", no backslashes, no scheme), whatever its length (keptNext bounds that).
func localPath(next string) bool {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return false
	}
	u, err := url.Parse(next)
	return err == nil && u.Scheme == "" && u.Host == "" && Owns(u.Path)
}

// nextTooLongPath is the page a sign-in returns to in place of a page of this application
// whose address is longer than maxNextLength: the home page, with a notice saying that the
// page asked for could not be kept (homeNotices). Before, the person landed on the home page
// with nothing saying why (an MCP client's authorization request of more than 8 KiB, say).
const nextTooLongPath = "/?notice=next-too-long"

// keptNext is the page a sign-in, a re-authentication or the account choice returns to when
// asked for next: next when it is a local path (localPath) of at most maxNextLength bytes,
// nextTooLongPath when it is a longer one, and "" (none: the home page, with nothing to say)
// otherwise.
func keptNext(next string) string {
	switch {
	case !localPath(next):
		return ""
	case len(next) > maxNextLength:
		return nextTooLongPath
	}
	return next
}

func (a *App) authRoutes(mux *router) {
	mux.Handle("GET /signin", a.anyone(a.signinStart))
	mux.Handle("GET /auth/callback", a.anyone(a.callback))
	mux.Handle("POST /signout", a.anyone(a.signout))
	mux.Handle("GET /signin/account", a.signedIn(a.chooseAccountPage))
	mux.Handle("POST /signin/account", a.signedIn(a.chooseAccount))
	mux.Handle("POST /signin/signup", a.signedIn(a.signup))
}

// signinStart sends the browser to the provider, keeping the sign-in's state, nonce and PKCE
// verifier in the session.
func (a *App) signinStart(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if ok, wait := a.signins.Take(addrlimit.Key(r.RemoteAddr)); !ok {
		seconds := max(1, int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", strconv.Itoa(seconds))
		a.fail(w, r, v, http.StatusTooManyRequests, "Too many sign-ins from this address. Try again in "+strconv.Itoa(seconds)+" seconds.")
		return
	}
	q := r.URL.Query()
	reauth := q.Get("reauth") == "1"
	next := keptNext(q.Get("next"))
	if v.User != nil && !reauth {
		if next == "" {
			next = "/"
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	hint := ""
	if reauth && v.User != nil {
		// The person signs in again as who they are (trial h6: the provider's form came up
		// empty, with nothing saying why).
		hint = v.User.Email
	}
	req, authURL, err := a.rp.Start(r.Context(), reauth, next, hint)
	if err != nil {
		a.failInternal(w, r, v, "sign-in start", err)
		return
	}
	a.sm.Put(r.Context(), keySignin, req.Encode())
	http.Redirect(w, r, authURL, http.StatusFound)
}

// callback completes a sign-in: the state, the code (with the PKCE verifier) and the ID token
// (signature, issuer, audience, expiry, nonce) are checked; the session token is renewed.
func (a *App) callback(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ctx := r.Context()
	req, ok := signin.DecodeRequest(a.sm.PopString(ctx, keySignin))
	if !ok {
		// The usual newcomer's case of a missing sign-in is not reuse or expiry but a sign-in
		// begun at another host name (127.0.0.1 for localhost), whose cookie this one never got.
		msg := "This sign-in is no longer valid (it was used, or it expired). Sign in again."
		if pub := a.web.PublicURL; pub != "" {
			msg = "This sign-in is no longer valid: it was used, it expired, or it began at another address than " + pub +
				". Sign in again from " + pub + "."
		}
		a.fail(w, r, v, http.StatusBadRequest, msg)
		return
	}
	res, err := a.rp.Finish(ctx, req, r.URL.Query())
	if err != nil {
		if errors.Is(err, signin.ErrNotReauthed) {
			a.refuseReauth(w, r, v, err)
			return
		}
		if errors.Is(err, signin.ErrState) || errors.Is(err, signin.ErrNonce) || errors.Is(err, signin.ErrProvider) {
			a.log.Info("web: sign-in refused", "err", err)
			a.fail(w, r, v, http.StatusBadRequest, "The sign-in failed. Sign in again.")
			return
		}
		a.failInternal(w, r, v, "sign-in", err)
		return
	}
	u, err := a.members.SignIn(ctx, members.Identity{Issuer: res.Issuer, Subject: res.Subject, Email: res.Email,
		EmailVerified: res.EmailVerified, Name: res.Name})
	if err != nil {
		a.failInternal(w, r, v, "sign-in user", err)
		return
	}
	// A new token for the signed-in session (no fixation), and a new absolute deadline.
	keepAccount := ""
	if v.User != nil && v.User.ID == u.ID {
		keepAccount = a.sm.GetString(ctx, keyAccountID)
	}
	if err := a.sm.RenewToken(ctx); err != nil {
		a.failInternal(w, r, v, "renew session", err)
		return
	}
	a.sm.SetDeadline(ctx, now().Add(a.web.SessionAbsoluteTimeout))
	a.sm.Put(ctx, session.UserIDKey, u.ID.String())
	a.sm.Put(ctx, session.UserAgentKey, truncate(r.UserAgent(), 300))
	if res.AuthTime.IsZero() {
		// The provider did not say when the person signed in: the token's issue time is not
		// it (a provider re-issues tokens for its live session), so the sign-in does not
		// count as recent, and the first key or grant goes through a re-authentication.
		a.sm.Remove(ctx, keyAuthTime)
	} else {
		a.sm.Put(ctx, keyAuthTime, res.AuthTime.Unix())
	}
	a.sm.Put(ctx, keyIDToken, res.IDToken)
	a.sm.Remove(ctx, keyAccountID)
	if _, err := a.sessions.DeleteExpired(ctx); err != nil {
		a.log.Warn("web: delete expired sessions", "err", err)
	}
	next := req.Next
	if next == "" {
		next = "/"
	}
	if keepAccount != "" {
		if id, err := uuid.Parse(keepAccount); err == nil {
			if m, err := a.members.Membership(ctx, u.ID, id); err == nil {
				a.enterAccount(r, &u, m, req.Reauth)
				http.Redirect(w, r, next, http.StatusSeeOther)
				return
			}
		}
	}
	ms, err := a.members.Memberships(ctx, u.ID)
	if err != nil {
		a.failInternal(w, r, v, "memberships", err)
		return
	}
	if len(ms) == 1 {
		a.enterAccount(r, &u, ms[0], req.Reauth)
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/signin/account?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
}

// refuseReauth answers a re-authentication the provider did not confirm (err is a
// signin.ErrNotReauthed): nothing was done, the session stays as it was, and the page says
// why and what the operator can change. With signin.ErrNoAuthTime the provider's ID token did
// not say when the person signed in (no auth_time); otherwise it named an earlier sign-in.
func (a *App) refuseReauth(w http.ResponseWriter, r *http.Request, v *Visitor, err error) {
	why := "Creating a key or allowing an app needs a sign-in confirmed just now, so nothing was done. "
	if v.User != nil {
		why = "Creating a key or allowing an app needs a sign-in confirmed just now, so nothing was done; you are still signed in as before. "
	}
	if errors.Is(err, signin.ErrNoAuthTime) {
		a.log.Warn("web: re-authentication refused: the provider's ID token has no auth_time; configure the provider to send it (docs/web.md)",
			"issuer", a.web.Issuer)
		a.fail(w, r, v, http.StatusForbidden, "Your identity provider did not confirm that you signed in again just now: "+
			"its ID token does not say when you signed in (it has no auth_time). "+why+
			"Ask the operator of this gateway to configure the identity provider to send auth_time in its ID tokens.")
		return
	}
	a.log.Warn("web: re-authentication refused: the provider named an earlier sign-in (it ignored max_age=0 and prompt=login)",
		"issuer", a.web.Issuer, "err", err)
	a.fail(w, r, v, http.StatusForbidden, "Your identity provider did not sign you in again: it named an earlier sign-in. "+why+
		"Try again; if this page comes back, ask the operator of this gateway to make the identity provider honour prompt=login and max_age.")
}

// enterAccount makes m the session's account, and audits the sign-in into it.
func (a *App) enterAccount(r *http.Request, u *members.User, m members.Membership, reauth bool) {
	a.sm.Put(r.Context(), keyAccountID, m.AccountID.String())
	after := map[string]any{"role": m.Role, "user_agent": truncate(r.UserAgent(), 300)}
	if reauth {
		after["reauthenticated"] = true
	}
	if err := a.audit.Record(r.Context(), audit.Entry{AccountID: m.AccountID, Actor: actorName(u), ActorUserID: u.ID,
		Action: audit.ActionSignIn, Target: "user " + actorName(u), After: after}); err != nil {
		a.log.Warn("web: audit sign-in", "err", err)
	}
}

func actorName(u *members.User) string {
	if u.Email != "" {
		return u.Email
	}
	return "user " + u.ID.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

type accountChoice struct {
	Memberships []members.Membership
	Next        string
	Signup      string // the sign-up plan, when self-service sign-up is on
	Current     string
}

// chooseAccountPage lists the user's accounts to choose from; with none it says so (and offers
// sign-up when it is on).
func (a *App) chooseAccountPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ms, err := a.members.Memberships(r.Context(), v.User.ID)
	if err != nil {
		a.failInternal(w, r, v, "memberships", err)
		return
	}
	d := accountChoice{Memberships: ms, Signup: a.web.SignupPlan}
	d.Next = keptNext(r.URL.Query().Get("next"))
	if v.Account != nil {
		d.Current = v.Account.AccountID.String()
	}
	if len(ms) == 0 {
		status := http.StatusForbidden
		if d.Signup != "" {
			status = http.StatusOK
		}
		a.render(w, r, v, status, "noaccount", "No account", d)
		return
	}
	a.render(w, r, v, http.StatusOK, "account", "Choose an account", d)
}

func (a *App) chooseAccount(w http.ResponseWriter, r *http.Request, v *Visitor) {
	id, err := uuid.Parse(r.PostFormValue("account_id"))
	if err != nil {
		a.fail(w, r, v, http.StatusNotFound, "There is no such account.")
		return
	}
	m, err := a.members.Membership(r.Context(), v.User.ID, id)
	if errors.Is(err, members.ErrNotFound) {
		a.fail(w, r, v, http.StatusNotFound, "There is no such account.")
		return
	}
	if err != nil {
		a.failInternal(w, r, v, "membership", err)
		return
	}
	a.enterAccount(r, v.User, m, false)
	next := keptNext(r.PostFormValue("next"))
	if next == "" {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signup creates an account on the sign-up plan with the user as its owner (self-service
// sign-up, when configured, for a user with no account yet). A user gets at most one such
// account, however many sign-ups are sent at once (each account gets the plan's starting
// credit): the sign-up is claimed first with one conditional statement (ClaimSignup), and
// only the request that claimed it creates the account; every other one is sent to that
// account. No transaction or lock is held across the request, so the session's save at the
// end of it always finds a connection.
func (a *App) signup(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.web.SignupPlan == "" {
		a.fail(w, r, v, http.StatusNotFound, "Self-service sign-up is off. Ask the operator to add you to an account.")
		return
	}
	ctx := r.Context()
	ms, err := a.members.Memberships(ctx, v.User.ID)
	if err != nil {
		a.failInternal(w, r, v, "memberships", err)
		return
	}
	if len(ms) > 0 {
		http.Redirect(w, r, "/signin/account", http.StatusSeeOther)
		return
	}
	claimed, err := a.store.ClaimSignup(ctx, v.User.ID)
	if err != nil {
		a.failInternal(w, r, v, "sign-up claim", err)
		return
	}
	if !claimed {
		a.signedUpBefore(w, r, v)
		return
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	// The account's name is the e-mail's local part in letters, digits and . _ - (a name must
	// be plain: accounts.CheckAccountName), else "user", and a random suffix.
	base := "user"
	if at := strings.IndexByte(v.User.Email, '@'); at > 0 {
		if plain := strings.Map(func(r rune) rune {
			if r < 128 && (r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return r
			}
			return -1
		}, v.User.Email[:at]); plain != "" {
			base = plain
		}
	}
	acct, err := a.accounts.CreateSignupAccount(ctx, truncate(base, 40)+"-"+hex.EncodeToString(suffix), a.web.SignupPlan, v.User.ID)
	if errors.Is(err, store.ErrSignupMade) {
		// Another sign-up of the user made the account first (this one claimed a stale claim
		// while it ran): the user goes to that account.
		a.signedUpBefore(w, r, v)
		return
	}
	if err != nil {
		// No account was made (its row, its plan's set-up, the user's membership as its owner
		// and its record as the user's sign-up account are one transaction): the claim is given
		// back, so that the user may try again.
		if rerr := a.store.ReleaseSignup(context.WithoutCancel(ctx), v.User.ID); rerr != nil {
			a.log.Error("web: release the sign-up claim", "user", v.User.ID, "err", rerr)
		}
		a.failInternal(w, r, v, "sign-up account", err)
		return
	}
	// The account exists, with its plan's models and credit and the user as its owner, and is
	// the user's sign-up account: the claim stays, so that no second one is made.
	a.enterAccount(r, v.User, members.Membership{AccountID: acct.ID, AccountName: acct.Name, Plan: acct.Plan, Role: members.RoleOwner}, false)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signedUpBefore answers a sign-up of a user whose sign-up was claimed already (by a request
// sent at the same time, or earlier): the user goes to the account it made, or, while it is
// still being made (or when it is gone), to the account choice.
func (a *App) signedUpBefore(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ctx := r.Context()
	id, err := a.store.SignupAccount(ctx, v.User.ID)
	if err != nil {
		a.failInternal(w, r, v, "sign-up account", err)
		return
	}
	if id != uuid.Nil {
		m, err := a.members.Membership(ctx, v.User.ID, id)
		switch {
		case err == nil:
			a.enterAccount(r, v.User, m, false)
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		case !errors.Is(err, members.ErrNotFound):
			a.failInternal(w, r, v, "membership", err)
			return
		}
	}
	http.Redirect(w, r, "/signin/account", http.StatusSeeOther)
}

// signout ends the session here and sends the browser to the provider's end_session_endpoint
// (RP-initiated logout) with the ID token as hint, coming back to the public URL.
func (a *App) signout(w http.ResponseWriter, r *http.Request, v *Visitor) {
	ctx := r.Context()
	idToken := a.sm.GetString(ctx, keyIDToken)
	if err := a.sm.Destroy(ctx); err != nil {
		a.failInternal(w, r, v, "sign out", err)
		return
	}
	target := "/"
	if v.User != nil {
		if u := a.rp.LogoutURL(ctx, idToken, a.web.PublicURL); u != "" {
			target = u
		}
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}
