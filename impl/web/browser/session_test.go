package browser_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSignIn signs in through the provider's own form, the application on localhost and the
// provider on 127.0.0.1: the browser lands on the account's home page, and the session cookie
// is what a session cookie must be (__Host-, Secure, HttpOnly, SameSite=Lax, Path=/, no
// Domain). The sign-in cookie of the attempt survived the cross-site round trip, or the
// callback would have refused it.
func TestSignIn(t *testing.T) {
	s := start(t)
	p := newTour(t)
	s.signIn(p)
	if got := p.Text("footer"); !strings.Contains(got, alice.Email) {
		t.Errorf("the footer says %q, want it to name %s", got, alice.Email)
	}
	if n := s.IdP.Sessions(alice.Subject); n != 1 {
		t.Errorf("the provider holds %d sessions of alice, want 1", n)
	}
}

// TestSignOut signs out with the "Sign out" button: the browser comes back through the
// provider's end_session endpoint to the signed-out home page; the session is gone here (the
// old cookie, replayed by another client, no longer opens /keys: it is sent to sign in) and at
// the provider (no session of alice is left there).
func TestSignOut(t *testing.T) {
	s := start(t)
	p := newTour(t)
	old := s.signIn(p)
	if status, loc := s.replay(t, "/keys", old); status != http.StatusOK {
		t.Fatalf("the session cookie does not open /keys before signing out: %d %s", status, loc)
	}
	p.at(p.Submit("Sign out"), http.StatusOK, s.URL+"/")
	if got := p.Title(); !strings.HasPrefix(got, "Sign in") {
		t.Errorf("after signing out the home page is titled %q, want the signed-out page", got)
	}
	p.shot("signed-out")
	if c := p.Cookie(s.URL, sessionCookie); c != nil && c.Value == old {
		t.Errorf("the browser still holds the old session cookie")
	}
	status, loc := s.replay(t, "/keys", old)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
		t.Errorf("the old session cookie on /keys: %d %q, want 303 to /signin", status, loc)
	}
	if n := s.IdP.Sessions(alice.Subject); n != 0 {
		t.Errorf("the provider still holds %d sessions of alice after signing out", n)
	}
	// Signing in again asks for the password: the provider's session is gone too.
	p.at(p.Follow("Sign in"), http.StatusOK, s.IdP.Issuer()+"/login")
	p.shot("provider-login-again")
}

// TestSessionsEndTheOther signs alice in from two browsers (two browser contexts, each with
// its own cookies): the Sessions page of the first lists both, the first marked as this
// session; ending the other from it leaves one, and the other browser is signed out (its
// cookie, replayed, no longer opens /keys; its home page asks it to sign in).
func TestSessionsEndTheOther(t *testing.T) {
	s := start(t)
	first, second := newNamedTour(t, "first"), newNamedTour(t, "second")
	s.signIn(first)
	otherCookie := s.signIn(second)

	first.at(first.Follow("Sessions"), http.StatusOK, s.URL+"/sessions")
	first.shot("sessions-two")
	rows := first.Text("tbody")
	if n := strings.Count(rows, "(this session)"); n != 1 {
		t.Fatalf("the Sessions page marks %d sessions as this one, want 1:\n%s", n, rows)
	}
	if n := countRows(t, first); n != 2 {
		t.Fatalf("the Sessions page lists %d sessions, want 2:\n%s", n, rows)
	}

	// The other session's button is "End"; this session's is "End (signs you out)".
	first.at(first.Submit("End"), http.StatusOK, s.URL+"/sessions")
	first.shot("sessions-one")
	if n := countRows(t, first); n != 1 {
		t.Fatalf("after ending the other, the Sessions page lists %d sessions, want 1:\n%s", n, first.Text("tbody"))
	}
	if !strings.Contains(first.Text("tbody"), "(this session)") {
		t.Errorf("the session left is not this one:\n%s", first.Text("tbody"))
	}
	if status, loc := s.replay(t, "/keys", otherCookie); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
		t.Errorf("the ended session's cookie on /keys: %d %q, want 303 to /signin", status, loc)
	}
	second.at(second.Navigate(s.URL+"/"), http.StatusOK, s.URL+"/")
	if got := second.Title(); !strings.HasPrefix(got, "Sign in") {
		t.Errorf("the ended session's browser sees a page titled %q, want the signed-out home page", got)
	}
	second.shot("ended-elsewhere")
	// The first browser is still signed in.
	first.at(first.Navigate(s.URL+"/keys"), http.StatusOK, s.URL+"/keys")
	first.shot("keys-still-signed-in")
}

// countRows counts the rows of the first table body of the page.
func countRows(t *testing.T, p *tour) int {
	t.Helper()
	return strings.Count(p.html(), "<tr") - 1 // less the header row
}
