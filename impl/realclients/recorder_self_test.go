package realclients_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestRecorder checks the recorder itself, without any client installed: it passes requests to
// its target and records streamed bodies whole, serves forward-proxy requests for its own
// address, refuses every other destination (plain or CONNECT) and remembers it, and keeps the
// key out of the transcript.
func TestRecorder(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "event: tick\ndata: {\"n\":%d}\n\n", i)
				w.(http.Flusher).Flush()
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	}))
	defer target.Close()
	rec := newRecorder(t, target.URL, "tgk_secret")

	get := func(c *http.Client, u string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"key":"tgk_secret"}`))
		req.Header.Set("Authorization", "Bearer tgk_secret")
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	code, body, err := get(http.DefaultClient, rec.URL+"/sse")
	if err != nil || code != 200 || strings.Count(body, "event: tick") != 3 {
		t.Fatalf("direct SSE: %d %q %v", code, body, err)
	}
	proxyURL, _ := url.Parse(rec.URL)
	viaProxy := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	if code, body, err := get(viaProxy, rec.URL+"/json"); err != nil || code != 200 || body != `POST /json {"key":"tgk_secret"}` {
		t.Errorf("forward-proxy request for the recorder itself: %d %q %v", code, body, err)
	}
	if code, _, err := get(viaProxy, "http://elsewhere.invalid/x"); err != nil || code != http.StatusForbidden {
		t.Errorf("forward-proxy request for elsewhere: %d %v, want 403", code, err)
	}
	if _, _, err := get(viaProxy, "https://elsewhere.invalid/x"); err == nil {
		t.Errorf("CONNECT through the recorder succeeded")
	}

	rec.mu.Lock()
	refused := strings.Join(rec.refused, "; ")
	rec.mu.Unlock()
	if refused != "POST http://elsewhere.invalid/x; CONNECT elsewhere.invalid:443" {
		t.Errorf("refused: %q", refused)
	}
	ex := rec.snapshot()
	if len(ex) != 2 || ex[0].Path() != "/sse" || strings.Count(string(ex[0].ResponseBody), "event: tick") != 3 || ex[1].Path() != "/json" {
		t.Errorf("recorded: %+v", ex)
	}
	tr := rec.transcript(0)
	if strings.Contains(tr, "tgk_secret") {
		t.Errorf("the transcript shows the key:\n%s", tr)
	}
	for _, want := range []string{"!! refused egress: CONNECT elsewhere.invalid:443", "POST /json (sent as a forward-proxy request)", "> Authorization: Bearer <redacted>", `{"key":"<key>"}`} {
		if !strings.Contains(tr, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, tr)
		}
	}
}
