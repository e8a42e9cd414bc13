package realclients_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/browsertest"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
	"github.com/tollgate/tollgate/impl/web/members"
)

// oauthUser is the member who approves the client; she signs in at the development provider.
var oauthUser = devoidc.User{Subject: "alice", Email: "alice@example.com", Name: "Alice", Password: "alice-password"}

// oauthEvent is one line the script mcp-oauth.mjs prints.
type oauthEvent struct {
	Event        string     `json:"event"`
	URL          string     `json:"url"`
	Code         string     `json:"code"`
	Error        string     `json:"error"`
	Result       toolResult `json:"result"`
	ClientID     string     `json:"client_id"`
	AccessToken  string     `json:"access_token"`
	Unauthorized bool       `json:"unauthorized"`
}

// TestMCPOAuthSignIn is MCP sign-in with OAuth, end to end with a real client: the MCP
// TypeScript SDK's OAuth client (npm/mcp-oauth.mjs), given only the URL of /api/mcp, meets
// the 401, discovers the metadata, registers, and hands its authorization URL to this test,
// whose Chromium signs alice in at the development provider and allows the client on the
// console's consent page; the browser's redirect reaches the script's loopback callback, the
// script finishes the sign-in and lists the datasets with tools/call. Its access token is
// refused on the inference routes (another resource). Then alice revokes the grant on the
// Connected apps page: the token is refused within a second and the script's next call is
// refused; the authorization code, replayed, is refused.
func TestMCPOAuthSignIn(t *testing.T) {
	c := findClients(t)
	ctx := context.Background()

	// The gateway with its console at http://localhost:PORT, the provider at 127.0.0.1.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	appURL := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idp, err := devoidc.Serve(idpLn, devoidc.Options{Users: []devoidc.User{oauthUser},
		Clients: []devoidc.Client{{ID: "tollgate", Secret: "realclients-secret", RedirectURIs: []string{appURL + "/auth/callback"},
			PostLogoutRedirectURIs: []string{appURL + "/"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Close() })
	cfg := config.Default()
	cfg.Web = config.Web{Issuer: idp.Issuer(), ClientID: "tollgate", ClientSecret: "realclients-secret", PublicURL: appURL + "/"}
	cfg.Web.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := apitest.Start(t, apitest.Options{Config: cfg, Listener: ln})
	tenant := gw.NewTenant(t, "acme", 0, 100_000_000)
	if _, err := (members.New(gw.Store, nil)).Add(ctx, tenant.Account.ID, oauthUser.Email, members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Datasets.Put(ctx, tenant.Account.ID, "sales", dataset.CSV, strings.NewReader(salesCSV)); err != nil {
		t.Fatal(err)
	}

	// The script, with no key: every way out but the gateway goes to the recorder, which
	// refuses it.
	rec := newRecorder(t, gw.URL)
	sb := newSandbox(t, c, rec)
	script := startScript(t, sb, append(c.script("mcp-oauth.mjs"), appURL+"/api/mcp")...)

	authorize := script.next(t, "authorize")
	authURL, err := url.Parse(authorize.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := authURL.Query()
	if authURL.Path != "/oauth/authorize" || q.Get("code_challenge_method") != "S256" || q.Get("resource") != appURL+"/api/mcp" ||
		!strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || !strings.HasPrefix(q.Get("client_id"), "tgc_") {
		t.Fatalf("the SDK's authorization URL %s: want our /oauth/authorize with S256, the resource, a loopback redirect and a registered client", authorize.URL)
	}
	redirectHost := strings.TrimPrefix(strings.TrimSuffix(q.Get("redirect_uri"), "/callback"), "http://")

	// alice signs in on the way and allows the client.
	p := browsertest.New(t)
	if status := p.Navigate(authorize.URL); status != http.StatusOK || !strings.HasPrefix(p.URL(), idp.Issuer()+"/login") {
		t.Fatalf("the authorization URL led to %s (%d), want the provider's sign-in", p.URL(), status)
	}
	p.Fill("E-mail", oauthUser.Email)
	p.Fill("Password", oauthUser.Password)
	if status := p.Submit("Sign in"); status != http.StatusOK || !strings.HasPrefix(p.URL(), appURL+"/oauth/authorize?") {
		t.Fatalf("after signing in the browser is at %s (%d), want the consent page", p.URL(), status)
	}
	consent := p.Text("main")
	for _, want := range []string{"tollgate realclients (MCP SDK)", redirectHost, "acme", oauthUser.Email + ", owner", "within your role"} {
		if !strings.Contains(consent, want) {
			t.Errorf("the consent page does not show %q:\n%s", want, consent)
		}
	}
	p.Screenshot("oauth-consent")
	if status := p.Submit("Allow access"); status != http.StatusOK || !strings.HasPrefix(p.URL(), q.Get("redirect_uri")+"?") {
		t.Fatalf("after allowing, the browser is at %s (%d), want the client's callback", p.URL(), status)
	}
	cb := script.next(t, "callback")
	called := script.next(t, "called")
	called.Result.expect(t, "list_storage_datasets over OAuth", "sales")
	if !strings.HasPrefix(called.AccessToken, "tgoa_") {
		t.Fatalf("the script's access token is %q", called.AccessToken)
	}

	// The token is for /api/mcp only: another resource of the gateway refuses it.
	for _, path := range []string{"/v1/models", "/v1/chat/completions"} {
		body := ""
		method := http.MethodGet
		if path == "/v1/chat/completions" {
			method, body = http.MethodPost, `{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`
		}
		if status := bearerStatus(t, method, appURL+path, called.AccessToken, body); status != http.StatusUnauthorized {
			t.Errorf("%s %s with the MCP access token: %d, want 401", method, path, status)
		}
	}

	// alice revokes the grant on the console; the token stops within a second.
	if status := p.Navigate(appURL + "/oauth/grants"); status != http.StatusOK {
		t.Fatalf("Connected apps: %d", status)
	}
	grants := p.Text("table")
	if !strings.Contains(grants, "tollgate realclients (MCP SDK)") || !strings.Contains(grants, oauthUser.Email) {
		t.Fatalf("Connected apps does not list the client and alice:\n%s", grants)
	}
	p.Screenshot("oauth-grants")
	p.Submit("Revoke “tollgate realclients (MCP SDK)” connected by " + oauthUser.Email)
	if what := p.Text("#confirm-what"); !strings.Contains(what, "stops it at once") || !strings.Contains(what, redirectHost) {
		t.Errorf("the confirmation does not say what stops:\n%s", what)
	}
	p.Screenshot("oauth-revoke-confirm")
	p.Submit("Revoke access of “tollgate realclients (MCP SDK)”")
	revoked := time.Now()
	if got := p.Text("[role=status]"); !strings.HasPrefix(got, "Revoked") {
		t.Errorf("after revoking, the page says %q", got)
	}
	for bearerStatus(t, http.MethodPost, appURL+"/api/mcp", called.AccessToken,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`) != http.StatusUnauthorized {
		if time.Since(revoked) > time.Second {
			t.Fatal("the revoked grant's token still works a second later")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the token was refused %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	script.send(t, "call")
	if refusal := script.next(t, "refused"); !strings.Contains(refusal.Error, "Unauthorized") && !refusal.Unauthorized {
		t.Errorf("the script's call after the revocation: %+v, want it refused as unauthorized", refusal)
	}

	// The authorization code, replayed, is refused.
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {called.ClientID}, "code": {cb.Code},
		"code_verifier": {strings.Repeat("v", 43)}, "redirect_uri": {q.Get("redirect_uri")}, "resource": {appURL + "/api/mcp"}}
	resp, err := http.Post(appURL+"/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), "already used") {
		t.Errorf("the code replayed: %d %s, want 400 invalid_grant (already used)", resp.StatusCode, raw)
	}
	script.stop(t)
	rec.checkEgress(t)
}

// bearerStatus sends a request with token as the bearer credential and returns the status.
func bearerStatus(t *testing.T, method, u, token, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// scriptProc is a running script that talks in lines: JSON events out, commands in.
type scriptProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan oauthEvent
	stderr *lockedBuffer
	done   chan error
}

// startScript starts args in sb, reading its events until it exits; it is killed (with its
// process group) when the test ends.
func startScript(t *testing.T, sb sandbox, args ...string) *scriptProc {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = sb.work, sb.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptProc{cmd: cmd, stdin: stdin, events: make(chan oauthEvent, 16), stderr: new(lockedBuffer), done: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev oauthEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				t.Logf("script: %s", truncateLine(sc.Text()))
				s.events <- ev
			}
		}
		close(s.events)
	}()
	go func() { <-read; s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-read
	})
	return s
}

// next waits for the script's next event named name (skipping others), failing the test if
// the script ends or a minute passes first.
func (s *scriptProc) next(t *testing.T, name string) oauthEvent {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the script ended before %q:\n%s", name, s.stderr.String())
			}
			if ev.Event == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q from the script within a minute:\n%s", name, s.stderr.String())
		}
	}
}

// send writes a command line to the script.
func (s *scriptProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// stop closes the script's input and waits for it to exit cleanly.
func (s *scriptProc) stop(t *testing.T) {
	t.Helper()
	_ = s.stdin.Close()
	for range s.events {
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("the script exited with %v:\n%s", err, s.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the script did not exit after its input closed")
	}
}

// lockedBuffer is a buffer safe for the process's copying goroutine and the test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func truncateLine(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
