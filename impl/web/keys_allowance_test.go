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

// TestKeysPageReadsBudgetsAtOnce (h4): the Keys page read each capped key's budget with a
// statement of its own (GetKeyBudget a key), so a page of many capped keys made as many round
// trips. Now one statement (GetKeyBudgets) reads them all, each key in its own cap period, and
// each row still shows the figures GET /v1/credits gives its key: here five capped keys, daily,
// monthly and without a period, one that has spent nothing yet, beside a revoked capped key
// and one without a cap.
func TestKeysPageReadsBudgetsAtOnce(t *testing.T) {
	clocktest.NotAcrossMidnight(t, time.Minute)
	e := start(t, nil)
	ctx := context.Background()
	acme := e.account(t, "acme", aliceEmail, "owner")
	capMicros := int64(2_000_000)
	key := func(name string, period store.CapPeriod, capped bool) accounts.NewKey {
		t.Helper()
		o := accounts.KeyOptions{Name: name, RPM: -1, CreatedBy: aliceEmail}
		if capped {
			o.CreditCapMicros, o.CapPeriod = &capMicros, period
		}
		k, err := e.Accounts.CreateKeyWith(ctx, acme.ID, o)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	spend := func(k accounts.NewKey, period store.CapPeriod, settled, held int64) {
		t.Helper()
		for id, amount := range map[string]int64{"settled": settled, "held": held} {
			kr, err := e.Store.ReserveKeyBudget(ctx, store.KeyReservationRequest{KeyID: k.Key.ID, PeriodStart: period.Start(time.Now()),
				CapMicros: capMicros, AmountMicros: amount, RequestID: id, Holder: "web-test", Lease: time.Hour})
			if err != nil || !kr.Reserved {
				t.Fatalf("reserve %s: %+v %v", id, kr, err)
			}
		}
		if ok, err := e.Store.SettleKeyReservation(ctx, k.Key.ID, "settled", settled/2); err != nil || !ok {
			t.Fatalf("settle: %v %v", ok, err)
		}
	}
	capped := map[string]accounts.NewKey{}
	for i, c := range []struct {
		name   string
		period store.CapPeriod
	}{{"day-a", store.CapPeriodDaily}, {"day-b", store.CapPeriodDaily}, {"month", store.CapPeriodMonthly}, {"ever", store.CapPeriodNone}} {
		capped[c.name] = key(c.name, c.period, true)
		spend(capped[c.name], c.period, int64(i+1)*200_000, int64(i+1)*70_000)
	}
	capped["unused"] = key("unused", store.CapPeriodDaily, true)
	revoked := key("gone", store.CapPeriodDaily, true)
	spend(revoked, store.CapPeriodDaily, 100_000, 10_000)
	if _, err := e.Accounts.Revoke(ctx, acme.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	key("open", store.CapPeriodNone, false)

	// What GET /v1/credits gives each capped key itself.
	api := e.browser(t)
	want := map[string]map[string]int64{}
	for name, k := range capped {
		p := api.do("GET", "/v1/credits", nil, map[string]string{"Authorization": "Bearer " + k.Plain})
		var credits struct {
			Key struct {
				CreditCap struct {
					SpentMicros     int64 `json:"spent_micros"`
					ReservedMicros  int64 `json:"reserved_micros"`
					RemainingMicros int64 `json:"remaining_micros"`
				} `json:"credit_cap"`
			} `json:"key"`
		}
		if err := json.Unmarshal([]byte(p.Body), &credits); p.Status != http.StatusOK || err != nil {
			t.Fatalf("%s: GET /v1/credits: %d %v %s", name, p.Status, err, p.Body)
		}
		cc := credits.Key.CreditCap
		want[name] = map[string]int64{"Spent": cc.SpentMicros, "Reserved": cc.ReservedMicros, "Remaining": cc.RemainingMicros}
	}
	if want["month"]["Spent"] != 300_000 || want["month"]["Reserved"] != 210_000 || want["unused"]["Remaining"] != capMicros {
		t.Fatalf("GET /v1/credits gives the keys %v", want)
	}

	b := e.browser(t)
	b.signIn(e, aliceEmail, alicePass)
	var keys page
	sent := e.Statements.since(func() { keys = b.get("/keys") })
	if keys.Status != http.StatusOK {
		t.Fatalf("GET /keys: %d", keys.Status)
	}
	if sent["GetKeyBudgets"] != 1 || sent["GetKeyBudget"] != 0 {
		t.Errorf("the Keys page of %d capped keys read their budgets with %d GetKeyBudget and %d GetKeyBudgets statements, want one GetKeyBudgets",
			len(capped), sent["GetKeyBudget"], sent["GetKeyBudgets"])
	}
	for name, w := range want {
		row := keyRowOf(keys.Body, name)
		if got := allowanceOf(row); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("key %s: its row shows %v of its period, GET /v1/credits gives the key %v:\n%s", name, got, w, html.UnescapeString(row))
		}
	}
	for _, name := range []string{"gone", "open"} {
		if row := keyRowOf(keys.Body, name); row == "" || strings.Contains(row, "Remaining") {
			t.Errorf("key %s: its row shows a budget (or is missing):\n%s", name, row)
		}
	}
}
