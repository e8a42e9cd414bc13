package web_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/web/session"
)

// TestEndedSessionStaysEnded: a request of a session that loaded it just before the session
// was ended (from the Sessions page, or by signing out) saves it when it answers (scs commits
// every request's session, to move its idle deadline). That save must not bring the ended
// session back: whoever holds its cookie (a stolen one, the reason to end it) stays signed out.
func TestEndedSessionStaysEnded(t *testing.T) {
	e := start(t, nil)
	e.account(t, "acme", aliceEmail, "owner")
	laptop, stolen := e.browser(t), e.browser(t)
	laptop.signIn(e, aliceEmail, alicePass)
	stolen.signIn(e, aliceEmail, alicePass)
	ctx := context.Background()
	st := session.New(e.Store, nil)
	token := stolen.cookie()

	// A request of the stolen cookie has loaded the session...
	data, ok, err := st.FindCtx(ctx, token)
	if err != nil || !ok {
		t.Fatalf("the session before it ends: %v %v", ok, err)
	}
	// ...when its owner ends it on the Sessions page...
	var id int64
	if err := e.Store.Pool().QueryRow(ctx, `SELECT id FROM web_sessions WHERE token_hash = $1`, session.Hash(token)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if r := laptop.post("/sessions/"+sealedSessionID(t, e, id)+"/end", nil); r.Status != http.StatusSeeOther {
		t.Fatalf("end the stolen session: %d", r.Status)
	}
	// ...and then saves it as it answers.
	if err := st.CommitCtx(ctx, token, data, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if signedIn(stolen) {
		t.Fatal("an ended session came back: the save of a request in flight re-inserted it")
	}
	// The same for signing out: a request in flight saves the session after it was destroyed.
	laptopToken := laptop.cookie()
	data, ok, err = st.FindCtx(ctx, laptopToken)
	if err != nil || !ok {
		t.Fatalf("the laptop's session: %v %v", ok, err)
	}
	if r := laptop.post("/signout", nil); r.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", r.Status)
	}
	if err := st.CommitCtx(ctx, laptopToken, data, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.FindCtx(ctx, laptopToken); ok {
		t.Fatal("a signed-out session came back: the save of a request in flight re-inserted it")
	}
}
