package web_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// TestConsoleOffersOnlyModelsTheAccountCanCall: with sim-anthropic configured account_keys:
// required and no upstream key of the account's for it, service-sonnet (its one upstream
// there) is granted but cannot be called (GET /v1/models leaves it out, a request gets 403
// upstream_key_required). The new-key form offers only the models the account can call, and
// says which it leaves out and why (the provider, the operator's command); the Plan & limits
// page lists service-sonnet marked as not callable with the same reason, to an owner and to a
// member, and the others as callable. A post naming it anyway is taken (a key prepared before
// the operator sets the account's key). Once the operator has set the key, the form offers it
// and the page marks nothing. Before, both offered and listed it as any other model.
func TestConsoleOffersOnlyModelsTheAccountCanCall(t *testing.T) {
	ctx := context.Background()
	e := startConfig(t, func(c *config.Config) {
		for i := range c.Providers {
			if c.Providers[i].Name == "sim-anthropic" {
				c.Providers[i].AccountKeys = config.AccountKeysRequired
			}
		}
	})
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	alice := e.browser(t)
	alice.signIn(e, aliceEmail, alicePass)
	bob := e.browser(t)
	bob.signIn(e, bobEmail, bobPass)

	const (
		reason   = "the provider sim-anthropic serves only accounts with an upstream key of their own, and this account has none for it; the operator sets one with <code>tollgate admin provider-key set acme sim-anthropic</code>"
		planMark = `<th scope="row">service-sonnet</th><td>`
		notYet   = `<td class="unreachable">Not yet: ` + reason + `. Until then its requests are refused.</td>`
	)
	offered := func(p page, model string) bool {
		return strings.Contains(p.Body, `name="models" value="`+model+`"`)
	}

	form := alice.get("/keys/new")
	if form.Status != http.StatusOK || !offered(form, "service-flint") || !offered(form, "service-flint-base") {
		t.Fatalf("the key form does not offer the models the account can call: %d %.3000s", form.Status, form.Body)
	}
	if offered(form, "service-sonnet") {
		t.Errorf("the key form offers service-sonnet, which the account cannot call: %.3000s", form.Body)
	}
	if !strings.Contains(form.Body, `id="models-unreachable"`) || !strings.Contains(form.Body, "<li>service-sonnet: "+reason+".</li>") {
		t.Errorf("the key form does not say which model it leaves out and why: %.3000s", form.Body)
	}
	for who, b := range map[string]*browser{"owner": alice, "member": bob} {
		plan := b.get("/plan")
		i := strings.Index(plan.Body, planMark)
		if plan.Status != http.StatusOK || i < 0 || !strings.Contains(plan.Body[i:], notYet) {
			t.Errorf("the %s's plan page does not mark service-sonnet as not callable: %d %.3000s", who, plan.Status, plan.Body)
		}
		if !strings.Contains(plan.Body, `<th scope="row">service-flint</th>`) || strings.Count(plan.Body, "<td>Yes</td>") != 2 {
			t.Errorf("the %s's plan page does not list the callable models as such: %.3000s", who, plan.Body)
		}
	}

	// A subset naming it is taken: the key works with it once the operator sets the key.
	made := alice.post("/keys", url.Values{"name": {"ahead"}, "models": {"service-sonnet"}})
	if made.Status != http.StatusCreated {
		t.Fatalf("a key limited to a model not callable yet: %d %.1500s", made.Status, made.Body)
	}
	keys, err := e.Store.ListAPIKeys(ctx, acme.ID)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(keys, func(k store.APIKey) bool { return k.Name == "ahead" }); i < 0 || !slices.Equal(keys[i].Models, []string{"service-sonnet"}) {
		t.Errorf("the key made with service-sonnet: %+v", keys)
	}

	if err := e.Store.SetUpstreamKey(ctx, store.UpstreamKey{AccountID: acme.ID, Provider: "sim-anthropic",
		Sealed: []byte("sealed"), Hint: "…x9Qa", SetBy: "operator (root)"}); err != nil {
		t.Fatal(err)
	}
	// The change reaches the exchange's cache through the database's notification.
	deadline := time.Now().Add(10 * time.Second)
	for form = alice.get("/keys/new"); !offered(form, "service-sonnet") && time.Now().Before(deadline); form = alice.get("/keys/new") {
		time.Sleep(50 * time.Millisecond)
	}
	if !offered(form, "service-sonnet") || !offered(form, "service-flint") || strings.Contains(form.Body, "models-unreachable") {
		t.Errorf("the key form once the account's key is set: %.3000s", form.Body)
	}
	plan := alice.get("/plan")
	if strings.Contains(plan.Body, "Can be called") || strings.Contains(plan.Body, "Not yet") || !strings.Contains(plan.Body, planMark) {
		t.Errorf("the plan page once the account's key is set: %.3000s", plan.Body)
	}
}
