package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/tollgate/tollgate/impl/client"
)

// Example lists the account's models and reads its credit balance, the usage
// shown in the README.
func Example() {
	ctx := context.Background()
	c, err := client.New("http://localhost:8080", os.Getenv("TOLLGATE_API_KEY"))
	if err != nil {
		log.Fatal(err)
	}

	models, err := c.Models(ctx) // cached for 60s; Model(ctx, id) reads the same list
	if err != nil {
		var apiErr *client.APIError
		if errors.As(err, &apiErr) {
			log.Fatalf("status %d %s: %s (request %s)", apiErr.Status, apiErr.Type, apiErr.Message, apiErr.RequestID)
		}
		log.Fatal(err)
	}
	for _, m := range models {
		fmt.Println(m.Id, m.OwnedBy)
	}

	credits, err := c.Credits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("balance: $%.2f (%d micros)\n", credits.BalanceUsd, credits.BalanceMicros)

	// Every other operation is on the generated client, behind the same
	// retries and authentication.
	resp, err := c.API.RetrieveModelWithResponse(ctx, "service-flint")
	if err != nil {
		log.Fatal(err)
	}
	if err := client.ErrorFromResponse(resp.HTTPResponse, resp.Body); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.JSON200.Id)
}
