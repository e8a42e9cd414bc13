package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestKeyRefusalKeepsPlainChallenge: on /api/mcp a refused API key (malformed, or well-formed
// but unknown) or an x-api-key header gets the plain challenge it got before OAuth existed, never
// the resource_metadata one (which would start a browser sign-in in MCP clients); no
// credential gets the resource_metadata challenge, and a refused OAuth token gets it with
// error="invalid_token". Each message says what was wrong as the API routes do, and no
// credential is also told of the OAuth sign-in the challenge names (newcomer trial finding 9).
func TestKeyRefusalKeepsPlainChallenge(t *testing.T) {
	s := startSite(t)
	unknown := s.Acme.Key[:len(s.Acme.Key)-4] + "AAAA"
	if unknown == s.Acme.Key {
		unknown = s.Acme.Key[:len(s.Acme.Key)-4] + "BBBB"
	}
	for name, key := range map[string]string{"a malformed key": "tgk_nope", "an unknown key": unknown, "a foreign token": "sk-ant-xyz"} {
		r := s.call(t, key, "list_storage_datasets", nil)
		if r.Status != http.StatusUnauthorized || r.Challenge != `Bearer realm="tollgate"` {
			t.Errorf("%s: %d %q, want 401 with the plain challenge Bearer realm=\"tollgate\"", name, r.Status, r.Challenge)
		}
		if !strings.HasPrefix(r.Text, "unauthenticated: no verified caller: ") || !strings.Contains(r.Text, "key") ||
			strings.Contains(r.Text, "OAuth") {
			t.Errorf("%s: message %q, want the key's refusal after the specified prefix", name, r.Text)
		}
	}
	if r := s.call(t, unknown, "list_storage_datasets", nil); !strings.Contains(r.Text, "invalid API key: it has the form of a tollgate key, but its checksum does not match") {
		t.Errorf("a key with its last characters changed: message %q", r.Text)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("x-api-key", s.Acme.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="tollgate"` {
		t.Errorf("an x-api-key header: %d %q, want the plain challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if r := s.call(t, "", "list_storage_datasets", nil); r.Status != http.StatusUnauthorized || !strings.Contains(r.Challenge, "resource_metadata=") ||
		strings.Contains(r.Challenge, "error=") {
		t.Errorf("no credential: %d %q, want the resource_metadata challenge without an error", r.Status, r.Challenge)
	} else if want := "unauthenticated: no verified caller: missing API key: send it as 'Authorization: Bearer <key>', or sign in with OAuth"; r.Text != want {
		t.Errorf("no credential: message %q, want %q", r.Text, want)
	}
	r := s.call(t, "tgoa_unknown", "list_storage_datasets", nil)
	refused(t, r, "an unknown OAuth token")
	if !strings.Contains(r.Challenge, "resource_metadata=") {
		t.Errorf("an unknown OAuth token: %q, want the resource_metadata challenge", r.Challenge)
	}
}

// TestGrantPrincipalAndRateLimit: a verified access token's principal names the grant, the
// member and the client, and carries the per-grant rate limit, which the gateway's limiter
// enforces per grant: one grant's requests beyond it are refused (429) while another grant
// and the account's API key are still served.
func TestGrantPrincipalAndRateLimit(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "Limited App", redirect)
	access, _ := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	other, _ := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	p, g, err := s.OAuth.Verify(context.Background(), access)
	if err != nil {
		t.Fatal(err)
	}
	if p.OAuth == nil || p.OAuth.GrantID != g.ID || p.OAuth.UserID != s.Alice.ID || p.OAuth.UserEmail != "alice@example.com" ||
		p.OAuth.ClientID != client || p.OAuth.ClientName != "Limited App" {
		t.Fatalf("the principal's OAuth actor is %+v, want the grant %s, alice and the client %s", p.OAuth, g.ID, client)
	}
	if p.RPMLimit != mcpauth.DefaultGrantRPM || p.KeyText() != "oauth-grant:"+g.ID.String() {
		t.Fatalf("the principal's limit is %d keyed %q, want %d per grant", p.RPMLimit, p.KeyText(), mcpauth.DefaultGrantRPM)
	}
	limited := -1
	for i := 0; i < mcpauth.DefaultGrantRPM*2; i++ {
		if r := s.call(t, access, "list_storage_datasets", nil); r.Status == http.StatusTooManyRequests {
			limited = i
			break
		} else if r.Status != http.StatusOK {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if limited < mcpauth.DefaultGrantRPM/2 {
		t.Fatalf("the grant was limited after %d calls, want a 429 after about %d", limited, mcpauth.DefaultGrantRPM)
	}
	if r := s.call(t, other, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Errorf("another grant of the same member after the first one's limit: %+v, want it served", r)
	}
	if r := s.call(t, s.Acme.Key, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Errorf("the account's API key after the grant's limit: %+v, want it served", r)
	}
}

// TestDocumentFetchFailuresLookAlike: a client ID metadata document that cannot be fetched is
// refused with one message whatever the cause (an address the gateway does not reach, a 404, a
// 500, a body over 5 KiB), so that client IDs cannot probe what the gateway's network reaches
// or answers.
func TestDocumentFetchFailuresLookAlike(t *testing.T) {
	s := startSite(t)
	redirect := "http://127.0.0.1:40010/callback"
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/500.json":
			w.WriteHeader(http.StatusInternalServerError)
		case "/big.json":
			_, _ = w.Write([]byte(strings.Repeat(" ", 6<<10)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(docs.Close)
	fetching, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/", DocumentClient: docs.Client()})
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	_, challenge := pkce()
	message := func(srv *mcpauth.Server, path string) string {
		t.Helper()
		client := docs.URL + path
		_, err := srv.CheckAuthorize(context.Background(), s.request(client, redirect, challenge))
		var refusal *mcpauth.AuthorizeError
		if !errors.As(err, &refusal) {
			t.Fatalf("%s: %v, want a refusal", path, err)
		}
		return strings.ReplaceAll(refusal.Message, client, "<client>")
	}
	want := message(guarded, "/client.json") // a loopback address: refused by the dialer
	for _, path := range []string{"/404.json", "/500.json", "/big.json"} {
		if got := message(fetching, path); got != want {
			t.Errorf("%s: %q, want the same refusal as an unreachable address: %q", path, got, want)
		}
	}
}

// TestDocumentFetchesPerHostAreBounded: any signed-in member can make the consent page fetch
// any public https URL as a client ID; a loop of them over one host (host and port) is cut off
// after the host's burst (ten), without a fetch, saying so, while documents on other hosts are
// still fetched, and the host's fetches come back as its bucket refills.
func TestDocumentFetchesPerHostAreBounded(t *testing.T) {
	s := startSite(t)
	var fetched atomic.Int64
	docs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(docs.Close)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv, err := mcpauth.New(mcpauth.Options{Store: s.GW.Store, PublicURL: s.URL + "/", DocumentClient: docs.Client(), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, challenge := pkce()
	refusal := func(client string) string {
		t.Helper()
		_, err := srv.CheckAuthorize(context.Background(), s.request(client, "http://127.0.0.1:40010/callback", challenge))
		var ae *mcpauth.AuthorizeError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v, want a refusal", client, err)
		}
		return ae.Message
	}
	for i := range 10 {
		if msg := refusal(fmt.Sprintf("%s/victim/%d.json", docs.URL, i)); strings.Contains(msg, "too often") {
			t.Fatalf("fetch %d refused as too often: %s", i+1, msg)
		}
	}
	if msg := refusal(docs.URL + "/victim/10.json"); !strings.Contains(msg, "fetched too often") || fetched.Load() != 10 {
		t.Fatalf("the eleventh: %q; fetched %d times, want 10", msg, fetched.Load())
	}
	// Another host is fetched.
	otherDocs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(otherDocs.Close)
	if msg := refusal(otherDocs.URL + "/app.json"); strings.Contains(msg, "too often") || fetched.Load() != 11 {
		t.Errorf("another host: %q; fetched %d times", msg, fetched.Load())
	}
	mu.Lock()
	now = now.Add(6 * time.Second) // one fetch a six seconds refills
	mu.Unlock()
	if msg := refusal(docs.URL + "/victim/11.json"); strings.Contains(msg, "too often") || fetched.Load() != 12 {
		t.Errorf("after the refill: %q; fetched %d times", msg, fetched.Load())
	}
}

// TestConcurrentRefresh: two refreshes with the same refresh token at once get one new pair
// and one invalid_grant, and the grant stays in force (its newest tokens work).
func TestConcurrentRefresh(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "concurrent", redirect)
	_, refresh := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	form := url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}, "resource": {s.URL + "/api/mcp"}}
	type answer struct {
		status int
		out    map[string]any
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(s.URL+"/oauth/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
			if err != nil {
				answers <- answer{status: -1}
				return
			}
			defer resp.Body.Close()
			var out map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&out)
			answers <- answer{resp.StatusCode, out}
		}()
	}
	var fresh string
	statuses := map[int]int{}
	for range 2 {
		a := <-answers
		statuses[a.status]++
		if a.status == http.StatusOK {
			fresh, _ = a.out["access_token"].(string)
		} else if a.out["error"] != "invalid_grant" {
			t.Errorf("the refused refresh: %d %v, want invalid_grant", a.status, a.out)
		}
	}
	if statuses[http.StatusOK] != 1 || statuses[http.StatusBadRequest] != 1 {
		t.Fatalf("two concurrent refreshes answered %v, want one 200 and one 400", statuses)
	}
	if r := s.call(t, fresh, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Errorf("the winner's access token: %+v, want the grant still in force", r)
	}
}

// TestGrantLifetime: a refresh near the end of a grant's absolute lifetime issues tokens that
// expire with the grant, and after it the refresh token and the access token are refused.
func TestGrantLifetime(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	client := s.register(t, "lifetime", redirect)
	_, refresh := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	var grant string
	if err := s.GW.Store.Pool().QueryRow(ctx, `UPDATE oauth_grants SET created_at = now() - $1::interval + interval '1 hour' RETURNING id::text`,
		fmt.Sprintf("%d seconds", int(mcpauth.DefaultGrantLifetime.Seconds()))).Scan(&grant); err != nil {
		t.Fatal(err)
	}
	status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {refresh}})
	if status != http.StatusOK {
		t.Fatalf("refresh within the lifetime: %d %v", status, out)
	}
	var beyond int
	if err := s.GW.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id
		WHERE g.id = $1 AND t.used_at IS NULL AND t.expires_at > g.created_at + $2::interval`, grant, fmt.Sprintf("%d seconds", int(mcpauth.DefaultGrantLifetime.Seconds()))).Scan(&beyond); err != nil || beyond != 0 {
		t.Fatalf("%d tokens outlive the grant's lifetime (%v), want none", beyond, err)
	}
	access, renew := out["access_token"].(string), out["refresh_token"].(string)
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK {
		t.Fatalf("within the lifetime: %+v", r)
	}
	if _, err := s.GW.Store.Pool().Exec(ctx, `UPDATE oauth_grants SET created_at = created_at - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "an access token past its grant's lifetime")
	if status, out := s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {renew}}); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Errorf("a refresh past the grant's lifetime: %d %v, want invalid_grant", status, out)
	}
}

// TestEndpointBounds: a registration's redirect URIs are at most 10 of at most 2 KiB each; the
// first registration of the process deletes the registered clients older than a day that never
// got a grant (and keeps those that did); registration, token and revocation requests beyond
// an address's rate are answered 429 with Retry-After in the OAuth error shape.
func TestEndpointBounds(t *testing.T) {
	s := startSite(t)
	ctx := context.Background()
	redirect := "https://app.example/cb"
	// Registered before, by someone: one client never used, one with a grant.
	unused, err := s.GW.Store.CreateOAuthClient(ctx, store.OAuthClient{ID: "tgc_unused", Name: "abandoned", RedirectURIs: []string{redirect}})
	if err != nil {
		t.Fatal(err)
	}
	used, err := s.GW.Store.CreateOAuthClient(ctx, store.OAuthClient{ID: "tgc_used", Name: "in use", RedirectURIs: []string{redirect}})
	if err != nil {
		t.Fatal(err)
	}
	s.tokens(t, used.ID, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	if _, err := s.GW.Store.Pool().Exec(ctx, `UPDATE oauth_clients SET created_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	long := "https://app.example/" + strings.Repeat("a", 2<<10)
	many := make([]string, 11)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("https://app.example/cb%d", i))
	}
	for name, body := range map[string]string{
		"a redirect URI over 2 KiB": `{"redirect_uris":["` + long + `"]}`,
		"11 redirect URIs":          `{"redirect_uris":[` + strings.Join(many, ",") + `]}`,
	} {
		if resp, raw := s.do(t, http.MethodPost, "/oauth/register", "application/json", body, ""); resp.StatusCode != http.StatusBadRequest ||
			!strings.Contains(string(raw), `"error":"invalid_redirect_uri"`) {
			t.Errorf("%s: %d %.200s, want 400 invalid_redirect_uri", name, resp.StatusCode, raw)
		}
	}
	s.register(t, "fresh", redirect)
	if _, err := s.GW.Store.GetOAuthClient(ctx, unused.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the client unused for two days: %v, want it deleted", err)
	}
	if _, err := s.GW.Store.GetOAuthClient(ctx, used.ID); err != nil {
		t.Errorf("the client with a grant: %v, want it kept", err)
	}
	limitedAfter := func(path, contentType, body string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			resp, raw := s.do(t, http.MethodPost, path, contentType, body, "")
			if resp.StatusCode != http.StatusTooManyRequests {
				continue
			}
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(raw), `"error":"temporarily_unavailable"`) {
				t.Errorf("%s: 429 with Retry-After %q and %s, want Retry-After and the OAuth error shape", path, resp.Header.Get("Retry-After"), raw)
			}
			return
		}
		t.Errorf("%s: 200 requests from one address were all served, want a 429", path)
	}
	limitedAfter("/oauth/register", "application/json", `{"redirect_uris":["`+redirect+`"]}`)
	limitedAfter("/oauth/token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=tgc_x&refresh_token=tgor_x")
	limitedAfter("/oauth/revoke", "application/x-www-form-urlencoded", "client_id=tgc_x&token=tgor_x")
}

// TestLimitsPerClientBehindProxies: behind a trusted proxy (server.trusted_proxies; here the
// loopback address the test's requests come from), the registrations limited per client
// address are limited per X-Forwarded-For client: one client's 429 leaves another served, and
// what a client writes to the left of its proxy's entry does not give it a new bucket. Before,
// every client behind a load balancer shared the balancer's bucket (10 registrations a minute
// for all of them). From a peer that is not listed, loopback included, the header is not
// believed: a client cannot pick a new address per request (the review of 2335ecd, which
// trusted loopback by default: a local proxy that does not rewrite the header, an ssh tunnel
// or a port-forward passed every remote client's own header through).
func TestLimitsPerClientBehindProxies(t *testing.T) {
	const redirect = "https://app.example/cb"
	register := func(s *site, forwardedFor string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL+"/oauth/register", strings.NewReader(`{"redirect_uris":["`+redirect+`"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", forwardedFor)
		resp, err := s.GW.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	exhaust := func(s *site, forwardedFor string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			if register(s, forwardedFor) == http.StatusTooManyRequests {
				return
			}
		}
		t.Fatal("200 registrations of one client were all served, want a 429")
	}
	behind := startSite(t, func(c *config.Config) { c.Server.TrustedProxies = []string{"127.0.0.1"} })
	exhaust(behind, "203.0.113.1")
	if got := register(behind, "198.51.100.7, 203.0.113.1"); got != http.StatusTooManyRequests {
		t.Errorf("the limited client with an address of its own choosing on the left: %d, want 429", got)
	}
	if got := register(behind, "203.0.113.2"); got != http.StatusCreated && got != http.StatusOK {
		t.Errorf("another client behind the same proxy: %d, want it served", got)
	}
	direct := startSite(t)
	exhaust(direct, "203.0.113.1")
	if got := register(direct, "203.0.113.2"); got != http.StatusTooManyRequests {
		t.Errorf("a peer that is no trusted proxy, with another X-Forwarded-For: %d, want 429 (the header not believed)", got)
	}
}

// TestOAuthAnswersAreNotSniffed: every JSON answer of the OAuth endpoints, the refusals above
// all (which repeat what the client sent: a parameter's name, say), carries
// X-Content-Type-Options: nosniff with its application/json, so that no browser reads one as
// another type: the metadata documents, a registration, the 400s of the registration, token
// and revocation endpoints, and the 429 of an address over its rate. (They had none.)
func TestOAuthAnswersAreNotSniffed(t *testing.T) {
	s := startSite(t)
	check := func(what string, resp *http.Response, status int) {
		t.Helper()
		if resp.StatusCode != status {
			t.Errorf("%s: %d, want %d", what, resp.StatusCode, status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", what, ct)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
		}
	}
	resp, _ := s.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", "", "", "")
	check("the authorization server's metadata", resp, http.StatusOK)
	resp, _ = s.do(t, http.MethodGet, "/.well-known/oauth-protected-resource/api/mcp", "", "", "")
	check("the protected resource's metadata", resp, http.StatusOK)
	resp, _ = s.do(t, http.MethodPost, "/oauth/register", "application/json", `{"redirect_uris":["https://app.example/cb"],"client_name":"ok"}`, "")
	check("a registration", resp, http.StatusCreated)
	resp, _ = s.do(t, http.MethodPost, "/oauth/register", "application/json", `not json`, "")
	check("a refused registration", resp, http.StatusBadRequest)
	resp, _ = s.do(t, http.MethodPost, "/oauth/token", "text/html", `<b>x</b>`, "")
	check("a token request that is not a form", resp, http.StatusBadRequest)
	resp, _ = s.do(t, http.MethodPost, "/oauth/token", "application/x-www-form-urlencoded", "grant_type=authorization_code&code=nope&code=<script>", "")
	check("a token request with a repeated parameter", resp, http.StatusBadRequest)
	resp, _ = s.do(t, http.MethodPost, "/oauth/token", "application/x-www-form-urlencoded", "grant_type=authorization_code&code=nope&client_id=nobody", "")
	check("a token request with an unknown code", resp, http.StatusBadRequest)
	resp, _ = s.do(t, http.MethodPost, "/oauth/revoke", "text/plain", "x", "")
	check("a revocation that is not a form", resp, http.StatusBadRequest)
	for i := 0; ; i++ {
		resp, _ = s.do(t, http.MethodPost, "/oauth/register", "application/json", `not json`, "")
		if resp.StatusCode == http.StatusTooManyRequests {
			check("a registration over the address's rate", resp, http.StatusTooManyRequests)
			break
		}
		if i > 100 {
			t.Fatalf("no 429 after %d registrations", i)
		}
	}
}
