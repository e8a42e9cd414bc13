package tenanttools_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// restCredits is GET /v1/credits with key (validated against the OpenAPI document), decoded.
func restCredits(t *testing.T, ctx context.Context, g *apitest.Gateway, key string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.URL+"/v1/credits", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(body, &out); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/credits: %d %v %s", resp.StatusCode, err, body)
	}
	return out
}

// TestGetCreditsIsTheKeysOwn (h3): an MCP client with a capped key had no way to learn what its
// cap left (GET /v1/credits is not an MCP tool), and learnt it from a 402. get_credits answers
// what GET /v1/credits answers the same key, to the member: the account's balance and the
// calling key's own allowance. Two capped keys of one account each see their own figures,
// never the other's; a key without limits sees the balance alone; the tool is listed
// read-only and takes no arguments (another key's id cannot be asked for).
func TestGetCreditsIsTheKeysOwn(t *testing.T) {
	// The cap's period is the UTC day the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	capMicros := int64(1_000_000)
	newCapped := func(name string) (string, uuid.UUID) {
		t.Helper()
		k, err := g.Accounts.CreateKeyWith(ctx, tn.Account.ID, accounts.KeyOptions{Name: name, CreditCapMicros: &capMicros,
			CapPeriod: store.CapPeriodDaily, Models: []string{"service-flint"}})
		if err != nil {
			t.Fatal(err)
		}
		return k.Plain, k.Key.ID
	}
	ciKey, ciID := newCapped("ci")
	botKey, botID := newCapped("bot")
	// Each key's budget today as its requests leave it: ci spent $0.12 and holds $0.30 in
	// flight; bot spent $0.05.
	today := store.CapPeriodDaily.Start(time.Now())
	spend := func(key uuid.UUID, id string, reserved, cost int64, settle bool) {
		t.Helper()
		kr, err := g.Store.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: today, CapMicros: capMicros,
			AmountMicros: reserved, RequestID: id, Holder: "tenanttools-test", Lease: time.Hour})
		if err != nil || !kr.Reserved {
			t.Fatalf("reserve %s: %+v %v", id, kr, err)
		}
		if settle {
			if ok, err := g.Store.SettleKeyReservation(ctx, key, id, cost); err != nil || !ok {
				t.Fatalf("settle %s: %v %v", id, ok, err)
			}
		}
	}
	spend(ciID, "ci-settled", 200_000, 120_000, true)
	spend(ciID, "ci-in-flight", 300_000, 0, false)
	spend(botID, "bot-settled", 100_000, 50_000, true)

	cs := connect(t, ctx, g, ciKey)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tl := range tools.Tools {
		if tl.Name == "get_credits" {
			listed = tl.Annotations != nil && tl.Annotations.ReadOnlyHint
		}
	}
	if !listed {
		t.Fatal("tools/list has no read-only get_credits")
	}

	for _, c := range []struct {
		name, key           string
		spent, reserved     float64
		withoutKeyAllowance bool
	}{
		{name: "ci", key: ciKey, spent: 120_000, reserved: 300_000},
		{name: "bot", key: botKey, spent: 50_000},
		{name: "the account's key without limits", key: tn.Key, withoutKeyAllowance: true},
	} {
		text, isErr := call(t, ctx, connect(t, ctx, g, c.key), "get_credits", nil)
		var got map[string]any
		if err := json.Unmarshal([]byte(text), &got); isErr || err != nil {
			t.Fatalf("%s: get_credits: %q (isError %v, %v)", c.name, text, isErr, err)
		}
		if want := restCredits(t, ctx, g, c.key); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: get_credits answers\n%s\nGET /v1/credits answers\n%v", c.name, text, want)
		}
		key, hasKey := got["key"].(map[string]any)
		if c.withoutKeyAllowance {
			if hasKey || got["balance_micros"] != 5_000_000.0 {
				t.Errorf("%s: get_credits %s, want the balance alone", c.name, text)
			}
			continue
		}
		cc, _ := key["credit_cap"].(map[string]any)
		if cc["spent_micros"] != c.spent || cc["reserved_micros"] != c.reserved ||
			cc["remaining_micros"] != float64(capMicros)-c.spent-c.reserved {
			t.Errorf("%s: get_credits gives the cap %v, want its own: %v spent, %v reserved", c.name, cc, c.spent, c.reserved)
		}
	}

	// Another key's allowance cannot be asked for: the tool takes no arguments.
	text, isErr := call(t, ctx, cs, "get_credits", map[string]any{"key_id": botID.String()})
	if !isErr || !strings.HasPrefix(text, "Error: invalid arguments for tool 'get_credits'") || strings.Contains(text, "spent") {
		t.Errorf("get_credits with another key's id: %q (isError %v), want the schema's refusal", text, isErr)
	}
}

// TestGetCreditsDuringDatabaseOutage: while the database cannot be reached, get_credits with a
// capped key says that its cap is kept there, in the caller's words (GET /v1/credits answers
// it 503), never as an internal error to quote a request id for; a key without limits gets the
// last balance read, marked stale, as GET /v1/credits gives it.
func TestGetCreditsDuringDatabaseOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	o := pgtest.NewOutage(t)
	g := apitest.Start(t, apitest.Options{ConnString: o.ConnString()})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	capMicros := int64(1_000_000)
	k, err := g.Accounts.CreateKeyWith(ctx, tn.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros})
	if err != nil {
		t.Fatal(err)
	}
	capped, open := connect(t, ctx, g, k.Plain), connect(t, ctx, g, tn.Key)
	for _, cs := range []*sdk.ClientSession{capped, open} {
		if text, isErr := call(t, ctx, cs, "get_credits", nil); isErr {
			t.Fatalf("get_credits before the outage: %s", text)
		}
	}
	o.Stop()
	defer o.Start()
	if text, isErr := call(t, ctx, capped, "get_credits", nil); !isErr || !strings.Contains(text, "credit cap is kept in the database") {
		t.Errorf("get_credits with a capped key while the database is down: %q (isError %v)", text, isErr)
	}
	text, isErr := call(t, ctx, open, "get_credits", nil)
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); isErr || err != nil || got["stale"] != true || got["balance_micros"] != 5_000_000.0 {
		t.Errorf("get_credits with a key without limits while the database is down: %q (isError %v)", text, isErr)
	}
}
