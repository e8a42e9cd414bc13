package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
	"github.com/tollgate/tollgate/impl/store"
)

// TestUnopenedAccountKeyIsLogged: a stored key that does not open with the gateway's secret
// (sealed under another, as after a restore without the server secrets) gets the account's
// requests to its provider a 503 telling the tenant that the operator must set it again, and
// the operator is told too: a WARN line naming the account, the provider and the key's hint.
// The review of s15h6: the gateway said nothing, and only the tenant knew.
func TestUnopenedAccountKeyIsLogged(t *testing.T) {
	logs := &syncbuf.Buffer{}
	g := apitest.Start(t, apitest.Options{LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	alpha := g.NewTenant(t, "alpha", 0, keyCredit)
	if err := g.Store.SetUpstreamKey(context.Background(), store.UpstreamKey{AccountID: alpha.Account.ID, Provider: "sim-anthropic",
		Sealed: []byte("\x01sealed under a secret this gateway does not have"), Hint: "…x9Qa", SetBy: "test"}); err != nil {
		t.Fatal(err)
	}
	status, body := post(t, g, alpha.Key, "/v1/messages", keyMessages)
	if _, _, msg := errorOf(t, body); status != http.StatusServiceUnavailable || !strings.Contains(msg, "sim-anthropic") {
		t.Fatalf("a key that does not open: %d %s", status, body)
	}
	if !lineWith(logs.String(), `"level":"WARN"`, "does not open", `"provider":"sim-anthropic"`, `"hint":"…x9Qa"`, alpha.Account.ID.String()) {
		t.Errorf("no warning for the operator naming the account, the provider and the hint:\n%s", logs.String())
	}
}
