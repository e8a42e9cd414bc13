package httpapi_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestTenantIsolation: account B's key never sees A's models-only entries, balance or keys,
// whatever B puts in the request.
func TestTenantIsolation(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	a := g.NewTenant(t, "alpha", 0, 7_000_000)
	b := g.NewTenant(t, "beta", 0, 1_500_000)
	// service-sonnet is A's only: withdraw it from B.
	if err := g.Accounts.RevokeModel(ctx, b.Account.ID, "service-sonnet"); err != nil {
		t.Fatal(err)
	}
	c := g.Client(t)
	// B tries to steer the scope to A through headers and query parameters.
	steer := map[string]string{
		"Authorization":       "Bearer " + b.Key,
		"OpenAI-Organization": a.Account.ID.String(),
		"OpenAI-Project":      a.Account.ID.String(),
		"x-account-id":        a.Account.ID.String(),
	}
	q := "?account=" + a.Account.ID.String() + "&account_id=" + a.Account.ID.String()

	status, _, body := do(t, c, g.URL, request{"GET", "/v1/models" + q, ""}, steer)
	if status != 200 {
		t.Fatalf("B lists models: %d %s", status, body)
	}
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID == "service-sonnet" {
			t.Errorf("B sees A's model service-sonnet: %s", body)
		}
	}
	if len(list.Data) != 2 {
		t.Errorf("B should see exactly its two models: %s", body)
	}
	status, _, body = do(t, c, g.URL, request{"GET", "/v1/models/service-sonnet" + q, ""}, steer)
	if status != 404 {
		t.Errorf("B retrieves A's model: %d %s", status, body)
	}
	// A still sees it.
	status, _, _ = do(t, c, g.URL, request{"GET", "/v1/models/service-sonnet", ""}, map[string]string{"Authorization": "Bearer " + a.Key})
	if status != 200 {
		t.Errorf("A cannot retrieve its own model: %d", status)
	}

	status, _, body = do(t, c, g.URL, request{"GET", "/v1/credits" + q, ""}, steer)
	var bal struct {
		BalanceMicros int64   `json:"balance_micros"`
		BalanceUSD    float64 `json:"balance_usd"`
	}
	if err := json.Unmarshal(body, &bal); err != nil || status != 200 {
		t.Fatalf("B credits: %d %s", status, body)
	}
	if bal.BalanceMicros != 1_500_000 || bal.BalanceUSD != 1.5 {
		t.Errorf("B sees balance %+v, want its own 1500000 micros / 1.5 USD", bal)
	}

	// A's key material is nowhere in B's answers, and B's keys are B's alone.
	keysB, err := g.Store.ListAPIKeys(ctx, b.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keysB {
		if k.AccountID != b.Account.ID || k.ID == a.KeyID {
			t.Errorf("B's key list holds a key of another account: %+v", k)
		}
	}
}
