package web_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// tooLongNotice is what the home page says to a person whose sign-in could not return them to
// the page they asked for.
const tooLongNotice = "The page you asked for could not be kept across the sign-in"

// TestTooLongNextSaysSo: a page whose address is longer than the 8 KiB a sign-in keeps (an MCP
// client's authorization request with a state of several KiB, say) is not kept across the
// sign-in, and the home page the person lands on says so, after a sign-in at the real provider
// from the page itself, after a sign-in begun at /signin?next=, and after the account choice of
// a member of two accounts. A page that fits still comes back, without the notice. Before, the
// person landed on the home page with nothing saying why.
func TestTooLongNextSaysSo(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	globex := e.account(t, "globex", bobEmail, "owner")
	e.account(t, "initech", bobEmail, "member")
	long := "/usage?note=" + strings.Repeat("a", 9000)

	signInFrom := func(b *browser, p page, email, password string) page {
		t.Helper()
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.URL+"/signin") {
			t.Fatalf("want the redirect to the sign-in, got %d %s", p.Status, p.Location)
		}
		begin := b.get(p.Location)
		if begin.Status != http.StatusFound || !strings.HasPrefix(begin.Location, e.IdP.Issuer()) {
			t.Fatalf("the sign-in: %d %s", begin.Status, begin.Location)
		}
		return b.get(b.toCallback(begin.Location, e.IdP.Issuer(), email, password))
	}
	landsOnHomeSaying := func(p page, why string) {
		t.Helper()
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "The account at a glance") || !strings.Contains(html.UnescapeString(p.Body), tooLongNotice) {
			t.Fatalf("%s: %d %s %.300s, want the home page with the notice", why, p.Status, p.Location, p.Body)
		}
	}

	b := e.browser(t)
	landsOnHomeSaying(b.follow(signInFrom(b, b.get(long), aliceEmail, alicePass), nil), "a sign-in from a page of 9 KiB")

	b = e.browser(t)
	begun := page{Status: http.StatusSeeOther, Location: e.URL + "/signin?next=" + url.QueryEscape(long)}
	landsOnHomeSaying(b.follow(signInFrom(b, begun, aliceEmail, alicePass), nil), "a sign-in begun at /signin?next= of 9 KiB")

	b = e.browser(t)
	back := signInFrom(b, b.get(long), bobEmail, bobPass)
	choice := b.get(back.Location)
	m := nextFieldRe.FindStringSubmatch(choice.Body)
	if choice.Status != http.StatusOK || m == nil {
		t.Fatalf("the account choice: %d %s %.300s", choice.Status, back.Location, choice.Body)
	}
	chosen := b.post("/signin/account", url.Values{"account_id": {globex.ID.String()}, "next": {html.UnescapeString(m[1])}})
	landsOnHomeSaying(b.follow(chosen, nil), "the account choice after a sign-in from a page of 9 KiB")

	b = e.browser(t)
	fits := "/usage?note=" + strings.Repeat("a", 4000)
	if p := b.follow(signInFrom(b, b.get(fits), aliceEmail, alicePass), func(u string) bool { return strings.HasPrefix(u, e.URL+"/usage") }); p.Location != e.URL+fits {
		t.Fatalf("a sign-in from a page of 4 KiB returned to %.100s, want the page", p.Location)
	}
	if p := b.get("/"); strings.Contains(html.UnescapeString(p.Body), tooLongNotice) {
		t.Errorf("the home page says the notice without being asked")
	}
}
