package mcpauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/devoidc"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// site is a gateway with the web console (and so the OAuth server) at URL, two accounts
// (acme, owned by alice, with the dataset sales; globex, owned by bob, with the dataset
// secret), and an mcpauth.Server on the same database: the one the consent page uses to issue
// codes (Approve), which the tests call as the page does.
type site struct {
	URL     string
	GW      *apitest.Gateway
	OAuth   *mcpauth.Server
	Acme    apitest.Tenant
	Globex  apitest.Tenant
	Alice   members.User
	Bob     members.User
	members *members.Service
}

func startSite(t *testing.T, configure ...func(*config.Config)) *site {
	t.Helper()
	ctx := context.Background()
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
	idp, err := devoidc.Serve(idpLn, devoidc.Options{Clients: []devoidc.Client{{ID: "tollgate", Secret: "s", RedirectURIs: []string{appURL + "/auth/callback"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idp.Close() })
	cfg := config.Default()
	cfg.Web = config.Web{Issuer: idp.Issuer(), ClientID: "tollgate", ClientSecret: "s", PublicURL: appURL + "/"}
	cfg.Web.ApplyDefaults()
	for _, c := range configure {
		c(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw := apitest.Start(t, apitest.Options{Config: cfg, Listener: ln})
	s := &site{URL: appURL, GW: gw, members: members.New(gw.Store, gw.Agents)}
	s.Acme = gw.NewTenant(t, "acme", 0, 1_000_000)
	s.Globex = gw.NewTenant(t, "globex", 0, 1_000_000)
	if s.Alice, err = s.members.Add(ctx, s.Acme.Account.ID, "alice@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if s.Bob, err = s.members.Add(ctx, s.Globex.Account.ID, "bob@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Datasets.Put(ctx, s.Acme.Account.ID, "sales", dataset.CSV, strings.NewReader("region,units\nnorth,3\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Datasets.Put(ctx, s.Globex.Account.ID, "secret", dataset.CSV, strings.NewReader("k,v\nkey,globex-only-value\n")); err != nil {
		t.Fatal(err)
	}
	if s.OAuth, err = mcpauth.New(mcpauth.Options{Store: gw.Store, PublicURL: cfg.Web.PublicURL}); err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends a request through the client that checks every answer against the OpenAPI
// document, and returns the answer with its body read.
func (s *site) do(t *testing.T, method, path, contentType, body, bearer string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.GW.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// register registers a client with redirect as its redirect URI and returns its id.
func (s *site) register(t *testing.T, name, redirect string) string {
	t.Helper()
	body := fmt.Sprintf(`{"client_name":%q,"redirect_uris":[%q],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`, name, redirect)
	resp, raw := s.do(t, http.MethodPost, "/oauth/register", "application/json", body, "")
	var c mcpauth.RegistrationResponse
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(raw, &c) != nil || c.ClientID == "" {
		t.Fatalf("register: %d %s", resp.StatusCode, raw)
	}
	return c.ClientID
}

// pkce returns a code verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize checks an authorization request as the consent page does and, when it passes,
// approves it for the member as the page's Allow does; it returns the code.
func (s *site) authorize(t *testing.T, req mcpauth.AuthorizeRequest, account uuid.UUID, user members.User, role string) string {
	t.Helper()
	c, err := s.OAuth.CheckAuthorize(context.Background(), req)
	if err != nil {
		t.Fatalf("the authorization request %+v was refused: %v", req, err)
	}
	to, err := s.OAuth.Approve(context.Background(), c, account, user.ID, role)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(to)
	if err != nil || u.Query().Get("code") == "" || u.Query().Get("state") != req.State || u.Query().Get("iss") != s.URL {
		t.Fatalf("Approve sent the browser to %q, want the redirect URI with a code, the state %q and the issuer", to, req.State)
	}
	return u.Query().Get("code")
}

// request is a valid authorization request of client.
func (s *site) request(client, redirect, challenge string) mcpauth.AuthorizeRequest {
	return mcpauth.AuthorizeRequest{ResponseType: "code", ClientID: client, RedirectURI: redirect, State: "st-1",
		CodeChallenge: challenge, CodeChallengeMethod: "S256", Resource: s.URL + "/api/mcp", Scope: "mcp"}
}

// token posts a token request and returns the status and the decoded answer (tokens, or an
// OAuth error).
func (s *site) token(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, raw := s.do(t, http.MethodPost, "/oauth/token", "application/x-www-form-urlencoded", form.Encode(), "")
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("token: %d %s", resp.StatusCode, raw)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the token endpoint's answer has Cache-Control %q, want no-store", resp.Header.Get("Cache-Control"))
	}
	return resp.StatusCode, out
}

// codeGrant is the form of an authorization_code token request.
func (s *site) codeGrant(client, code, verifier, redirect string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {code}, "code_verifier": {verifier},
		"redirect_uri": {redirect}, "resource": {s.URL + "/api/mcp"}}
}

// tokens runs a whole authorization for the member and returns the access and refresh tokens.
func (s *site) tokens(t *testing.T, client, redirect string, account uuid.UUID, user members.User, role string) (access, refresh string) {
	t.Helper()
	verifier, challenge := pkce()
	code := s.authorize(t, s.request(client, redirect, challenge), account, user, role)
	status, out := s.token(t, s.codeGrant(client, code, verifier, redirect))
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, out)
	}
	if out["token_type"] != "Bearer" || out["expires_in"] != float64(600) {
		t.Errorf("token answer %v, want a Bearer token for 600 seconds", out)
	}
	access, _ = out["access_token"].(string)
	refresh, _ = out["refresh_token"].(string)
	if !strings.HasPrefix(access, "tgoa_") || !strings.HasPrefix(refresh, "tgor_") {
		t.Fatalf("token answer %v", out)
	}
	return access, refresh
}

// mcpResult is what a tools/call over /api/mcp answered.
type mcpResult struct {
	Status    int
	Challenge string // WWW-Authenticate
	Text      string // the tool's text, or the JSON-RPC error's message
	Code      int    // the JSON-RPC error code (0: none)
}

// call calls an MCP tool with bearer as the credential.
func (s *site) call(t *testing.T, bearer, tool string, args map[string]any) mcpResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	resp, raw := s.do(t, http.MethodPost, "/api/mcp", "application/json", string(body), bearer)
	var answer struct {
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("MCP %s: %d %s", tool, resp.StatusCode, raw)
	}
	r := mcpResult{Status: resp.StatusCode, Challenge: resp.Header.Get("WWW-Authenticate")}
	switch {
	case answer.Error != nil:
		r.Code, r.Text = answer.Error.Code, answer.Error.Message
	case answer.Result != nil && len(answer.Result.Content) > 0:
		r.Text = answer.Result.Content[0].Text
	}
	return r
}

// refused fails the test unless r is the 401 of a refused OAuth token.
func refused(t *testing.T, r mcpResult, why string) {
	t.Helper()
	if r.Status != http.StatusUnauthorized || r.Code != -32001 || !strings.Contains(r.Challenge, `error="invalid_token"`) {
		t.Fatalf("%s: MCP answered %+v, want 401 -32001 with error=\"invalid_token\"", why, r)
	}
}

// TestDiscovery: a request without credentials gets the 401 that names the protected-resource
// metadata, which names this gateway as the authorization server, whose metadata names the
// endpoints, S256 only; an API key works on /api/mcp as before.
func TestDiscovery(t *testing.T) {
	s := startSite(t)
	r := s.call(t, "", "list_storage_datasets", nil)
	wantMeta := s.URL + "/.well-known/oauth-protected-resource/api/mcp"
	if r.Status != http.StatusUnauthorized || r.Code != -32001 || !strings.Contains(r.Challenge, `resource_metadata="`+wantMeta+`"`) {
		t.Fatalf("without credentials: %+v, want 401 -32001 naming %s", r, wantMeta)
	}
	// A malformed API key is still refused as one, with the plain challenge of before.
	r = s.call(t, "tgk_nope", "list_storage_datasets", nil)
	if r.Status != http.StatusUnauthorized || strings.Contains(r.Challenge, "resource_metadata=") {
		t.Fatalf("with a malformed key: %+v", r)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/api/mcp", "/.well-known/oauth-protected-resource"} {
		resp, raw := s.do(t, http.MethodGet, path, "", "", "")
		var m mcpauth.ResourceMetadata
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &m) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
		}
		if m.Resource != s.URL+"/api/mcp" || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != s.URL {
			t.Errorf("%s: %+v", path, m)
		}
	}
	resp, raw := s.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", "", "", "")
	var m mcpauth.ServerMetadata
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &m) != nil {
		t.Fatalf("authorization-server metadata: %d %s", resp.StatusCode, raw)
	}
	if m.Issuer != s.URL || m.AuthorizationEndpoint != s.URL+"/oauth/authorize" || m.TokenEndpoint != s.URL+"/oauth/token" ||
		m.RegistrationEndpoint != s.URL+"/oauth/register" || strings.Join(m.CodeChallengeMethodsSupported, ",") != "S256" {
		t.Errorf("authorization-server metadata: %+v", m)
	}
	// The consent's redirect carries iss (site.authorize checks it), and the metadata says so
	// (RFC 9207): a client takes iss against mix-up only when it does; before, it was left out.
	if !strings.Contains(string(raw), `"authorization_response_iss_parameter_supported":true`) {
		t.Errorf("authorization-server metadata: %s, want authorization_response_iss_parameter_supported true", raw)
	}
	if r := s.call(t, s.Acme.Key, "list_storage_datasets", nil); r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") {
		t.Errorf("with an API key: %+v, want acme's datasets", r)
	}
}

// TestDiscoveryPreflight: a browser client (the MCP Inspector) fetching the metadata with the
// MCP-Protocol-Version header, as the TypeScript SDK's discovery does, has its preflight
// answered for each metadata document (before, it was 405 and the SDK retried without the
// header), as are the POST endpoints' preflights, which the OpenAPI document now describes.
func TestDiscoveryPreflight(t *testing.T) {
	s := startSite(t)
	for _, c := range []struct{ path, method, headers string }{
		{"/.well-known/oauth-protected-resource/api/mcp", "GET", "mcp-protocol-version"},
		{"/.well-known/oauth-protected-resource", "GET", "mcp-protocol-version"},
		{"/.well-known/oauth-authorization-server", "GET", "mcp-protocol-version"},
		{"/oauth/register", "POST", "content-type,mcp-protocol-version"},
		{"/oauth/token", "POST", "content-type,mcp-protocol-version"},
		{"/oauth/revoke", "POST", "content-type,mcp-protocol-version"},
	} {
		path := c.path
		req, err := http.NewRequest(http.MethodOptions, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Origin", "http://localhost:6274")
		req.Header.Set("Access-Control-Request-Method", c.method)
		req.Header.Set("Access-Control-Request-Headers", c.headers)
		resp, err := s.GW.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "*" ||
			h.Get("Access-Control-Allow-Methods") != c.method ||
			!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "mcp-protocol-version") {
			t.Errorf("preflight of %s: %d %v", path, resp.StatusCode, h)
		}
	}
}

// TestRegistrationRefusals: only public clients with https or loopback redirect URIs register.
func TestRegistrationRefusals(t *testing.T) {
	s := startSite(t)
	for _, c := range []struct{ body, wantError string }{
		{`{"redirect_uris":["http://evil.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://app.example/cb#frag"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":[]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"grant_types":["client_credentials"]}`, "invalid_client_metadata"},
		{`not json`, "invalid_client_metadata"},
		// Trial h11 D1, D2, D7: names and redirect hosts that would hide or reorder what the
		// consent page shows around them, or pass for another host.
		{`{"redirect_uris":["https://app.example/cb"],"client_name":"Claude Code\u202e moc.elgoog//:sptth"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"client_name":"a\u0000b"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://app.example/cb"],"client_name":"\u0007\u001b[31m"}`, "invalid_client_metadata"},
		{`{"redirect_uris":["https://cl\u0430ude.ai/api/mcp/auth_callback"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://claude.ai\u202e.evil.example/cb"]}`, "invalid_redirect_uri"},
		{`{"redirect_uris":["https://app.example/cb\u202e"]}`, "invalid_redirect_uri"},
	} {
		resp, raw := s.do(t, http.MethodPost, "/oauth/register", "application/json", c.body, "")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"error":"`+c.wantError+`"`) {
			t.Errorf("register %s: %d %s, want 400 %s", c.body, resp.StatusCode, raw, c.wantError)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:33418/callback", "http://localhost:9/cb", "http://[::1]:8/cb", "https://app.example/cb",
		"https://xn--clude-6of.ai/cb", "https://app.example/caf%C3%A9"} {
		s.register(t, "ok", ok)
	}
}

// TestAuthorizeRefusals: the consent page refuses plain PKCE, a missing challenge, another
// resource, a missing resource, an unregistered redirect URI and an unknown client, each with
// its OAuth error code (the console shows every refusal to the person, and never redirects).
func TestAuthorizeRefusals(t *testing.T) {
	s := startSite(t)
	redirect := "http://127.0.0.1:40000/callback"
	client := s.register(t, "refusals", redirect)
	_, challenge := pkce()
	base := s.request(client, redirect, challenge)
	cases := []struct {
		name      string
		edit      func(*mcpauth.AuthorizeRequest)
		wantCode  string
		redirects bool
	}{
		{"plain PKCE", func(r *mcpauth.AuthorizeRequest) { r.CodeChallengeMethod = "plain" }, "invalid_request", true},
		{"no PKCE", func(r *mcpauth.AuthorizeRequest) { r.CodeChallenge, r.CodeChallengeMethod = "", "" }, "invalid_request", true},
		{"another resource", func(r *mcpauth.AuthorizeRequest) { r.Resource = "https://other.example/api/mcp" }, "invalid_target", true},
		{"this gateway's other route", func(r *mcpauth.AuthorizeRequest) { r.Resource = s.URL + "/v1/chat/completions" }, "invalid_target", true},
		{"no resource", func(r *mcpauth.AuthorizeRequest) { r.Resource = "" }, "invalid_target", true},
		{"token response type", func(r *mcpauth.AuthorizeRequest) { r.ResponseType = "token" }, "unsupported_response_type", true},
		{"unregistered redirect", func(r *mcpauth.AuthorizeRequest) { r.RedirectURI = "http://127.0.0.1:40001/callback" }, "invalid_request", false},
		{"unknown client", func(r *mcpauth.AuthorizeRequest) { r.ClientID = "tgc_unknown" }, "invalid_client", false},
	}
	for _, c := range cases {
		req := base
		c.edit(&req)
		_, err := s.OAuth.CheckAuthorize(context.Background(), req)
		var refusal *mcpauth.AuthorizeError
		if !errors.As(err, &refusal) || refusal.Code != c.wantCode {
			t.Errorf("%s: %v, want %s", c.name, err, c.wantCode)
			continue
		}
	}
}

// TestCodeExchange: a wrong verifier, a wrong redirect URI, another resource and another
// client are refused; a code is single use, and its replay revokes the tokens it produced.
// The access token works on /api/mcp only.
func TestCodeExchange(t *testing.T) {
	s := startSite(t)
	redirect := "http://127.0.0.1:40000/callback"
	client := s.register(t, "exchange", redirect)
	other := s.register(t, "other", redirect)
	acme := s.Acme.Account.ID

	exchangeWith := func(name string, edit func(url.Values), wantError string) {
		t.Helper()
		verifier, challenge := pkce()
		code := s.authorize(t, s.request(client, redirect, challenge), acme, s.Alice, members.RoleOwner)
		form := s.codeGrant(client, code, verifier, redirect)
		edit(form)
		status, out := s.token(t, form)
		if status != http.StatusBadRequest || out["error"] != wantError {
			t.Errorf("%s: %d %v, want 400 %s", name, status, out, wantError)
		}
		// The refused attempt used the code up: the right request now fails too.
		if status, out := s.token(t, s.codeGrant(client, code, verifier, redirect)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("%s, then the right request: %d %v, want 400 invalid_grant", name, status, out)
		}
	}
	exchangeWith("wrong verifier", func(f url.Values) { f.Set("code_verifier", strings.Repeat("a", 43)) }, "invalid_grant")
	exchangeWith("wrong redirect", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:40000/other") }, "invalid_grant")
	exchangeWith("another client", func(f url.Values) { f.Set("client_id", other) }, "invalid_grant")
	if status, out := s.token(t, url.Values{"grant_type": {"authorization_code"}, "client_id": {client}, "code": {"tgoc_x"},
		"code_verifier": {strings.Repeat("a", 43)}, "redirect_uri": {redirect}, "resource": {"https://other.example/api/mcp"}}); status != http.StatusBadRequest || out["error"] != "invalid_target" {
		t.Errorf("another resource: %d %v, want 400 invalid_target", status, out)
	}

	verifier, challenge := pkce()
	code := s.authorize(t, s.request(client, redirect, challenge), acme, s.Alice, members.RoleOwner)
	status, out := s.token(t, s.codeGrant(client, code, verifier, redirect))
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, out)
	}
	access := out["access_token"].(string)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") {
		t.Fatalf("tools/call with the access token: %+v", r)
	}
	// Not an API key: refused on every other route.
	for _, path := range []string{"/v1/models", "/v1/credits"} {
		if resp, raw := s.do(t, http.MethodGet, path, "", "", access); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with the access token: %d %s, want 401", path, resp.StatusCode, raw)
		}
	}
	if resp, raw := s.do(t, http.MethodPost, "/v1/chat/completions", "application/json",
		`{"model":"service-flint","messages":[{"role":"user","content":"hi"}]}`, access); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("chat completions with the access token: %d %s, want 401", resp.StatusCode, raw)
	}

	// The code again: refused, and the tokens it produced stop working.
	if status, out := s.token(t, s.codeGrant(client, code, verifier, redirect)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("the code replayed: %d %v, want 400 invalid_grant", status, out)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after the code's replay")
}

// TestRefreshRotation: a refresh returns a new refresh token and the old one is refused; its
// reuse revokes the grant, so the new tokens stop too.
func TestRefreshRotation(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "rotation", redirect)
	_, first := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	refresh := func(token string) (int, map[string]any) {
		return s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {token}, "resource": {s.URL + "/api/mcp"}})
	}
	status, out := refresh(first)
	if status != http.StatusOK || out["refresh_token"] == first {
		t.Fatalf("refresh: %d %v, want new tokens", status, out)
	}
	second, access := out["refresh_token"].(string), out["access_token"].(string)
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {"tgc_other"}, "refresh_token": {second}}); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("refresh by another client: %d %v", status, out)
	}
	// Within the grace after its rotation, and before the new tokens are used, the old refresh
	// token is refused, but the grant stays (two requests of the client refreshing at once).
	if status, out := refresh(first); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token again at once: %d %v, want invalid_grant", status, out)
	}
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("the grant after a concurrent refresh: %+v, want it still in force", r)
	}
	// After the grace, a reuse revokes the grant.
	if _, err := s.GW.Store.Pool().Exec(context.Background(), `UPDATE oauth_tokens SET used_at = used_at - interval '1 minute' WHERE used_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if status, out := refresh(first); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("the rotated refresh token again: %d %v, want invalid_grant", status, out)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after the rotated refresh token's reuse")
	if status, out := refresh(second); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("the newest refresh token after the reuse: %d %v, want invalid_grant (the grant is revoked)", status, out)
	}
}

// TestRefreshReuseAfterItsSuccessorWasUsed: a rotated refresh token presented again within the
// grace revokes the grant once the tokens its rotation issued have been used (RFC 9700 section
// 4.14.2): an attacker who refreshed a stolen token first and used the new access token, or
// refreshed again, loses the grant when the client presents the token it still holds; the
// attacker's tokens are refused from then on. Before, the reuse within the grace was refused
// and the grant stayed with the attacker. A client racing itself keeps its grant: two
// refreshes with one token at the same instant get one new pair and one invalid_grant, and the
// new pair works.
func TestRefreshReuseAfterItsSuccessorWasUsed(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "reuse", redirect)
	refresh := func(token string) (int, map[string]any) {
		return s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {token}, "resource": {s.URL + "/api/mcp"}})
	}
	t.Run("benign race", func(t *testing.T) {
		_, stolen := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		answers := make([]map[string]any, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], answers[i] = refresh(stolen)
			}()
		}
		wg.Wait()
		won := slices.Index(statuses, http.StatusOK)
		if won < 0 || statuses[1-won] != http.StatusBadRequest || answers[1-won]["error"] != "invalid_grant" {
			t.Fatalf("two refreshes at once: %v %v, want one new pair and one invalid_grant", statuses, answers)
		}
		if r := s.call(t, answers[won]["access_token"].(string), "list_storage_datasets", nil); r.Status != http.StatusOK {
			t.Fatalf("the new access token after a concurrent refresh: %+v, want the grant in force", r)
		}
		if status, out := refresh(answers[won]["refresh_token"].(string)); status != http.StatusOK {
			t.Fatalf("the new refresh token after a concurrent refresh: %d %v", status, out)
		}
	})
	t.Run("new access token used", func(t *testing.T) {
		_, stolen := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
		status, out := refresh(stolen) // the attacker, first
		if status != http.StatusOK {
			t.Fatalf("the attacker's refresh: %d %v", status, out)
		}
		access, next := out["access_token"].(string), out["refresh_token"].(string)
		if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
			t.Fatalf("the attacker's access token: %+v", r)
		}
		if status, out := refresh(stolen); status != http.StatusBadRequest || out["error"] != "invalid_grant" || !strings.Contains(out["error_description"].(string), "revoked") { // the client, within the grace
			t.Fatalf("the client's refresh after the attacker's use: %d %v, want invalid_grant saying the grant is revoked", status, out)
		}
		refused(t, s.call(t, access, "list_storage_datasets", nil), "the attacker's access token after the reuse")
		if status, out := refresh(next); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Errorf("the attacker's refresh token after the reuse: %d %v, want invalid_grant", status, out)
		}
	})
	t.Run("new refresh token used", func(t *testing.T) {
		_, stolen := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
		status, out := refresh(stolen)
		if status != http.StatusOK {
			t.Fatalf("the attacker's refresh: %d %v", status, out)
		}
		status, out = refresh(out["refresh_token"].(string))
		if status != http.StatusOK {
			t.Fatalf("the attacker's second refresh: %d %v", status, out)
		}
		if status, out := refresh(stolen); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
			t.Fatalf("the client's refresh after the attacker's: %d %v, want invalid_grant", status, out)
		}
		refused(t, s.call(t, out["access_token"].(string), "list_storage_datasets", nil), "the attacker's newest access token after the reuse")
	})
}

// TestExpiredToken: an access token past its lifetime is refused, and a refresh brings a new
// one.
func TestExpiredToken(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "expiry", redirect)
	access, refresh := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("a fresh token: %+v", r)
	}
	// Age the token in the database, as ten minutes would.
	if _, err := s.GW.Store.Pool().Exec(context.Background(), `UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access'`); err != nil {
		t.Fatal(err)
	}
	r := s.call(t, access, "list_storage_datasets", nil)
	refused(t, r, "an expired token")
	if !strings.Contains(r.Challenge, "expired") {
		t.Errorf("the challenge %q does not say the token expired", r.Challenge)
	}
	status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
	if status != http.StatusOK {
		t.Fatalf("refresh after expiry: %d %v", status, out)
	}
	if r := s.call(t, out["access_token"].(string), "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Errorf("the new token: %+v", r)
	}
}

// TestRevocationAndMembership: a grant revoked (as on the console) is refused at the next
// request, well within a second; a member removed from the account, or whose role is lowered,
// loses the grant's power at once; RFC 7009 revocation by the client works too.
func TestRevocationAndMembership(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	client := s.register(t, "revocation", redirect)
	acme := s.Acme.Account.ID

	access, _ := s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("before revoking: %+v", r)
	}
	grants, err := s.OAuth.Grants(ctx, acme)
	if err != nil || len(grants) != 1 || grants[0].ClientName != "revocation" || grants[0].UserEmail != "alice@example.com" || grants[0].LastUsedAt == nil {
		t.Fatalf("the account's grants: %+v %v, want the one grant, used", grants, err)
	}
	start := time.Now()
	if _, err := s.OAuth.Revoke(ctx, acme, grants[0].ID, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after revoking the grant")
	if d := time.Since(start); d > time.Second {
		t.Errorf("the revocation took %v to take effect", d)
	}
	// Another account cannot revoke (nor see) acme's grant.
	if _, err := s.OAuth.Revoke(ctx, s.Globex.Account.ID, grants[0].ID, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("globex revoking acme's grant: %v, want not found", err)
	}

	// A member removed from the account: the grant stops.
	carol, err := s.members.Add(ctx, acme, "carol@example.com", members.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	access, refreshToken := s.tokens(t, client, redirect, acme, carol, members.RoleMember)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("carol's token: %+v", r)
	}
	if _, err := s.members.Remove(ctx, acme, "carol@example.com", false); err != nil {
		t.Fatal(err)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after removing the member")
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refreshToken}}); status != http.StatusBadRequest {
		t.Errorf("refresh after removing the member: %d %v, want 400", status, out)
	}
	// Added again (trial h6: the old tokens worked again): the grant stays revoked, and says why.
	if _, err := s.members.Add(ctx, acme, "carol@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	r := s.call(t, access, "list_storage_datasets", nil)
	refused(t, r, "after adding the removed member again")
	if !strings.Contains(r.Challenge, "removed from the account") {
		t.Errorf("the challenge %q does not say why", r.Challenge)
	}
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refreshToken}}); status != http.StatusBadRequest {
		t.Errorf("refresh after adding the removed member again: %d %v, want 400", status, out)
	}

	// An owner lowered to member: the grant she approved as owner stops (she allows the client
	// again, within her new role), and so does its refresh token.
	dave, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	access, refreshToken = s.tokens(t, client, redirect, acme, dave, members.RoleOwner)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("dave's token: %+v", r)
	}
	if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	r = s.call(t, access, "list_storage_datasets", nil)
	refused(t, r, "after lowering the member's role")
	if !strings.Contains(r.Challenge, "role was lowered") {
		t.Errorf("the challenge %q does not say why", r.Challenge)
	}
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refreshToken}}); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("refresh after lowering the role: %d %v, want invalid_grant", status, out)
	}
	// Raised again: the grant made as owner stays revoked.
	if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleOwner); err != nil {
		t.Fatal(err)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after raising the lowered role again")
	if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleMember); err != nil {
		t.Fatal(err)
	}
	access, _ = s.tokens(t, client, redirect, acme, dave, members.RoleMember)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Errorf("dave's new grant as a member: %+v", r)
	}

	// RFC 7009: the client revokes its own refresh token, and the grant with it.
	access, refreshToken = s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	resp, raw := s.do(t, http.MethodPost, "/oauth/revoke", "application/x-www-form-urlencoded",
		url.Values{"token": {refreshToken}, "client_id": {client}}.Encode(), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d %s", resp.StatusCode, raw)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "after the client revoked its token")
}

// TestCrossTenant: a grant of acme's member reaches acme's data only: globex's dataset is
// neither listed nor queryable with it, and the grant is not listed for globex.
func TestCrossTenant(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "tenant", redirect)
	access, _ := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	r := s.call(t, access, "list_storage_datasets", nil)
	if r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") || strings.Contains(r.Text, "secret") {
		t.Fatalf("acme's grant lists %+v, want sales and not globex's secret", r)
	}
	r = s.call(t, access, "query_data", map[string]any{"dataset": "tenant/" + s.Globex.Account.ID.String() + "/secret", "sql": "SELECT * FROM secret"})
	if !strings.Contains(r.Text, "not owned by the caller") || strings.Contains(r.Text, "globex-only-value") {
		t.Errorf("acme's grant querying globex's dataset: %+v, want a refusal", r)
	}
	if gs, err := s.OAuth.Grants(context.Background(), s.Globex.Account.ID); err != nil || len(gs) != 0 {
		t.Errorf("globex's grants: %+v %v, want none", gs, err)
	}
	// A code issued for a member of acme cannot be bound to globex by the client: the account
	// is the consent's, never a parameter of the client.
	if r := s.call(t, s.Globex.Key, "list_storage_datasets", nil); !strings.Contains(r.Text, "secret") || strings.Contains(r.Text, "sales") {
		t.Errorf("globex's key lists %+v", r)
	}
}

// TestAudience: a token whose grant names another resource (say, the gateway's old address)
// is refused on /api/mcp: every token is checked for this resource as its audience.
func TestAudience(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "audience", redirect)
	access, _ := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("before: %+v", r)
	}
	if _, err := s.GW.Store.Pool().Exec(context.Background(), `UPDATE oauth_grants SET resource = 'https://other.example/api/mcp'`); err != nil {
		t.Fatal(err)
	}
	r := s.call(t, access, "list_storage_datasets", nil)
	refused(t, r, "a token of another resource")
	if !strings.Contains(r.Challenge, "another resource") {
		t.Errorf("the challenge %q does not say why", r.Challenge)
	}
}

// TestClientIDMetadataDocument: a client whose client_id is the https URL of its metadata
// document registers nowhere: the consent page fetches the document, and the code it issues is
// exchanged with that client_id. A document that does not name itself, or lacks the redirect
// URI, is refused; and the gateway fetches documents from public addresses only.
func TestClientIDMetadataDocument(t *testing.T) {
	s := startSite(t)
	redirect := "http://127.0.0.1:40010/callback"
	var docURL string
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/client.json":
			fmt.Fprintf(w, `{"client_id":%q,"client_name":"Doc Client","redirect_uris":[%q],"token_endpoint_auth_method":"none"}`, docURL+"/client.json", redirect)
		case "/impostor.json":
			fmt.Fprintf(w, `{"client_id":%q,"client_name":"Impostor","redirect_uris":[%q]}`, docURL+"/client.json", redirect)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(docs.Close)
	docURL = docs.URL
	fetching, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/", DocumentClient: docs.Client()})
	if err != nil {
		t.Fatal(err)
	}
	s.OAuth = fetching
	client := docURL + "/client.json"
	verifier, challenge := pkce()
	c, err := s.OAuth.CheckAuthorize(context.Background(), s.request(client, redirect, challenge))
	if err != nil || c.Client.Name != "Doc Client" {
		t.Fatalf("the document client: %+v %v", c.Client, err)
	}
	code := s.authorize(t, s.request(client, redirect, challenge), s.Acme.Account.ID, s.Alice, members.RoleOwner)
	status, out := s.token(t, s.codeGrant(client, code, verifier, redirect))
	if status != http.StatusOK {
		t.Fatalf("token for the document client: %d %v", status, out)
	}
	if r := s.call(t, out["access_token"].(string), "list_storage_datasets", nil); r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") {
		t.Errorf("the document client's token: %+v", r)
	}
	for name, req := range map[string]mcpauth.AuthorizeRequest{
		"a document naming another client": s.request(docURL+"/impostor.json", redirect, challenge),
		"a missing document":               s.request(docURL+"/nope.json", redirect, challenge),
		"a redirect URI not in it":         s.request(client, "http://127.0.0.1:40011/callback", challenge),
	} {
		var refusal *mcpauth.AuthorizeError
		if _, err := s.OAuth.CheckAuthorize(context.Background(), req); !errors.As(err, &refusal) {
			t.Errorf("%s: %v, want a refusal shown to the person", name, err)
		}
	}
	// The gateway's own fetcher does not reach loopback (nor private) addresses.
	guarded, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var refusal *mcpauth.AuthorizeError
	if _, err := guarded.CheckAuthorize(context.Background(), s.request(client, redirect, challenge)); !errors.As(err, &refusal) || !strings.Contains(refusal.Message, "could not be fetched") {
		t.Errorf("a document on a loopback address with the default fetcher: %v, want it not fetched", err)
	}
	resp, raw := s.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", "", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"client_id_metadata_document_supported":true`) {
		t.Errorf("the metadata does not announce client ID metadata documents: %s", raw)
	}
}

// TestGrantsPerClientAreBounded: a member holds at most store.MaxOAuthGrantsPerClient grants of
// one client in force; a new one revokes the oldest, whose tokens are refused at once. Trial h11
// D8: a member held 29 grants of one client, each with its own request budget.
func TestGrantsPerClientAreBounded(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	client := s.register(t, "many", redirect)
	acme := s.Acme.Account.ID
	first, _ := s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	for range store.MaxOAuthGrantsPerClient {
		s.tokens(t, client, redirect, acme, s.Alice, members.RoleOwner)
	}
	grants, err := s.OAuth.Grants(ctx, acme)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != store.MaxOAuthGrantsPerClient {
		t.Errorf("%d grants in force, want %d", len(grants), store.MaxOAuthGrantsPerClient)
	}
	refused(t, s.call(t, first, "list_storage_datasets", nil), "the oldest grant's token after the eleventh grant")
}

// TestCodeOfAFormerMemberIsRefused: a code is issued on the consent page and redeemed by the
// client up to a minute later. A member removed from the account (or whose role was lowered) in
// between revokes the grants she holds, but the code was not a grant yet: redeemed after, it
// made a grant in force that nothing had revoked, refused only while she was out of the account
// (or below the role), so that adding her back (or raising the role again) brought it back to
// life, against the promise of TestRevocationAndMembership. The token endpoint now refuses
// such a code (invalid_grant, saying why) and issues nothing.
func TestCodeOfAFormerMemberIsRefused(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	client := s.register(t, "in-flight", redirect)
	acme := s.Acme.Account.ID

	for _, c := range []struct {
		name, email, role string
		change, restore   func(t *testing.T)
		why               string
	}{
		{"removed", "carol@example.com", members.RoleMember,
			func(t *testing.T) {
				if _, err := s.members.Remove(ctx, acme, "carol@example.com", false); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T) {
				if _, err := s.members.Add(ctx, acme, "carol@example.com", members.RoleMember); err != nil {
					t.Fatal(err)
				}
			},
			"no longer in the account"},
		{"lowered", "dave@example.com", members.RoleOwner,
			func(t *testing.T) {
				if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleMember); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T) {
				if _, err := s.members.Add(ctx, acme, "dave@example.com", members.RoleOwner); err != nil {
					t.Fatal(err)
				}
			},
			"role was lowered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			user, err := s.members.Add(ctx, acme, c.email, c.role)
			if err != nil {
				t.Fatal(err)
			}
			verifier, challenge := pkce()
			code := s.authorize(t, s.request(client, redirect, challenge), acme, user, c.role)
			c.change(t) // while the client has the code and has not redeemed it yet
			status, out := s.token(t, s.codeGrant(client, code, verifier, redirect))
			access, _ := out["access_token"].(string)
			c.restore(t)
			if access != "" {
				r := s.call(t, access, "list_storage_datasets", nil)
				t.Fatalf("the code was redeemed after the change (%d); once the member was restored its token answered %d: %.200s", status, r.Status, r.Text)
			}
			if desc, _ := out["error_description"].(string); status != http.StatusBadRequest || out["error"] != "invalid_grant" || !strings.Contains(desc, c.why) {
				t.Fatalf("the code redeemed after the change: %d %v, want invalid_grant saying %q", status, out, c.why)
			}
			grants, err := s.OAuth.Grants(ctx, acme)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range grants {
				if g.UserID == user.ID {
					t.Fatalf("a grant of %s is in force: %+v", c.email, g)
				}
			}
		})
	}
}

// TestCodeWithoutRedirectURI: a client with one registered redirect URI may leave redirect_uri
// out of the authorization request (RFC 6749 section 3.1.2.3); its token request then needs
// none (section 4.1.3, OAuth 2.1 section 4.1.3), and may name the URI the code went to, but no
// other. A request that carried redirect_uri must repeat it. The authorization request goes
// through the consent page's round trip: checked, posted back from the form's fields, checked
// again, approved.
func TestCodeWithoutRedirectURI(t *testing.T) {
	s := startSite(t)
	redirect := "http://127.0.0.1:40000/callback"
	client := s.register(t, "no-redirect", redirect)
	acme := s.Acme.Account.ID

	// consent is the consent page's round trip for req: the code, and where the browser went.
	consent := func(req mcpauth.AuthorizeRequest) (string, *url.URL) {
		t.Helper()
		shown, err := s.OAuth.CheckAuthorize(context.Background(), req)
		if err != nil {
			t.Fatalf("the authorization request was refused: %v", err)
		}
		posted, err := s.OAuth.CheckAuthorize(context.Background(), mcpauth.AuthorizeRequestFrom(shown.Request.Values()))
		if err != nil {
			t.Fatalf("the consent form's request was refused: %v", err)
		}
		to, err := s.OAuth.Approve(context.Background(), posted, acme, s.Alice.ID, members.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(to)
		if err != nil || u.Query().Get("code") == "" {
			t.Fatalf("Approve sent the browser to %q, want the redirect URI with a code", to)
		}
		return u.Query().Get("code"), u
	}
	for _, c := range []struct {
		name       string
		sent, told string // redirect_uri in the authorization request, in the token request
		status     int
		wantError  string
	}{
		{"left out, then left out", "", "", http.StatusOK, ""},
		{"left out, then the one used", "", redirect, http.StatusOK, ""},
		{"left out, then another", "", "http://127.0.0.1:40000/other", http.StatusBadRequest, "invalid_grant"},
		{"sent, then left out", redirect, "", http.StatusBadRequest, "invalid_request"},
		{"sent, then another", redirect, "http://127.0.0.1:40000/other", http.StatusBadRequest, "invalid_grant"},
		{"sent, then sent", redirect, redirect, http.StatusOK, ""},
	} {
		verifier, challenge := pkce()
		req := s.request(client, c.sent, challenge)
		code, went := consent(req)
		if went.Scheme+"://"+went.Host+went.Path != redirect {
			t.Errorf("%s: the browser went to %s, want the registered %s", c.name, went, redirect)
		}
		form := s.codeGrant(client, code, verifier, c.told)
		if c.told == "" {
			form.Del("redirect_uri")
		}
		status, out := s.token(t, form)
		if status != c.status || (c.wantError != "" && out["error"] != c.wantError) {
			t.Errorf("%s: %d %v, want %d %s", c.name, status, out, c.status, c.wantError)
			continue
		}
		if status == http.StatusOK {
			if r := s.call(t, out["access_token"].(string), "list_storage_datasets", nil); r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") {
				t.Errorf("%s: tools/call with the access token: %+v", c.name, r)
			}
		}
	}
}
