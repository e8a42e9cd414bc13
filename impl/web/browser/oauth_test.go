package browser_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/dataset"
)

// oauthClient is an MCP client's side of the sign-in: its loopback callback, which records
// the query each redirect brings, and its registration.
type oauthClient struct {
	ID, Redirect string
	queries      chan url.Values
}

// registerOAuthClient starts a callback listener and registers it as name, as an MCP client
// does after the 401.
func (s *site) registerOAuthClient(t *testing.T, name string) *oauthClient {
	t.Helper()
	c := &oauthClient{queries: make(chan url.Values, 8)}
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/callback" {
			c.queries <- r.URL.Query()
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(cb.Close)
	c.Redirect = cb.URL + "/callback"
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{c.Redirect}, "token_endpoint_auth_method": "none"})
	resp, err := s.GW.Client(t).Post(s.URL+"/oauth/register", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %v", resp.StatusCode, err)
	}
	c.ID = out.ClientID
	return c
}

// authorizeURL is an authorization request of c with a fresh PKCE pair (method S256 unless
// given), and the verifier.
func (s *site) authorizeURL(c *oauthClient, method string) (string, string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	if method == "" {
		method = "S256"
	}
	q := url.Values{"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {c.Redirect}, "state": {"xyz"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {method},
		"resource": {s.URL + "/api/mcp"}, "scope": {"mcp"}}
	return s.URL + "/oauth/authorize?" + q.Encode(), verifier
}

// callback waits for the next redirect to c's callback.
func (c *oauthClient) callback(t *testing.T) url.Values {
	t.Helper()
	select {
	case q := <-c.queries:
		return q
	default:
		t.Fatal("the browser did not come back to the client's callback")
		return nil
	}
}

// connectApp connects the MCP client c as the person signed in on p does: a fresh
// authorization request, Allow access on the consent page, and the code the client gets back
// exchanged for tokens, as the client does; it returns the access token. From then on the
// Connected apps page lists the grant.
func (s *site) connectApp(p *tour, c *oauthClient) string {
	t := p.t
	t.Helper()
	authURL, verifier := s.authorizeURL(c, "")
	p.at(p.Navigate(authURL), http.StatusOK, s.URL+"/oauth/authorize")
	p.Submit("Allow access")
	q := c.callback(t)
	if q.Get("code") == "" || q.Get("state") != "xyz" || q.Get("iss") != s.URL {
		t.Fatalf("Allow brought the client %v, want a code, the state and the issuer", q)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {c.ID}, "code": {q.Get("code")},
		"code_verifier": {verifier}, "redirect_uri": {c.Redirect}, "resource": {s.URL + "/api/mcp"}}
	resp, err := s.GW.Client(t).PostForm(s.URL+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tokens struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tokens); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tokens.AccessToken
}

// mcpStatus calls list_storage_datasets with token and returns the status and body.
func (s *site) mcpStatus(t *testing.T, token string) (int, string) {
	t.Helper()
	status, body := s.api(t, http.MethodPost, "/api/mcp", token,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`)
	return status, string(body)
}

// TestOAuthConsent is the console's side of MCP sign-in: a signed-out person who follows a
// client's authorization URL signs in and lands on the consent page, which names the client,
// where it returns, the account, the role and what it may do; Deny sends access_denied back,
// Allow a code (which the client exchanges and uses on /api/mcp); the Connected apps page
// lists the grant, and revoking it (confirmed on a page that says what stops) refuses its
// token at once. Requests the server refuses never reach the consent page.
func TestOAuthConsent(t *testing.T) {
	s := start(t)
	if _, err := s.GW.Datasets.Put(context.Background(), s.Account.ID, "sales", dataset.CSV, strings.NewReader("region,units\nnorth,3\n")); err != nil {
		t.Fatal(err)
	}
	client := s.registerOAuthClient(t, "Example Agent")
	authURL, _ := s.authorizeURL(client, "")

	p := newTour(t)
	p.at(p.Navigate(authURL), http.StatusOK, s.IdP.Issuer()+"/login")
	p.Fill("E-mail", alice.Email)
	p.Fill("Password", alice.Password)
	p.at(p.Submit("Sign in"), http.StatusOK, s.URL+"/oauth/authorize")
	p.shot("oauth-consent")
	consent := p.Text("main")
	cbHost := strings.TrimSuffix(strings.TrimPrefix(client.Redirect, "http://"), "/callback")
	for _, want := range []string{"Allow “Example Agent” to use tollgate?", "Example Agent asks to use this gateway's MCP tools as you",
		cbHost, s.Account.Name, alice.Email + ", owner", "within your role (owner)", "cannot see or create API keys"} {
		if !strings.Contains(consent, want) {
			t.Errorf("the consent page does not show %q:\n%s", want, consent)
		}
	}

	p.Submit("Deny")
	if q := client.callback(t); q.Get("error") != "access_denied" || q.Get("state") != "xyz" || q.Get("code") != "" {
		t.Errorf("Deny brought the client %v, want error=access_denied with the state and no code", q)
	}

	token := s.connectApp(p, client)
	if status, body := s.mcpStatus(t, token); status != http.StatusOK || !strings.Contains(body, "sales") {
		t.Fatalf("tools/call with the token: %d %s", status, body)
	}

	p.at(p.Navigate(s.URL+"/"), http.StatusOK, s.URL+"/")
	p.at(p.Follow("Connected apps"), http.StatusOK, s.URL+"/oauth/grants")
	p.shot("oauth-grants")
	row := p.Text("tbody")
	for _, want := range []string{"“Example Agent”", cbHost, alice.Email, "owner"} {
		if !strings.Contains(row, want) {
			t.Errorf("Connected apps does not show %q:\n%s", want, row)
		}
	}
	if status := p.Submit("Revoke “Example Agent” connected by " + alice.Email); status != http.StatusOK || !strings.HasSuffix(p.URL(), "/revoke") {
		t.Fatalf("Revoke led to %s (%d), want the confirmation", p.URL(), status)
	}
	p.shot("oauth-revoke-confirm")
	if what := p.Text("#confirm-what"); !strings.Contains(what, "stops it at once") || !strings.Contains(what, alice.Email) {
		t.Errorf("the confirmation does not say what stops:\n%s", what)
	}
	// Nothing is revoked until it is confirmed.
	if status, _ := s.mcpStatus(t, token); status != http.StatusOK {
		t.Errorf("the token stopped before the revocation was confirmed: %d", status)
	}
	p.Submit("Revoke access of “Example Agent”")
	if got := p.Text("[role=status]"); got != "Revoked the access of “Example Agent”." {
		t.Errorf("after revoking, the page says %q", got)
	}
	if got := p.Text("tbody"); !strings.Contains(got, "No apps connected yet.") {
		t.Errorf("after revoking, Connected apps lists:\n%s", got)
	}
	if status, body := s.mcpStatus(t, token); status != http.StatusUnauthorized {
		t.Errorf("the revoked grant's token: %d %s, want 401", status, body)
	}

	// Refused requests are told to the person on the console, and the browser goes nowhere
	// (nothing is sent to a client before the member has consented): plain PKCE, named as
	// such, and an unknown client.
	plain, _ := s.authorizeURL(client, "plain")
	p.at(p.Navigate(plain), http.StatusBadRequest, s.URL+"/oauth/authorize")
	if got := p.Text("main"); !strings.Contains(got, "invalid_request") || !strings.Contains(got, "S256") {
		t.Errorf("plain PKCE shows:\n%s\nwant invalid_request naming S256", got)
	}
	select {
	case q := <-client.queries:
		t.Errorf("plain PKCE sent the browser to the client's callback with %v", q)
	default:
	}
	unknown := strings.Replace(authURL, "client_id="+url.QueryEscape(client.ID), "client_id=tgc_unknown", 1)
	p.at(p.Navigate(unknown), http.StatusBadRequest, s.URL+"/oauth/authorize")
	if got := p.Text("main"); !strings.Contains(got, "not registered") {
		t.Errorf("an unknown client's request shows:\n%s", got)
	}
}
