package realclients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBodyLimit bounds how much of one body a failing test prints; the transcript file keeps
// them whole.
const logBodyLimit = 6000

// recorder is the one address a client under test may reach. Requests in origin form (and
// forward-proxy requests for the recorder's own address) are passed to the gateway and
// recorded with their responses; a forward-proxy request for any other address, and every
// CONNECT, is refused with 403 and remembered as attempted egress.
type recorder struct {
	// URL is the recorder's base URL, http://127.0.0.1:<port>.
	URL string

	// mcpDelay holds each request to the MCP endpoint (/api/mcp) this long before it is
	// relayed: an MCP server slow to start and answer, as on a loaded machine. Set it before
	// a client runs.
	mcpDelay time.Duration

	name   string
	host   string
	start  time.Time
	server *httptest.Server
	keys   []string

	mu        sync.Mutex
	exchanges []*exchange
	refused   []string
	runs      []clientRun
}

// exchange is one recorded request and its response.
type exchange struct {
	n        int
	at       time.Duration
	method   string
	uri      string
	viaProxy bool
	reqHead  http.Header
	reqBody  []byte

	mu       sync.Mutex
	status   string
	code     int
	respHead http.Header
	respBody bytes.Buffer
	took     time.Duration
	err      error
	complete bool
	// socket holds what went through an upgraded connection (a WebSocket's frames), in the
	// order and at the times the recorder relayed it.
	socket []socketChunk
}

// socketChunk is one read or write of an upgraded connection as the recorder relayed it.
type socketChunk struct {
	// at is when the recorder relayed it, from the recorder's start.
	at time.Duration
	// fromClient is true for bytes the client sent, false for the gateway's.
	fromClient bool
	data       []byte
}

// newRecorder starts a recorder in front of the gateway at target for the rest of the test.
// secrets are replaced by <key> wherever they appear in the transcript. When the test fails
// the transcript is printed; it is always written to transcriptDir(t).
func newRecorder(t *testing.T, target string, secrets ...string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{name: t.Name(), start: time.Now(), keys: secrets}
	transport := &http.Transport{
		Proxy:               nil, // the gateway is reached directly, whatever the test's own environment says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
		},
		Transport:     recordingTransport{rec: rec, base: transport},
		FlushInterval: -1, // streamed bodies reach the client event by event
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, "recorder: gateway unreachable: "+err.Error(), http.StatusBadGateway)
		},
	}
	rec.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodConnect:
			rec.refuse("CONNECT " + r.Host)
			http.Error(w, "recorder: egress refused", http.StatusForbidden)
			return
		case r.URL.Host != "" && r.URL.Host != rec.host:
			rec.refuse(r.Method + " " + r.URL.String())
			http.Error(w, "recorder: egress refused", http.StatusForbidden)
			return
		case r.URL.Host != "":
			// A forward-proxy request for the recorder itself: served like a direct one.
			r = r.WithContext(withViaProxy(r.Context()))
			r.URL.Scheme, r.URL.Host = "", ""
		}
		if rec.mcpDelay > 0 && r.URL.Path == "/api/mcp" {
			time.Sleep(rec.mcpDelay)
		}
		rp.ServeHTTP(w, r)
	}))
	rec.URL = rec.server.URL
	rec.host = strings.TrimPrefix(rec.server.URL, "http://")
	t.Cleanup(func() {
		rec.server.CloseClientConnections()
		rec.server.Close()
		transport.CloseIdleConnections()
		path := filepath.Join(transcriptDir(t), "transcript.txt")
		if err := os.WriteFile(path, []byte(rec.transcript(0)), 0o644); err != nil {
			t.Errorf("write transcript: %v", err)
		}
		if t.Failed() {
			t.Logf("what the client sent and got (whole bodies in %s):\n%s", path, rec.transcript(logBodyLimit))
		}
	})
	return rec
}

// refuse remembers an attempt to reach dest through the recorder.
func (rec *recorder) refuse(dest string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.refused = append(rec.refused, dest)
}

// checkEgress fails the test for every destination other than the gateway that the client
// tried to reach.
func (rec *recorder) checkEgress(t *testing.T) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, dest := range rec.refused {
		t.Errorf("client tried to reach %s (refused by the recorder)", dest)
	}
}

// Exchanges returns a snapshot of what was recorded so far, in arrival order.
func (rec *recorder) snapshot() []recorded {
	rec.mu.Lock()
	list := append([]*exchange(nil), rec.exchanges...)
	rec.mu.Unlock()
	out := make([]recorded, len(list))
	for i, ex := range list {
		ex.mu.Lock()
		out[i] = recorded{Method: ex.method, URI: ex.uri, RequestHeader: ex.reqHead, RequestBody: ex.reqBody,
			Status: ex.code, ResponseHeader: ex.respHead, ResponseBody: ex.respBody.Bytes(), Err: ex.err,
			At: ex.at, Took: ex.took, Socket: append([]socketChunk(nil), ex.socket...)}
		ex.mu.Unlock()
	}
	return out
}

// recorded is one exchange as the checks see it.
type recorded struct {
	Method         string
	URI            string
	RequestHeader  http.Header
	RequestBody    []byte
	Status         int
	ResponseHeader http.Header // nil when no response came
	ResponseBody   []byte
	Err            error
	// At is when the request reached the recorder and Took how long its response took to its
	// end (for an upgrade, to the handshake's answer).
	At, Took time.Duration
	// Socket is what went through an upgraded connection, both ways.
	Socket []socketChunk
}

// Path is the request's path without its query.
func (r recorded) Path() string {
	p, _, _ := strings.Cut(r.URI, "?")
	return p
}

// RPCMethod is the JSON-RPC method of an MCP request body, or "".
func (r recorded) RPCMethod() string {
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(r.RequestBody, &m) != nil {
		return ""
	}
	return m.Method
}

// RPCToolName is the tool a tools/call request names, or "".
func (r recorded) RPCToolName() string {
	var m struct {
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(r.RequestBody, &m) != nil {
		return ""
	}
	return m.Params.Name
}

// mcpMethods lists the JSON-RPC methods POSTed to /api/mcp, with the tool name of each
// tools/call after a colon.
func (rec *recorder) mcpMethods() []string {
	var out []string
	for _, ex := range rec.snapshot() {
		if ex.Path() != "/api/mcp" || ex.Method != http.MethodPost {
			continue
		}
		m := ex.RPCMethod()
		if m == "tools/call" {
			m += ":" + ex.RPCToolName()
		}
		out = append(out, m)
	}
	return out
}

// transcript renders every exchange; limit > 0 shortens each body to about that many bytes.
func (rec *recorder) transcript(limit int) string {
	rec.mu.Lock()
	list := append([]*exchange(nil), rec.exchanges...)
	refused := append([]string(nil), rec.refused...)
	runs := append([]clientRun(nil), rec.runs...)
	rec.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "recorder for %s at %s: %d exchanges\n", rec.name, rec.URL, len(list))
	for _, r := range runs {
		b.WriteString(rec.redact(r.render(limit)))
	}
	for _, dest := range refused {
		fmt.Fprintf(&b, "!! refused egress: %s\n", dest)
	}
	for _, ex := range list {
		ex.mu.Lock()
		via := ""
		if ex.viaProxy {
			via = " (sent as a forward-proxy request)"
		}
		fmt.Fprintf(&b, "\n=== #%d at +%.3fs: %s %s%s\n", ex.n, ex.at.Seconds(), ex.method, ex.uri, via)
		writeHeader(&b, "> ", ex.reqHead)
		if sum := jsonSummary(ex.reqBody); sum != "" && limit > 0 && len(ex.reqBody) > limit {
			fmt.Fprintf(&b, "~ body in short: %s\n", sum)
		}
		if len(ex.reqBody) > 0 {
			b.WriteString(rec.redact(shorten(ex.reqBody, limit)))
			b.WriteString("\n")
		}
		switch {
		case ex.err != nil && ex.code == 0:
			fmt.Fprintf(&b, "<<< no response: %v\n", ex.err)
		case ex.code == 0:
			b.WriteString("<<< (no response yet)\n")
		default:
			state := fmt.Sprintf("%.3fs", ex.took.Seconds())
			if !ex.complete {
				state = "body still open"
			}
			fmt.Fprintf(&b, "<<< %s (%s)\n", ex.status, state)
			writeHeader(&b, "< ", ex.respHead)
			if ex.respBody.Len() > 0 {
				b.WriteString(rec.redact(shorten(ex.respBody.Bytes(), limit)))
				b.WriteString("\n")
			}
			if ex.err != nil {
				fmt.Fprintf(&b, "<<< body ended with: %v\n", ex.err)
			}
		}
		ex.mu.Unlock()
	}
	return b.String()
}

// noteRun adds a client's command line, exit and output to the transcript.
func (rec *recorder) noteRun(r clientRun) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.runs = append(rec.runs, r)
}

// redact hides the keys in s.
func (rec *recorder) redact(s string) string {
	for _, k := range rec.keys {
		if k != "" {
			s = strings.ReplaceAll(s, k, "<key>")
		}
	}
	return s
}

func writeHeader(b *strings.Builder, prefix string, h http.Header) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range h[name] {
			switch strings.ToLower(name) {
			case "authorization", "x-api-key":
				if scheme, _, ok := strings.Cut(v, " "); ok {
					v = scheme + " <redacted>"
				} else {
					v = "<redacted>"
				}
			}
			fmt.Fprintf(b, "%s%s: %s\n", prefix, name, v)
		}
	}
}

// jsonSummary lists the top-level members of a JSON object body in order, scalars with their
// values, arrays by length (messages with their roles, tools with their names or types) and
// objects shortened, so that a long request's shape shows even when its body is cut; "" when
// the body is not a JSON object.
func jsonSummary(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var parts []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return ""
		}
		var list []map[string]any
		switch {
		case len(raw) > 0 && raw[0] == '[' && json.Unmarshal(raw, &list) == nil:
			var names []string
			for _, item := range list {
				switch {
				case item["role"] != nil:
					names = append(names, fmt.Sprint(item["role"]))
				case item["name"] != nil:
					names = append(names, fmt.Sprint(item["name"]))
				case item["type"] != nil:
					names = append(names, fmt.Sprint(item["type"]))
				}
			}
			parts = append(parts, fmt.Sprintf("%s[%d]=%s", key, len(list), strings.Join(names, ",")))
		case len(raw) > 120:
			parts = append(parts, fmt.Sprintf("%s=%s…(%d bytes)", key, raw[:100], len(raw)))
		default:
			parts = append(parts, fmt.Sprintf("%s=%s", key, raw))
		}
	}
	return strings.Join(parts, " ")
}

// shorten keeps the head and tail of a body longer than limit (0: no limit).
func shorten(body []byte, limit int) string {
	if limit <= 0 || len(body) <= limit {
		return string(body)
	}
	head, tail := limit*2/3, limit/3
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", body[:head], len(body)-head-tail, body[len(body)-tail:])
}

// recordingTransport records each request the reverse proxy forwards and tees the response
// body into the exchange as the client reads it, so a streamed body is recorded event by event
// and a stream cut short shows where it stopped.
type recordingTransport struct {
	rec  *recorder
	base http.RoundTripper
}

func (rt recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := &exchange{method: req.Method, uri: req.URL.RequestURI(), viaProxy: viaProxy(req.Context()), reqHead: req.Header.Clone()}
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		ex.reqBody = body
		req.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			ex.err = fmt.Errorf("reading the request body: %w", err)
		}
	}
	rt.rec.mu.Lock()
	ex.n = len(rt.rec.exchanges) + 1
	ex.at = time.Since(rt.rec.start)
	rt.rec.exchanges = append(rt.rec.exchanges, ex)
	rt.rec.mu.Unlock()

	began := time.Now()
	resp, err := rt.base.RoundTrip(req)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if err != nil {
		ex.err = err
		ex.complete = true
		return nil, err
	}
	ex.status, ex.code, ex.respHead = resp.Status, resp.StatusCode, resp.Header.Clone()
	ex.took = time.Since(began)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection keeps its writable body; the handshake is recorded, and the
		// bytes relayed through the connection each way are kept with their times.
		ex.complete = true
		if conn, ok := resp.Body.(io.ReadWriteCloser); ok {
			resp.Body = &socketTap{conn: conn, ex: ex, start: rt.rec.start}
		}
		return resp, nil
	}
	resp.Body = &teeBody{body: resp.Body, ex: ex, began: began}
	return resp, nil
}

// teeBody copies what is read from a response body into its exchange.
type teeBody struct {
	body  io.ReadCloser
	ex    *exchange
	began time.Time
}

func (tb *teeBody) Read(p []byte) (int, error) {
	n, err := tb.body.Read(p)
	tb.ex.mu.Lock()
	tb.ex.respBody.Write(p[:n])
	if err != nil {
		tb.ex.took = time.Since(tb.began)
		tb.ex.complete = true
		if err != io.EOF {
			tb.ex.err = err
		}
	}
	tb.ex.mu.Unlock()
	return n, err
}

func (tb *teeBody) Close() error {
	tb.ex.mu.Lock()
	if !tb.ex.complete {
		tb.ex.took = time.Since(tb.began)
		tb.ex.complete = true
		tb.ex.err = fmt.Errorf("the client closed the body before its end")
	}
	tb.ex.mu.Unlock()
	return tb.body.Close()
}

// socketTap is the gateway's side of an upgraded connection as the reverse proxy relays it:
// what the proxy writes to it is the client's, what it reads from it the gateway's; both are
// appended to the exchange with their times.
type socketTap struct {
	conn  io.ReadWriteCloser
	ex    *exchange
	start time.Time
}

func (st *socketTap) note(fromClient bool, p []byte) {
	if len(p) == 0 {
		return
	}
	st.ex.mu.Lock()
	st.ex.socket = append(st.ex.socket, socketChunk{at: time.Since(st.start), fromClient: fromClient, data: bytes.Clone(p)})
	st.ex.mu.Unlock()
}

func (st *socketTap) Read(p []byte) (int, error) {
	n, err := st.conn.Read(p)
	st.note(false, p[:n])
	return n, err
}

func (st *socketTap) Write(p []byte) (int, error) {
	st.note(true, p)
	return st.conn.Write(p)
}

func (st *socketTap) Close() error { return st.conn.Close() }

type viaProxyKey struct{}

func withViaProxy(ctx context.Context) context.Context {
	return context.WithValue(ctx, viaProxyKey{}, true)
}

func viaProxy(ctx context.Context) bool {
	v, _ := ctx.Value(viaProxyKey{}).(bool)
	return v
}
