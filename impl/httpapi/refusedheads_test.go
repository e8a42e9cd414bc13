package httpapi_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/h1server"
	"github.com/tollgate/tollgate/impl/httpapi"
	"github.com/tollgate/tollgate/impl/metrics"
)

// TestRefusedHeadsAreCountedAndLogged: a request head the server refuses before any route is
// counted in tollgate_http_refused_heads_total by its status and written as one line of the
// access log ("request head refused", at info) with its status, its method (cut at 32 bytes)
// and its target's path (cut at 256), both empty when the request line could not be read, the
// reason its answer gives and the client's address (the connection's peer), and no header
// value (the key of a head whose X-Api-Key holds a bare CR is not in it): on the lean path
// (both Content-Length and Transfer-Encoding) and on the path handed to net/http (a bare CR,
// an unknown transfer coding, another HTTP version, a head beyond the limit, a method and a
// request line it cannot read). Such requests reach no handler, and were counted and logged
// nowhere: an operator could not see a client sending broken heads; and the line had neither
// address nor method, so an operator could not tell who sent them (session 12).
func TestRefusedHeadsAreCountedAndLogged(t *testing.T) {
	m := metrics.New()
	logs := &recordingHandler{}
	g := apitest.Start(t, apitest.Options{Metrics: m, LogHandler: logs})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	long := "/v1/" + strings.Repeat("a", 600)
	longMethod := "P(" + strings.Repeat("O", 60)
	cases := []struct {
		name, send           string
		status               int
		method, path, reason string
	}{
		{"lean path, both lengths", "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			400, "POST", "/v1/chat/completions", "the request has both Content-Length and Transfer-Encoding"},
		{"handed off, a bare CR", "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + tenant.Key + "\r\r\nContent-Length: 2\r\n\r\n{}",
			400, "POST", "/v1/messages", "the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"},
		{"handed off, an unknown transfer coding", "POST /api/mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nTransfer-Encoding: gzip\r\n\r\n",
			501, "POST", "/api/mcp", "unsupported transfer encoding"},
		{"handed off, another version", "PUT " + long + " HTTP/3.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
			505, "PUT", long[:256] + "…", "unsupported protocol version"},
		{"handed off, a head too large", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nX-Filler: " + strings.Repeat("f", 1<<20+16<<10) + "\r\nContent-Length: 2\r\n\r\n{}",
			431, "POST", "/v1/responses", ""},
		{"handed off, a method it cannot read", longMethod + " /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
			400, longMethod[:32] + "…", "/v1/models", ""},
		{"handed off, a request line it cannot read", "GET\r\nHost: x\r\n\r\n", 400, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			series := `tollgate_http_refused_heads_total{status="` + strconv.Itoa(tc.status) + `"}`
			before, logged := scrape(t, m, series), len(refusedHeadLines(logs))
			resp, body, from := sendRawFrom(t, g.URL, tc.send)
			if resp.StatusCode != tc.status {
				t.Fatalf("answered %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if got := scrape(t, m, series); got != before+1 {
				t.Errorf("%s went from %v to %v, want one more", series, before, got)
			}
			lines := refusedHeadLines(logs)[logged:]
			if len(lines) != 1 {
				t.Fatalf("logged %d lines %v, want one", len(lines), lines)
			}
			want := map[string]string{"level": slog.LevelInfo.String(), "status": strconv.Itoa(tc.status), "method": tc.method,
				"path": tc.path, "reason": tc.reason, "remote_addr": from}
			if got := lines[0]; !maps.Equal(got, want) {
				t.Errorf("logged %v, want %v", got, want)
			}
			for k, v := range lines[0] {
				if strings.Contains(v, tenant.Key) {
					t.Errorf("the line's %s holds the key: %q", k, v)
				}
			}
		})
	}
}

// refusedHeadLines are the "request head refused" lines logged so far, each as its level and
// its attributes' values.
func refusedHeadLines(h *recordingHandler) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if r.Message != "request head refused" {
			continue
		}
		line := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool {
			line[a.Key] = a.Value.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

// TestHTTP2PriorKnowledgeIsCountedAndLogged: a client speaking HTTP/2 with prior knowledge to
// the API port (golang.org/x/net/http2 without TLS, as curl --http2-prior-knowledge or a gRPC
// client without TLS does) is refused with a GOAWAY HTTP_1_1_REQUIRED, and that refusal is
// counted in tollgate_http_refused_heads_total under its own label, status="h2c" (not with
// the 505s of another HTTP/1 version), and logged as one "request head refused" line at info
// with the status 505, the method PRI, the target "*", the GOAWAY's sentence as its reason and
// the client's address. It was counted and logged nowhere, so an operator could not see such
// clients.
func TestHTTP2PriorKnowledgeIsCountedAndLogged(t *testing.T) {
	m := metrics.New()
	logs := &recordingHandler{}
	g := apitest.Start(t, apitest.Options{Metrics: m, LogHandler: logs})
	const h2c, other505 = `tollgate_http_refused_heads_total{status="h2c"}`, `tollgate_http_refused_heads_total{status="505"}`
	before, before505, logged := scrape(t, m, h2c), scrape(t, m, other505), len(refusedHeadLines(logs))

	var from string
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			from = c.LocalAddr().String()
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader("{}"))
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("answered %s, want a refusal", resp.Status)
	}
	if !strings.Contains(err.Error(), "HTTP_1_1_REQUIRED") {
		t.Fatalf("error %q, want the GOAWAY's HTTP_1_1_REQUIRED", err)
	}

	if got := scrape(t, m, h2c); got != before+1 {
		t.Errorf("%s went from %v to %v, want one more", h2c, before, got)
	}
	if got := scrape(t, m, other505); got != before505 {
		t.Errorf("%s went from %v to %v, want it unchanged", other505, before505, got)
	}
	lines := refusedHeadLines(logs)[logged:]
	if len(lines) != 1 {
		t.Fatalf("logged %d lines %v, want one", len(lines), lines)
	}
	want := map[string]string{"level": slog.LevelInfo.String(), "status": "505", "method": "PRI", "path": "*",
		"reason": "HTTP/2 without TLS is not served here; use HTTP/1.1 (or TLS with ALPN h2 at your front)", "remote_addr": from}
	if !maps.Equal(lines[0], want) {
		t.Errorf("logged %v, want %v", lines[0], want)
	}
}

// TestRefusedHeadsAreCountedByKind: the refused heads' status label is chosen by the kind
// h1server tells (h1server.Refusal), never by the reason's words: an HTTP/2 preface counts
// under "h2c" whatever its reason says, and a 505 of another HTTP version under "505" even if
// its reason were the HTTP/2 sentence. The label was chosen by matching the reason against
// h1server.HTTP2Refusal (session 12), so rewording the sentence would have moved the h2c
// clients under "505" without a word; the label values (which docs/grafana/tollgate.json
// reads) are unchanged.
func TestRefusedHeadsAreCountedByKind(t *testing.T) {
	m := metrics.New()
	told := httpapi.RefusedHeads(m, slog.New(&recordingHandler{}))
	const h2c, version = `tollgate_http_refused_heads_total{status="h2c"}`, `tollgate_http_refused_heads_total{status="505"}`
	told(h1server.Refusal{Kind: h1server.RefusedHTTP2, Status: http.StatusHTTPVersionNotSupported, Reason: "HTTP/2 is refused, in other words", Target: "*"})
	if got, other := scrape(t, m, h2c), scrape(t, m, version); got != 1 || other != 0 {
		t.Errorf("an HTTP/2 preface counted %v under h2c and %v under 505, want 1 and 0", got, other)
	}
	told(h1server.Refusal{Kind: h1server.RefusedVersion, Status: http.StatusHTTPVersionNotSupported, Reason: h1server.HTTP2Refusal, Target: "/v1/messages"})
	if got, other := scrape(t, m, h2c), scrape(t, m, version); got != 1 || other != 1 {
		t.Errorf("another version's 505 counted %v under h2c and %v under 505, want 1 and 1", got, other)
	}
}
