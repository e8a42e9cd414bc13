package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/store"
)

// keyRowOf is the Keys page's row of the key named name ("" when the page has none).
func keyRowOf(body, name string) string {
	_, row, ok := strings.Cut(body, `<th scope="row">`+name+`</th>`)
	if !ok {
		return ""
	}
	row, _, _ = strings.Cut(row, "</tr>")
	return row
}

// allowanceRe reads one figure of a key's period on the Keys page: its name and its amount.
var allowanceRe = regexp.MustCompile(`<dt>(Spent|Reserved|Remaining)</dt><dd><span class="money"[^>]*>\$([0-9,]+)\.([0-9]{2})</span></dd>`)

// allowanceOf reads the figures of the key's period from its row, in micro-dollars, by name.
func allowanceOf(row string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range allowanceRe.FindAllStringSubmatch(row, -1) {
		whole, _ := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
		cents, _ := strconv.ParseInt(m[3], 10, 64)
		out[m[1]] = whole*1_000_000 + cents*10_000
	}
	return out
}

// TestKeysPageShowsTheCapsPeriod (h3): the Keys page showed a capped key's cap and what its usage
// records cost in the period, but not what its requests in flight reserve nor what the cap
// leaves, which GET /v1/credits gives the key itself. Now the row of a capped key shows spent,
// reserved, remaining and when the period resets, the very figures GET /v1/credits gives the
// key (its key.credit_cap), to owners and members alike; a key without a cap shows its spend
// alone, and another account's key is not shown.
func TestKeysPageShowsTheCapsPeriod(t *testing.T) {
	// The cap's period is the UTC day the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	if _, err := e.Members.Add(ctx, acme.ID, bobEmail, "member"); err != nil {
		t.Fatal(err)
	}
	capMicros := int64(1_000_000)
	capped, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "ci", RPM: -1, CreditCapMicros: &capMicros,
		CapPeriod: store.CapPeriodDaily, CreatedBy: aliceEmail})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Accounts.CreateKeyWith(ctx, acme.ID, accounts.KeyOptions{Name: "prod", RPM: -1, CreatedBy: aliceEmail}); err != nil {
		t.Fatal(err)
	}
	other := e.account(t, "globex", "", "")
	theirs, err := e.Accounts.CreateKeyWith(ctx, other.ID, accounts.KeyOptions{Name: "theirs", RPM: -1, CreditCapMicros: &capMicros,
		CapPeriod: store.CapPeriodDaily})
	if err != nil {
		t.Fatal(err)
	}
	// The key's budget today, as its requests leave it: one settled at $0.12 and one in flight
	// holding $0.30 (another account's key spends too).
	today := store.CapPeriodDaily.Start(time.Now())
	reserve := func(key uuid.UUID, id string, amount int64) {
		t.Helper()
		kr, err := e.Store.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: key, PeriodStart: today, CapMicros: capMicros,
			AmountMicros: amount, RequestID: id, Holder: "web-test", Lease: time.Hour})
		if err != nil || !kr.Reserved {
			t.Fatalf("reserve %s: %+v %v", id, kr, err)
		}
	}
	reserve(capped.Key.ID, "settled", 200_000)
	if ok, err := e.Store.SettleKeyReservation(ctx, capped.Key.ID, "settled", 120_000); err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	reserve(capped.Key.ID, "in-flight", 300_000)
	reserve(theirs.Key.ID, "theirs", 400_000)

	// What GET /v1/credits gives the key itself.
	api := e.browser(t)
	p := api.do("GET", "/v1/credits", nil, map[string]string{"Authorization": "Bearer " + capped.Plain})
	var credits struct {
		Key struct {
			CreditCap struct {
				SpentMicros     int64     `json:"spent_micros"`
				ReservedMicros  int64     `json:"reserved_micros"`
				RemainingMicros int64     `json:"remaining_micros"`
				PeriodEnd       time.Time `json:"period_end"`
			} `json:"credit_cap"`
		} `json:"key"`
	}
	if err := json.Unmarshal([]byte(p.Body), &credits); p.Status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/credits: %d %v %s", p.Status, err, p.Body)
	}
	cc := credits.Key.CreditCap
	want := map[string]int64{"Spent": cc.SpentMicros, "Reserved": cc.ReservedMicros, "Remaining": cc.RemainingMicros}
	if fmt.Sprint(want) != fmt.Sprint(map[string]int64{"Spent": 120_000, "Reserved": 300_000, "Remaining": 580_000}) {
		t.Fatalf("GET /v1/credits gives the key %+v, want $0.12 spent, $0.30 reserved and $0.58 remaining", cc)
	}
	resets := "<dt>Resets</dt><dd><span>" + cc.PeriodEnd.UTC().Format("2006-01-02") + "</span> <span>" +
		cc.PeriodEnd.UTC().Format("15:04 UTC") + "</span></dd>"

	for _, who := range []struct{ email, password string }{{aliceEmail, alicePass}, {bobEmail, bobPass}} {
		b := e.browser(t)
		b.signIn(e, who.email, who.password)
		keys := b.get("/keys")
		if keys.Status != http.StatusOK {
			t.Fatalf("%s: GET /keys: %d", who.email, keys.Status)
		}
		row := keyRowOf(keys.Body, "ci")
		if got := allowanceOf(row); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the capped key's row shows %v of its period, GET /v1/credits gives the key %v:\n%s",
				who.email, got, want, html.UnescapeString(row))
		}
		if !strings.Contains(row, resets) {
			t.Errorf("%s: the capped key's row does not say %q:\n%s", who.email, resets, row)
		}
		open := keyRowOf(keys.Body, "prod")
		if strings.Contains(open, "Remaining") || !strings.Contains(open, `<span class="money">$0.00</span> spent`) {
			t.Errorf("%s: the row of the key without a cap:\n%s", who.email, open)
		}
		if strings.Contains(keys.Body, "theirs") || strings.Contains(keys.Body, "$0.40") {
			t.Errorf("%s: the Keys page shows another account's key", who.email)
		}
	}
}
