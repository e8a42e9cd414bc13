package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestAdminAccountEndUser (security review s14h7): the end-user identifiers the gateway sends
// a provider in place of its clients' are its own, so an abuse report names one the operator
// must be able to map back. Identifiers the simulator received from a real gateway (two
// accounts, one sending alice's value, one sending none): `admin account end-user ID` names the
// account each was sent for, says whether it is an end user's or the account's own, and with
// -value confirms alice's value and refuses another (exit status 1); an identifier of another
// form is a usage error (exit status 2), named before any database is opened.
func TestAdminAccountEndUser(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	acme := g.NewTenant(t, "acme", 0, 10_000_000)
	beta := g.NewTenant(t, "beta", 0, 10_000_000)
	sent := func(key, raw string) string {
		t.Helper()
		client := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		p := openai.ChatCompletionNewParams{Model: "service-flint-base", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}}
		if raw != "" {
			p.SafetyIdentifier = openai.String(raw)
		}
		if _, err := client.Chat.Completions.New(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		var body struct {
			SafetyIdentifier string `json:"safety_identifier"`
		}
		_ = json.Unmarshal(g.Sim.LastRequest().Body, &body)
		if body.SafetyIdentifier == "" || strings.Contains(body.SafetyIdentifier, "alice") {
			t.Fatalf("the upstream was sent %s", g.Sim.LastRequest().Body)
		}
		return body.SafetyIdentifier
	}
	alice, betaOwn := sent(acme.Key, "alice@example.com"), sent(beta.Key, "")

	t.Setenv("DATABASE_URL", g.ConnString)
	t.Setenv("LOG_LEVEL", "error")
	for line, want := range map[string]string{
		"account end-user " + alice:                               "account acme (" + acme.Account.ID.String() + "): an end user of the account\n",
		"account end-user " + strings.ToUpper(alice):              "account acme (" + acme.Account.ID.String() + "): an end user of the account\n",
		"account end-user " + alice + " -value alice@example.com": "account acme (" + acme.Account.ID.String() + "): an end user of the account\nthe value \"alice@example.com\" is this end user's\n",
		"account end-user " + betaOwn:                             "account beta (" + beta.Account.ID.String() + "): its own identifier, sent for its requests that name no end user\n",
	} {
		if out := mustAdmin(t, line); out != want {
			t.Errorf("admin %s:\n%s\nwant\n%s", line, out, want)
		}
	}
	if _, err := adminRun(t, "account end-user "+alice+" -value bob@example.com"); exitStatus(err) != 1 || !strings.Contains(err.Error(), "is not this end user's") {
		t.Errorf("another value: %v (exit status %d), want exit status 1 saying it is not the end user's", err, exitStatus(err))
	}
	t.Setenv("DATABASE_URL", unreachableDatabase(t))
	for _, line := range []string{"account end-user user_123", "account end-user " + alice + "x", "account end-user " + betaOwn + " -value alice@example.com"} {
		if _, err := adminRun(t, line); exitStatus(err) != 2 {
			t.Errorf("admin %s: %v (exit status %d), want a usage error", line, err, exitStatus(err))
		}
	}
}
