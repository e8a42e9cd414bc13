package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestNoMembershipNoAccount: a user nobody added sees the "no account" page, and no page.
func TestNoMembershipNoAccount(t *testing.T) {
	e := start(t, nil)
	b := e.browser(t)
	p := b.signIn(e, aliceEmail, alicePass)
	if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "not a member of any account") {
		t.Fatalf("no membership: %d %.300s", p.Status, p.Body)
	}
	if p := b.get("/keys"); p.Status != http.StatusSeeOther || p.Location != e.URL+"/signin/account?next=%2Fkeys" {
		t.Fatalf("GET /keys without an account: %d %s", p.Status, p.Location)
	}
	if p := b.post("/signin/signup", nil); p.Status != http.StatusNotFound {
		t.Fatalf("sign-up while off: %d", p.Status)
	}
}

// TestSelfServiceSignup: with signup_plan set, a user with no account creates one on that
// plan, as its owner.
func TestSelfServiceSignup(t *testing.T) {
	e := start(t, func(w *config.Web) { w.SignupPlan = "demo" })
	b := e.browser(t)
	p := b.signIn(e, aliceEmail, alicePass)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Create my account") {
		t.Fatalf("sign-up offer: %d %.300s", p.Status, p.Body)
	}
	if p := b.post("/signin/signup", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-up: %d %.200s", p.Status, p.Body)
	}
	home := b.get("/")
	if home.Status != http.StatusOK || !strings.Contains(home.Body, "(owner)") || !strings.Contains(home.Body, "$10.00") {
		t.Fatalf("home after sign-up: %d %.400s", home.Status, home.Body)
	}
}

var accountFormRe = regexp.MustCompile(`name="account_id" value="([^"]+)"`)

// TestAccountSwitch: a member of two accounts chooses one, and may switch; a forged account id
// is not found.
func TestAccountSwitch(t *testing.T) {
	e := start(t, nil)
	a := e.account(t, "acme", aliceEmail, "owner")
	g := e.account(t, "globex", aliceEmail, "member")
	other := e.account(t, "initech", bobEmail, "owner")
	b := e.browser(t)
	p := b.signIn(e, aliceEmail, alicePass)
	ids := accountFormRe.FindAllStringSubmatch(p.Body, -1)
	if p.Status != http.StatusOK || len(ids) != 2 {
		t.Fatalf("account choice: %d %d %.300s", p.Status, len(ids), p.Body)
	}
	if r := b.post("/signin/account", url.Values{"account_id": {g.ID.String()}}); r.Status != http.StatusSeeOther {
		t.Fatalf("choose globex: %d", r.Status)
	}
	if h := b.get("/"); !strings.Contains(h.Body, "globex (member)") {
		t.Fatalf("home: %.300s", h.Body)
	}
	if r := b.post("/signin/account", url.Values{"account_id": {other.ID.String()}}); r.Status != http.StatusNotFound {
		t.Fatalf("choose another's account: %d", r.Status)
	}
	b.post("/signin/account", url.Values{"account_id": {a.ID.String()}})
	if h := b.get("/"); !strings.Contains(h.Body, "acme (owner)") {
		t.Fatalf("home after switch: %.300s", h.Body)
	}
	// A membership removed takes effect at the next request.
	agents, err := agent.New(agent.Options{Store: e.Store, Config: e.Config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := members.New(e.Store, agents).Remove(context.Background(), a.ID, aliceEmail, false); err != nil {
		t.Fatal(err)
	}
	if r := b.get("/keys"); r.Status != http.StatusSeeOther || r.Location != e.URL+"/signin/account?next=%2Fkeys" {
		t.Fatalf("after removal: %d %s", r.Status, r.Location)
	}
}

// TestSwitchAccountLink: "Switch account" is offered to a member of several accounts only; a
// user with one account does not see it, and sees it once a second membership is added.
func TestSwitchAccountLink(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	b := e.browser(t)
	if p := b.signIn(e, aliceEmail, alicePass); p.Status != http.StatusOK || strings.Contains(p.Body, "Switch account") {
		t.Fatalf("one account: %d, the link shown: %v", p.Status, strings.Contains(p.Body, "Switch account"))
	}
	e.account(t, "globex", aliceEmail, "member")
	if p := b.get("/"); p.Status != http.StatusOK || !strings.Contains(p.Body, `<a href="/signin/account">Switch account</a>`) {
		t.Fatalf("two accounts: %d, the link missing: %.1500s", p.Status, p.Body)
	}
}

// TestSessionsPage: the page lists the user's sessions; ending another one signs that browser
// out; another user's session id is not found.
func TestSessionsPage(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	e.account(t, "globex", bobEmail, "owner")
	laptop, phone, bob := e.browser(t), e.browser(t), e.browser(t)
	laptop.signIn(e, aliceEmail, alicePass)
	phone.signIn(e, aliceEmail, alicePass)
	bob.signIn(e, bobEmail, bobPass)
	p := laptop.get("/sessions")
	ends := regexp.MustCompile(`action="/sessions/([A-Za-z0-9_-]{22})/end"`).FindAllStringSubmatch(p.Body, -1)
	if len(ends) != 2 || strings.Count(p.Body, "(this session)") != 1 {
		t.Fatalf("sessions page: %d sessions %.600s", len(ends), p.Body)
	}
	// The page names sessions by sealed tokens: web_sessions' ids count every account's
	// sign-ins together, and the plain id (of earlier builds) names no session.
	var bobID, aliceID int64
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT s.id FROM web_sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1`, bobEmail).Scan(&bobID); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.Pool().QueryRow(context.Background(), `SELECT max(s.id) FROM web_sessions s JOIN users u ON u.id = s.user_id WHERE u.email = $1`, aliceEmail).Scan(&aliceID); err != nil {
		t.Fatal(err)
	}
	for _, m := range ends {
		if strings.Contains(m[1], strconv.FormatInt(aliceID, 10)) && aliceID > 9 {
			t.Errorf("session token %s shows an id", m[1])
		}
	}
	if r := laptop.post("/sessions/"+strconv.FormatInt(aliceID, 10)+"/end", nil); r.Status != http.StatusNotFound {
		t.Fatalf("ending a session by its plain id: %d", r.Status)
	}
	if r := laptop.post("/sessions/"+sealedSessionID(t, e, bobID)+"/end", nil); r.Status != http.StatusNotFound {
		t.Fatalf("ending another user's session: %d", r.Status)
	}
	if !signedIn(bob) {
		t.Fatal("bob was signed out")
	}
	// The phone's session is the one not marked current: the first listed is the most recent.
	var phoneID string
	for _, m := range ends {
		if !strings.Contains(p.Body, `action="/sessions/`+m[1]+`/end"><button type="submit">End (signs you out)`) {
			phoneID = m[1]
		}
	}
	if r := laptop.post("/sessions/"+phoneID+"/end", nil); r.Status != http.StatusSeeOther {
		t.Fatalf("end the phone's session: %d", r.Status)
	}
	if signedIn(phone) {
		t.Fatal("the ended session still works")
	}
	if !signedIn(laptop) {
		t.Fatal("the laptop was signed out")
	}
	// End all: every session of the user ends, here and at the provider.
	phone.signIn(e, aliceEmail, alicePass)
	end := laptop.post("/sessions/end-all", nil)
	if end.Status != http.StatusSeeOther || !strings.HasPrefix(end.Location, e.IdP.Issuer()) {
		t.Fatalf("end all: %d %s", end.Status, end.Location)
	}
	laptop.follow(end, func(u string) bool { return strings.HasPrefix(u, e.URL) })
	if signedIn(laptop) || signedIn(phone) {
		t.Fatal("a session outlived end all")
	}
	if !signedIn(bob) {
		t.Fatal("end all ended another user's session")
	}
}
