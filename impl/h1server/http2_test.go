package h1server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestHTTP2PriorKnowledgeIsRefused: a client speaking HTTP/2 with prior knowledge (h2c without
// an upgrade) gets the server's preface and a GOAWAY with HTTP_1_1_REQUIRED, whose debug data
// says in a sentence what to use, and the connection ends; the handler never sees the preface.
// Before, the preface went on to the handler, and the gateway's mux answered a bare HTTP/1.1
// 400, which golang.org/x/net/http2 reads as a frame too large. Each refusal is told to
// RefusedHead, as kind RefusedHTTP2 (which a server counts it by; session 12: by the reason's
// words before), 505 with the sentence as its reason and the target "*", before the GOAWAY is
// sent; it was told nowhere, so an operator did not see clients speaking HTTP/2 to the port.
func TestHTTP2PriorKnowledgeIsRefused(t *testing.T) {
	var (
		served atomic.Int64
		mu     sync.Mutex
		told   []Refusal
	)
	_, addr, _ := startH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.RequestURI == "*" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}), func(s *Server) {
		s.ErrorBody = envelope
		s.RefusedHead = func(r Refusal) {
			mu.Lock()
			told = append(told, r)
			mu.Unlock()
		}
	})
	toldSoFar := func() []Refusal {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	const sentence = "HTTP/2 without TLS is not served here; use HTTP/1.1 (or TLS with ALPN h2 at your front)"
	refused := Refusal{Kind: RefusedHTTP2, Status: http.StatusHTTPVersionNotSupported, Reason: sentence, Target: "*", Method: "PRI"}
	checkTold := func(t *testing.T, before int) {
		t.Helper()
		got := toldSoFar()[before:]
		for i := range got {
			// The peer's port is the client's own: a loopback address, with a port.
			if host, port, err := net.SplitHostPort(got[i].RemoteAddr); err != nil || host != "127.0.0.1" || port == "0" {
				t.Errorf("RefusedHead told the peer %q, want the client's 127.0.0.1:port", got[i].RemoteAddr)
			}
			got[i].RemoteAddr = ""
		}
		if !slices.Equal(got, []Refusal{refused}) {
			t.Errorf("RefusedHead told %+v, want %+v", got, []Refusal{refused})
		}
	}

	t.Run("an HTTP/2 client", func(t *testing.T) {
		before := len(toldSoFar())
		tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/messages", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatalf("answered %s, want a refusal", resp.Status)
		}
		if !strings.Contains(err.Error(), "HTTP_1_1_REQUIRED") {
			t.Errorf("error %q, want the GOAWAY's HTTP_1_1_REQUIRED", err)
		}
		checkTold(t, before)
	})

	t.Run("the bytes", func(t *testing.T) {
		before := len(toldSoFar())
		c := dial(t, addr)
		if _, err := io.WriteString(c, http2.ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(guard))
		fr := http2.NewFramer(io.Discard, c)
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("first frame: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); !ok || s.IsAck() {
			t.Fatalf("first frame %v, want the server's SETTINGS", f)
		}
		f, err = fr.ReadFrame()
		if err != nil {
			t.Fatalf("second frame: %v", err)
		}
		g, ok := f.(*http2.GoAwayFrame)
		if !ok {
			t.Fatalf("second frame %v, want a GOAWAY", f)
		}
		if g.LastStreamID != 0 || g.ErrCode != http2.ErrCodeHTTP11Required || !bytes.Equal(g.DebugData(), []byte(sentence)) {
			t.Errorf("GOAWAY last stream %d, %v, %q; want 0, HTTP_1_1_REQUIRED, %q", g.LastStreamID, g.ErrCode, g.DebugData(), sentence)
		}
		if _, err := fr.ReadFrame(); err != io.EOF {
			t.Errorf("after the GOAWAY: %v, want the connection's end", err)
		}
		checkTold(t, before)
	})
	if n := served.Load(); n != 0 {
		t.Errorf("the handler saw %d requests, want none", n)
	}
}
