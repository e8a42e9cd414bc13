package httpapi_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/httpapi"
)

// The trial s16h3 probes of the Responses WebSocket that held (docs/operations.md, Adversarial
// trial s16h3), kept so that they go on holding.

// TestSocketTrialPreviousResponseOfAnotherTenant: a response id of one tenant's socket,
// presented on another tenant's socket (and on a second socket of the same key), is unknown.
func TestSocketTrialPreviousResponseOfAnotherTenant(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	a := g.NewTenant(t, "trial-a", 0, 100_000_000)
	b := g.NewTenant(t, "trial-b", 0, 100_000_000)
	ca, _, err := dialResponses(t, g, a.Key)
	if err != nil {
		t.Fatal(err)
	}
	sendCreate(t, ca, map[string]any{"model": "service-flint", "input": "the secret word is octopus"})
	evs := readResponse(t, ca)
	id := evs[len(evs)-1].Response.ID
	if id == "" {
		t.Fatalf("no id: %v", typesOf(evs))
	}
	for _, key := range []string{b.Key, a.Key} {
		cb, _, err := dialResponses(t, g, key)
		if err != nil {
			t.Fatal(err)
		}
		sendCreate(t, cb, map[string]any{"model": "service-flint", "input": "what was the word?", "previous_response_id": id})
		evs := readResponse(t, cb)
		if evs[0].Type != "error" || evs[0].Error.Code != "previous_response_not_found" {
			t.Errorf("another socket continued %s: %v %s", id, typesOf(evs), evs[0].raw)
		}
	}
}

// TestSocketTrialOutOfCredit: an account without credit gets 402 error events on an open
// socket, and nothing goes upstream.
func TestSocketTrialOutOfCredit(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	poor := g.NewTenant(t, "trial-poor", 0, 0)
	c, _, err := dialResponses(t, g, poor.Key)
	if err != nil {
		t.Fatalf("handshake of a key without credit: %v", err)
	}
	for i := 0; i < 2; i++ {
		sendCreate(t, c, map[string]any{"model": "service-flint", "input": "hi"})
		evs := readResponse(t, c)
		if evs[0].Type != "error" || evs[0].Status != http.StatusPaymentRequired {
			t.Fatalf("without credit: %v %s", typesOf(evs), evs[0].raw)
		}
	}
}

// rawSocket does a WebSocket handshake by hand on a TCP connection, for frames no client
// library sends.
func rawSocket(t *testing.T, g *apitest.Gateway, key string, extra map[string]string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	req := "GET /v1/responses HTTP/1.1\r\nHost: " + strings.TrimPrefix(g.URL, "http://") + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(nonce) + "\r\nAuthorization: Bearer " + key + "\r\n"
	for k, v := range extra {
		req += k + ": " + v + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("handshake: %d %s", res.StatusCode, b)
	}
	return conn, br
}

// frame is one masked client frame.
func frame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n < 1<<16:
		out = append(out, 0x80|126, byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	mask := []byte{1, 2, 3, 4}
	out = append(out, mask...)
	for i, c := range payload {
		out = append(out, c^mask[i%4])
	}
	return out
}

// TestSocketTrialEmptyFragmentsDoNotHoldTheSocket: a message begun and then continued only by
// empty continuation frames and pings, sent without pause, is cut off at the stall bound: the
// frames carry no bytes of the message.
func TestSocketTrialEmptyFragmentsDoNotHoldTheSocket(t *testing.T) {
	defer httpapi.SetResponsesSocketStall(500 * time.Millisecond)()
	defer httpapi.SetResponsesSocketIdle(time.Hour)()
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "trial-frag", 0, 100_000_000)
	conn, br := rawSocket(t, g, tenant.Key, nil)
	if _, err := conn.Write(frame(false, 1, []byte("{"))); err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_, _ = io.Copy(io.Discard, br)
		closed <- time.Since(start)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		var f []byte
		if i%2 == 0 {
			f = frame(false, 0, nil)
		} else {
			f = frame(true, 9, []byte("p"))
		}
		if _, err := conn.Write(f); err != nil {
			break
		}
		select {
		case d := <-closed:
			if d > 5*time.Second {
				t.Errorf("held for %v", d)
			}
			return
		default:
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case d := <-closed:
		if d > 5*time.Second {
			t.Errorf("held for %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message of empty fragments held the socket for 10 s")
	}
}

// TestSocketTrialPingsDoNotKeepAnIdleSocket: a socket that only pings is closed as idle.
func TestSocketTrialPingsDoNotKeepAnIdleSocket(t *testing.T) {
	defer httpapi.SetResponsesSocketIdle(500 * time.Millisecond)()
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "trial-ping", 0, 100_000_000)
	c, _, err := dialResponses(t, g, tenant.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	readErr := make(chan error, 1)
	go func() {
		_, _, err := c.Read(ctx)
		readErr <- err
	}()
	start := time.Now()
	for {
		select {
		case err := <-readErr:
			if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
				t.Fatalf("read: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("closed after %v", d)
			}
			return
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_ = c.Ping(pctx)
		pcancel()
		time.Sleep(50 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("pings kept the socket open")
		}
	}
}

// TestSocketTrialOrigins: the handshake's Origin of another site, or "null" (a sandboxed page or
// a file), is refused; the gateway's own origin and no origin (a CLI) are served.
func TestSocketTrialOrigins(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "trial-origin", 0, 100_000_000)
	host := strings.TrimPrefix(g.URL, "http://")
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"null", http.StatusForbidden},
		{"https://evil.example", http.StatusForbidden},
		{"http://" + host + ".evil.example", http.StatusForbidden},
		{"http://" + host, http.StatusSwitchingProtocols},
	} {
		nonce := make([]byte, 16)
		_, _ = rand.Read(nonce)
		req, _ := http.NewRequest("GET", g.URL+"/v1/responses", nil)
		req.Header.Set("Authorization", "Bearer "+tenant.Key)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(nonce))
		req.Header.Set("Origin", c.origin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("Origin %q: %d, want %d", c.origin, res.StatusCode, c.want)
		}
	}
}
