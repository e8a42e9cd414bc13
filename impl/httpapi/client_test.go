package httpapi_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/impl/client"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestConsumerClientAgainstGateway drives the hand-written consumer client (around the
// generated one) against a real gateway.
func TestConsumerClientAgainstGateway(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 2_500_000)
	c, err := client.New(g.URL, tenant.Key, client.WithHTTPClient(g.Client(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	models, err := c.Models(ctx)
	if err != nil || len(models) != 3 {
		t.Fatalf("Models: %v, %v", models, err)
	}
	m, err := c.Model(ctx, "service-flint")
	if err != nil || m.Id != "service-flint" || m.OwnedBy == "" {
		t.Fatalf("Model: %+v, %v", m, err)
	}
	if _, err := c.Model(ctx, "nope"); !errors.Is(err, client.ErrModelNotFound) {
		t.Fatalf("Model(nope): %v", err)
	}
	bal, err := c.Credits(ctx)
	if err != nil || bal.BalanceMicros != 2_500_000 || bal.BalanceUsd != 2.5 {
		t.Fatalf("Credits: %+v, %v", bal, err)
	}
	bad, err := client.New(g.URL, tenant.Key[:10]+"0000000000000000000000000000000000000000000", client.WithHTTPClient(g.Client(t)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Credits(ctx)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Code != "invalid_api_key" || apiErr.RequestID == "" {
		t.Fatalf("bad key: %#v", err)
	}
}
