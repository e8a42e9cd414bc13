package web_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/web"
)

// TestAgentTailEndsAtSignOut: a live tail opened by a signed-in visitor sends nothing more and
// ends once the visitor signs out (or the session is ended on the Sessions page): an event
// written after the sign-out wakes the tail, which checks the web session before sending it.
func TestAgentTailEndsAtSignOut(t *testing.T) {
	e := start(t, nil)
	acme := e.account(t, "acme", aliceEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	e.agentEvent(t, acme.ID, sess, 1, "state", map[string]any{"from": "provisioning", "to": "ready"})
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	events, stop := b.tail(t, sess, "")
	defer stop()
	if ev, ok := next(t, events); !ok || ev.ID != "1" {
		t.Fatalf("the tail's first event: %+v %v", ev, ok)
	}
	if p := b.post("/signout", nil); p.Status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.Status)
	}
	e.agentEvent(t, acme.ID, sess, 2, "message_in", map[string]any{"message_id": uuid.NewString(), "text": "after the sign-out"})
	if ev, ok := next(t, events); ok {
		t.Fatalf("the tail of a signed-out visitor sent %+v", ev)
	}
}

// TestStalledTailIsLetGo: a live tail whose browser takes no byte for the tail's write wait
// (here 300 ms; four heartbeats, a minute, in production) is let go: its write fails and the
// connection is closed. Its ten-minute life did not bound it: that is read between writes, and
// the write waited for as long as the browser kept the connection open.
func TestStalledTailIsLetGo(t *testing.T) {
	defer web.SetTailWriteWait(300 * time.Millisecond)()
	e := startServing(t, func(*config.Config) {}, apitest.SmallSendBuffers)
	acme := e.account(t, "acme", aliceEmail, "owner")
	sess := e.agentSession(t, acme.ID, "main")
	for seq := int64(1); seq <= 60; seq++ {
		e.agentEvent(t, acme.ID, sess, seq, "message_in", map[string]any{"message_id": uuid.NewString(), "text": strings.Repeat("x", 4000)})
	}
	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	u, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	var cookies []string
	for _, c := range b.c.Jar.Cookies(u) {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET /agents/%s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nCookie: %s\r\n\r\n", sess, u.Host, strings.Join(cookies, "; "))
	time.Sleep(2 * time.Second) // the browser reads nothing: far past the write wait
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("after %d bytes the tail was still open: the stalled browser was not let go", n)
	}
	if n < 1000 {
		t.Fatalf("the browser read %d bytes: the tail did not start", n)
	}
}
