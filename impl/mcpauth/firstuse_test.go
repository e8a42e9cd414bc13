package mcpauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/web/members"
)

// refuseFirstUses makes the test's PostgreSQL refuse to record an access token's first use
// (its used_at), with a trigger, until the function it returns drops it: the write Verify makes
// at a token's first use then fails for real, in the database, while every read still works.
func refuseFirstUses(t *testing.T, s *site) (allow func()) {
	t.Helper()
	ctx := context.Background()
	pool := s.GW.Store.Pool()
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION test_refuse_first_use() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the test refuses to record the first use of an access token'; END $$;
CREATE TRIGGER test_refuse_first_use BEFORE UPDATE ON oauth_tokens FOR EACH ROW
WHEN (OLD.kind = 'access' AND OLD.used_at IS NULL AND NEW.used_at IS NOT NULL) EXECUTE FUNCTION test_refuse_first_use();`); err != nil {
		t.Fatal(err)
	}
	dropped := false
	allow = func() {
		t.Helper()
		if dropped {
			return
		}
		dropped = true
		if _, err := pool.Exec(ctx, `DROP TRIGGER test_refuse_first_use ON oauth_tokens; DROP FUNCTION test_refuse_first_use()`); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(allow)
	return allow
}

// TestUnrecordedFirstUseIsNotServed: an access token whose first use cannot be recorded is not
// served. An attacker refreshes a stolen refresh token first and calls /api/mcp with the access
// token it got while the database refuses to record that use: the call is answered 503 with
// Retry-After, in the JSON-RPC envelope (-32003), without an invalid_token challenge (the token
// is good: the client keeps it and retries), and the tool does not run. Once the database
// records uses again, the retry is served and recorded, so that the client's refresh with the
// stolen token within the grace revokes the grant, and the attacker's token with it. Before,
// the failure was logged and the call served: the use went unrecorded, and the client's reuse
// within the grace was taken for a race of its own (invalid_grant, the grant left in force for
// the attacker).
func TestUnrecordedFirstUseIsNotServed(t *testing.T) {
	s := startSite(t)
	redirect := "https://app.example/cb"
	client := s.register(t, "first-use", redirect)
	refresh := func(token string) (int, map[string]any) {
		return s.token(t, url.Values{"grant_type": {"refresh_token"}, "client_id": {client}, "refresh_token": {token}, "resource": {s.URL + "/api/mcp"}})
	}
	_, stolen := s.tokens(t, client, redirect, s.Acme.Account.ID, s.Alice, members.RoleOwner)
	status, out := refresh(stolen) // the attacker, first
	if status != http.StatusOK {
		t.Fatalf("the attacker's refresh: %d %v", status, out)
	}
	access := out["access_token"].(string)

	allow := refuseFirstUses(t, s)
	resp, raw := s.do(t, http.MethodPost, "/api/mcp", "application/json",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_storage_datasets","arguments":{}}}`, access)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a first use the database did not record: %d Retry-After %q %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	if c := resp.Header.Get("WWW-Authenticate"); strings.Contains(c, "invalid_token") {
		t.Errorf("the 503 challenges the token (%q): the client would drop a good token", c)
	}
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusServiceUnavailable || r.Code != mcp.CodeUnavailable || strings.Contains(r.Text, "sales") {
		t.Fatalf("the call again, uses still not recorded: %+v, want 503 with JSON-RPC %d and no tool result", r, mcp.CodeUnavailable)
	}

	allow()
	if r := s.call(t, access, "list_storage_datasets", nil); r.Status != http.StatusOK || !strings.Contains(r.Text, "sales") {
		t.Fatalf("the retry once uses are recorded: %+v, want the tool's answer", r)
	}
	if status, out := refresh(stolen); status != http.StatusBadRequest || out["error"] != "invalid_grant" || !strings.Contains(out["error_description"].(string), "revoked") { // the client, within the grace
		t.Fatalf("the client's refresh after the attacker's recorded use: %d %v, want invalid_grant saying the grant is revoked", status, out)
	}
	refused(t, s.call(t, access, "list_storage_datasets", nil), "the attacker's access token after the reuse")
}
