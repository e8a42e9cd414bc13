package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/store"
)

// credits reads GET /v1/credits with key (through the client, which validates the answer
// against the OpenAPI document) and returns it decoded and as the raw members of its object.
func credits(t *testing.T, c *http.Client, g *apitest.Gateway, key string) (api.CreditBalance, map[string]json.RawMessage) {
	t.Helper()
	status, _, body := do(t, c, g.URL, request{"GET", "/v1/credits", ""}, map[string]string{"Authorization": "Bearer " + key})
	if status != 200 {
		t.Fatalf("GET /v1/credits: %d %s", status, body)
	}
	var b api.CreditBalance
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	return b, raw
}

// settledCap waits until the capped key's requests have settled (nothing reserved) and returns
// its credit cap as GET /v1/credits shows it.
func settledCap(t *testing.T, c *http.Client, g *apitest.Gateway, key string) api.KeyCreditCap {
	t.Helper()
	var cc api.KeyCreditCap
	eventually(t, "the settlement", func() string {
		b, _ := credits(t, c, g, key)
		if b.Key == nil || b.Key.CreditCap == nil {
			return "no credit_cap"
		}
		cc = *b.Key.CreditCap
		if cc.ReservedMicros != 0 {
			return fmt.Sprintf("%d reserved", cc.ReservedMicros)
		}
		return ""
	})
	return cc
}

var availableRe = regexp.MustCompile(`and (\d+) \([^)]*\) of the key's cap`)

// TestCreditsShowTheKeysCap: GET /v1/credits with a capped key shows its cap, period, spend and
// what the cap leaves, which falls by a request's cost after the request and is the figure the
// key's 402 gives; what it can spend is the lesser of that and the account's balance. Its
// expiry and model subset are shown too. A key without limits gets the balance alone, and a
// key never sees another key's cap. (The newcomer's trial: a capped key learnt what its cap
// left only from a 402.)
func TestCreditsShowTheKeysCap(t *testing.T) {
	// The cap's period is the UTC day the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	c := g.Client(t)
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	capMicros := int64(200_000) // a request reserves up to ~64,000 and costs ~20,000
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	key, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros,
		CapPeriod: store.CapPeriodDaily, ExpiresAt: &expires, Models: []string{"pricey", "service-flint"}})

	b, _ := credits(t, c, g, key)
	today := store.CapPeriodDaily.Start(time.Now())
	if b.Key == nil || b.Key.CreditCap == nil || b.Key.ExpiresAt == nil || !b.Key.ExpiresAt.Equal(expires) ||
		b.Key.Models == nil || !slices.Equal(*b.Key.Models, []string{"pricey", "service-flint"}) {
		t.Fatalf("the capped key's limits: %+v", b.Key)
	}
	cc := *b.Key.CreditCap
	if cc.CapMicros != capMicros || cc.Period != api.Daily || !cc.PeriodStart.Equal(today) || cc.PeriodEnd == nil ||
		!cc.PeriodEnd.Equal(today.AddDate(0, 0, 1)) || cc.SpentMicros != 0 || cc.ReservedMicros != 0 ||
		cc.RemainingMicros != capMicros || cc.RemainingUsd != 0.2 || cc.SpendableMicros != capMicros || cc.SpendableUsd != 0.2 {
		t.Fatalf("a fresh capped key's cap: %+v", cc)
	}

	// After a request, the remainder falls by what the request cost, as the key's budget counts it.
	bearer := map[string]string{"Authorization": "Bearer " + key}
	chat := request{"POST", "/v1/chat/completions", chatBody("pricey", "hello", false, 64)}
	if status, _, body := do(t, c, g.URL, chat, bearer); status != 200 {
		t.Fatalf("the capped key's request: %d %s", status, body)
	}
	after := settledCap(t, c, g, key)
	spent, _, _ := keySpend(t, g, tenant.Account.ID, id, store.CapPeriodDaily)
	if after.SpentMicros == 0 || after.SpentMicros != spent || after.RemainingMicros != capMicros-spent ||
		after.SpendableMicros != after.RemainingMicros {
		t.Fatalf("after a request that cost %d: %+v", spent, after)
	}

	// Until the 402, whose "left" is what GET /v1/credits said the cap left.
	for i := 0; ; i++ {
		if i > 20 {
			t.Fatal("no 402 after 20 requests")
		}
		left := settledCap(t, c, g, key).RemainingMicros
		status, _, body := do(t, c, g.URL, chat, bearer)
		if status == 200 {
			continue
		}
		m := availableRe.FindStringSubmatch(string(body))
		if status != 402 || m == nil {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n != left {
			t.Fatalf("the 402 says %d of the cap are left, GET /v1/credits said %d: %s", n, left, body)
		}
		break
	}

	// A key without limits: the balance alone, as before.
	if _, raw := credits(t, c, g, tenant.Key); len(raw) != 2 || raw["balance_micros"] == nil || raw["balance_usd"] == nil {
		t.Fatalf("a key without limits: %v", raw)
	}
	// Another capped key of the account sees its own cap, never the first key's.
	otherCap := int64(70_000)
	other, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "other", CreditCapMicros: &otherCap})
	ob, _ := credits(t, c, g, other)
	if ob.Key == nil || ob.Key.CreditCap == nil || ob.Key.CreditCap.CapMicros != otherCap || ob.Key.CreditCap.SpentMicros != 0 ||
		ob.Key.CreditCap.RemainingMicros != otherCap || ob.Key.CreditCap.Period != api.None || ob.Key.CreditCap.PeriodEnd != nil ||
		ob.Key.ExpiresAt != nil || ob.Key.Models != nil {
		t.Fatalf("another capped key of the account: %+v", ob.Key.CreditCap)
	}
	// A key of another account: its balance alone.
	poor := g.NewTenant(t, "poor", 0, 50_000)
	if _, raw := credits(t, c, g, poor.Key); len(raw) != 2 {
		t.Fatalf("another account's key without limits: %v", raw)
	}
	// A cap beyond the account's balance: what the key can spend is the balance.
	big := int64(10_000_000)
	rich, _ := keyWith(t, g, poor.Account.ID, accounts.KeyOptions{Name: "rich", CreditCapMicros: &big, CapPeriod: store.CapPeriodMonthly})
	rb, _ := credits(t, c, g, rich)
	month := store.CapPeriodMonthly.Start(time.Now())
	if rc := rb.Key.CreditCap; rc.RemainingMicros != big || rc.SpendableMicros != 50_000 || rb.BalanceMicros != 50_000 ||
		!rc.PeriodStart.Equal(month) || !rc.PeriodEnd.Equal(month.AddDate(0, 1, 0)) {
		t.Fatalf("a cap beyond the balance: %+v", rc)
	}
}
