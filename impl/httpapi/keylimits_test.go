package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/clocktest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// keyWith mints a key of the account with the options o.
func keyWith(t *testing.T, g *apitest.Gateway, account uuid.UUID, o accounts.KeyOptions) (string, uuid.UUID) {
	t.Helper()
	k, err := g.Accounts.CreateKeyWith(context.Background(), account, o)
	if err != nil {
		t.Fatal(err)
	}
	return k.Plain, k.Key.ID
}

// eventually retries f every 20 ms until it returns "" or a second has passed (the time within
// which every gateway applies a key's change), and fails with f's last complaint.
func eventually(t *testing.T, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, a second after the change: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statusIs is a check for eventually: the request's status is want and its body contains text.
func statusIs(t *testing.T, c *http.Client, g *apitest.Gateway, key string, r request, want int, text string) func() string {
	return func() string {
		status, _, body := do(t, c, g.URL, r, map[string]string{"Authorization": "Bearer " + key})
		if status != want || !strings.Contains(string(body), text) {
			return fmt.Sprintf("%s %s: %d %s, want %d with %q", r.method, r.path, status, body, want, text)
		}
		return ""
	}
}

var listModels = request{"GET", "/v1/models", ""}

// TestKeyExpiry: a key past its expiry gets 401 "the key expired at …" in the route's envelope,
// from the cached key with no notification (the clock passes the expiry), and within a second
// when the expiry is moved into the past.
func TestKeyExpiry(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	c := g.Client(t)
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	ctx := context.Background()
	soon := time.Now().Add(1200 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	key, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "soon", ExpiresAt: &soon})
	eventually(t, "a key before its expiry", statusIs(t, c, g, key, listModels, 200, `"data"`))
	time.Sleep(time.Until(soon) + 10*time.Millisecond)
	want := "the key expired at " + soon.UTC().Format(time.RFC3339)
	eventually(t, "a key past its expiry", statusIs(t, c, g, key, listModels, 401, want))
	status, h, body := do(t, c, g.URL, validRequests["POST /v1/messages"], map[string]string{"Authorization": "Bearer " + key})
	if status != 401 || !strings.Contains(string(body), `"type":"error"`) || !strings.Contains(string(body), want) || h.Get("x-should-retry") != "false" {
		t.Fatalf("messages with an expired key: %d %s", status, body)
	}

	// Moving a cached key's expiry into the past reaches the gateway within a second.
	later := time.Now().Add(time.Hour)
	other, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "later", ExpiresAt: &later})
	eventually(t, "a key before its expiry", statusIs(t, c, g, other, listModels, 200, `"data"`))
	past := time.Now().Add(-time.Minute).Truncate(time.Second)
	if _, err := g.Store.SetAPIKeyLimits(ctx, tenant.Account.ID, id, store.KeyLimits{ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a key whose expiry was moved into the past", statusIs(t, c, g, other, listModels, 401, "the key expired at "+past.UTC().Format(time.RFC3339)))
	// The service refuses an expiry in the past.
	if _, err := g.Accounts.SetLimits(ctx, tenant.Account.ID, id, store.KeyLimits{ExpiresAt: &later}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accounts.CreateKeyWith(ctx, tenant.Account.ID, accounts.KeyOptions{ExpiresAt: &past}); !errors.As(err, new(*accounts.InvalidError)) {
		t.Fatalf("a new key expiring in the past: %v", err)
	}
	eventually(t, "a key whose expiry moved back into the future", statusIs(t, c, g, other, listModels, 200, `"data"`))
}

// TestKeyDisableEnable: a disabled key gets 401 "the key is disabled" within a second on every
// route and works again within a second of being enabled; disabling, enabling, revoking and
// changing limits through another account is not found; revoke-all ends every key.
func TestKeyDisableEnable(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	g2 := apitest.Start(t, apitest.Options{ConnString: g.ConnString})
	c := g.Client(t)
	ctx := context.Background()
	tenant := g.NewTenant(t, "acme", 0, 10_000_000)
	stranger := g.NewTenant(t, "stranger", 0, 1_000_000)
	for _, gw := range []*apitest.Gateway{g, g2} {
		eventually(t, "a new key", statusIs(t, c, gw, tenant.Key, listModels, 200, `"data"`))
	}
	if _, err := g.Accounts.Disable(ctx, tenant.Account.ID, tenant.KeyID); err != nil {
		t.Fatal(err)
	}
	for _, gw := range []*apitest.Gateway{g, g2} {
		eventually(t, "a disabled key", statusIs(t, c, gw, tenant.Key, listModels, 401, "the key is disabled"))
		for _, r := range []request{validRequests["POST /v1/chat/completions"], validRequests["POST /v1/messages"], validRequests["POST /api/mcp"]} {
			eventually(t, "a disabled key on "+r.path, statusIs(t, c, gw, tenant.Key, r, 401, ""))
		}
	}
	if _, err := g.Accounts.Enable(ctx, tenant.Account.ID, tenant.KeyID); err != nil {
		t.Fatal(err)
	}
	for _, gw := range []*apitest.Gateway{g, g2} {
		eventually(t, "an enabled key", statusIs(t, c, gw, tenant.Key, validRequests["POST /v1/chat/completions"], 200, ""))
	}

	// Another account's key id is not found, for every operation.
	other := stranger.Account.ID
	five := int64(5)
	ops := map[string]func() error{
		"disable": func() error { _, err := g.Accounts.Disable(ctx, other, tenant.KeyID); return err },
		"enable":  func() error { _, err := g.Accounts.Enable(ctx, other, tenant.KeyID); return err },
		"revoke":  func() error { _, err := g.Accounts.Revoke(ctx, other, tenant.KeyID); return err },
		"get":     func() error { _, err := g.Accounts.GetKey(ctx, other, tenant.KeyID); return err },
		"limits":  func() error { _, err := g.Accounts.SetLimits(ctx, other, tenant.KeyID, store.KeyLimits{}); return err },
		"cap": func() error {
			_, err := g.Accounts.SetCreditCap(ctx, other, tenant.KeyID, &five, store.CapPeriodDaily)
			return err
		},
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s through another account: %v, want not found", name, err)
		}
	}
	eventually(t, "a key another account tried to change", statusIs(t, c, g, tenant.Key, listModels, 200, `"data"`))

	second, _ := g.NewKey(t, tenant.Account.ID, 0)
	revoked, err := g.Accounts.RevokeAll(ctx, tenant.Account.ID)
	if err != nil || len(revoked) != 2 {
		t.Fatalf("revoke all: %d keys, %v", len(revoked), err)
	}
	for _, k := range []string{tenant.Key, second} {
		eventually(t, "a key after revoke-all", statusIs(t, c, g2, k, listModels, 401, "revoked"))
	}
	if _, err := g.Accounts.Enable(ctx, tenant.Account.ID, tenant.KeyID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("enabling a revoked key: %v", err)
	}
	eventually(t, "the other account's key", statusIs(t, c, g, stranger.Key, listModels, 200, `"data"`))
}

// TestKeyModelSubset: a key confined to some of its account's models gets, for any other model,
// exactly the answer of a model that does not exist, on every route that names a model (chat
// completions, Responses, Messages, count_tokens, the model list and a model's own page); the
// models of its subset work. A subset must be of the account's models.
func TestKeyModelSubset(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	c := g.Client(t)
	ctx := context.Background()
	tenant := g.NewTenant(t, "acme", 0, 5_000_000)
	key, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "flint only", Models: []string{"service-flint"}})
	bearer := map[string]string{"Authorization": "Bearer " + key}
	routes := []struct {
		name, outside, path string
		body                func(model string) string
	}{
		{"chat", "service-flint-base", "/v1/chat/completions", func(m string) string {
			return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}`
		}},
		{"responses", "service-flint-base", "/v1/responses", func(m string) string { return `{"model":"` + m + `","input":"hi"}` }},
		{"messages", "service-sonnet", "/v1/messages", func(m string) string {
			return `{"model":"` + m + `","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
		}},
		{"count_tokens", "service-sonnet", "/v1/messages/count_tokens", func(m string) string {
			return `{"model":"` + m + `","messages":[{"role":"user","content":"hi"}]}`
		}},
	}
	same := func(name string, outside, unknown request, outsideID, unknownID string) {
		t.Helper()
		s1, _, b1 := do(t, c, g.URL, outside, bearer)
		s2, _, b2 := do(t, c, g.URL, unknown, bearer)
		// Only the model's name and the request id may differ.
		norm := func(b []byte, id string) string {
			s := strings.ReplaceAll(string(b), id, "MODEL")
			return regexp.MustCompile(`"request_id":"[^"]*"`).ReplaceAllString(s, "")
		}
		if s1 != 404 || s1 != s2 || norm(b1, outsideID) != norm(b2, unknownID) {
			t.Errorf("%s: a model outside the key's subset: %d %s; an unknown model: %d %s", name, s1, b1, s2, b2)
		}
	}
	for _, r := range routes {
		same(r.name, request{"POST", r.path, r.body(r.outside)}, request{"POST", r.path, r.body("no-such-model")}, r.outside, "no-such-model")
	}
	same("model", request{"GET", "/v1/models/service-sonnet", ""}, request{"GET", "/v1/models/no-such-model", ""}, "service-sonnet", "no-such-model")
	for _, r := range []request{
		{"POST", "/v1/chat/completions", routes[0].body("service-flint")},
		{"POST", "/v1/responses", routes[1].body("service-flint")},
		{"GET", "/v1/models/service-flint", ""},
	} {
		if status, _, body := do(t, c, g.URL, r, bearer); status != 200 {
			t.Errorf("%s %s with a model of the subset: %d %s", r.method, r.path, status, body)
		}
	}
	_, _, body := do(t, c, g.URL, listModels, bearer)
	var list struct{ Data []struct{ ID string } }
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "service-flint" {
		t.Fatalf("the model list of a key confined to service-flint: %s", body)
	}
	// The account's other keys still see every model.
	_, _, body = do(t, c, g.URL, listModels, map[string]string{"Authorization": "Bearer " + tenant.Key})
	if !strings.Contains(string(body), "service-sonnet") {
		t.Fatalf("the account's unconfined key: %s", body)
	}
	for _, models := range [][]string{{"no-such-model"}, {}} {
		if _, err := g.Accounts.CreateKeyWith(ctx, tenant.Account.ID, accounts.KeyOptions{Models: models}); !errors.As(err, new(*accounts.InvalidError)) {
			t.Errorf("a key confined to %q: %v, want an invalid option", models, err)
		}
	}
	// Withdrawing a model from the subset reaches the gateway within a second.
	k, err := g.Store.GetAccountAPIKey(ctx, tenant.Account.ID, tenantKeyID(t, g, tenant.Account.ID, "flint only"))
	if err != nil {
		t.Fatal(err)
	}
	l := accounts.LimitsOf(k)
	l.Models = []string{"service-sonnet"}
	if _, err := g.Accounts.SetLimits(ctx, tenant.Account.ID, k.ID, l); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a model withdrawn from the key's subset", statusIs(t, c, g, key, request{"POST", "/v1/chat/completions", routes[0].body("service-flint")}, 404, "model_not_found"))
}

// tenantKeyID finds the account's key by name.
func tenantKeyID(t *testing.T, g *apitest.Gateway, account uuid.UUID, name string) uuid.UUID {
	t.Helper()
	keys, err := g.Accounts.ListKeys(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k.ID
		}
	}
	t.Fatalf("no key %q", name)
	return uuid.Nil
}

// keySpend returns what the key's budget counts (spent, reserved) in the current period and
// what ListKeys shows it spent, from the usage records.
func keySpend(t *testing.T, g *apitest.Gateway, account, keyID uuid.UUID, period store.CapPeriod) (spent, reserved, listed int64) {
	t.Helper()
	ctx := context.Background()
	b, err := g.Store.GetKeyBudget(ctx, keyID, period.Start(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := g.Accounts.ListKeys(ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == keyID {
			return b.SpentMicros, b.ReservedMicros, k.PeriodSpentMicros
		}
	}
	t.Fatalf("key %s not listed", keyID)
	return
}

var neededRe = regexp.MustCompile(`needs up to (\d+) micro-units`)

// TestKeyCreditCapIs402AtTheCap: a capped key is served while its spend this period plus the
// request's worst case stays within the cap, and then gets 402 in the route's envelope, saying
// it is the key's cap (the account has plenty of credit). A cap raised to exactly the spend
// plus the worst case serves one more request. What the cap counts is what the usage records
// charge, which is what the key list shows.
func TestKeyCreditCapIs402AtTheCap(t *testing.T) {
	// The cap's period is the UTC day (or month) the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	c := g.Client(t)
	ctx := context.Background()
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	capMicros := int64(200_000) // a request reserves up to ~64,000 and costs ~20,000
	key, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "capped", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily})
	bearer := map[string]string{"Authorization": "Bearer " + key}
	chat := request{"POST", "/v1/chat/completions", chatBody("pricey", "hello", false, 64)}
	served := int64(0)
	var needed int64
	for i := 0; ; i++ {
		if i > 20 {
			t.Fatal("no 402 after 20 requests")
		}
		status, h, body := do(t, c, g.URL, chat, bearer)
		if status == 200 {
			served++
			// The key's reservation returns when the request settles, just after its answer.
			eventually(t, "the settlement", func() string {
				if _, reserved, _ := keySpend(t, g, tenant.Account.ID, id, store.CapPeriodDaily); reserved != 0 {
					return fmt.Sprintf("%d reserved", reserved)
				}
				return ""
			})
			continue
		}
		if status != 402 || !strings.Contains(string(body), "insufficient_quota") || !strings.Contains(string(body), "credit cap") || h.Get("x-should-retry") != "false" {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
		m := neededRe.FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("the 402 does not say what the request needs: %s", body)
		}
		// The cap is not spent: the request's worst case does not fit what is left, and the
		// message says so and what the caller can lower (trial h10 D3).
		if strings.Contains(string(body), "is reached") || !strings.Contains(strings.ToLower(string(body)), "not enough of the api key's credit cap is left") ||
			!strings.Contains(string(body), "worst case") || !strings.Contains(string(body), "a lower output bound needs less") {
			t.Errorf("the 402 does not say that the request's worst case does not fit: %s", body)
		}
		needed, _ = strconv.ParseInt(m[1], 10, 64)
		break
	}
	waitSettled(t, g, tenant.Account, served)
	spent, reserved, listed := keySpend(t, g, tenant.Account.ID, id, store.CapPeriodDaily)
	_, usage, err := g.Store.UsageTotals(ctx, tenant.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if served == 0 || spent > capMicros || spent+needed <= capMicros || reserved != 0 || spent != usage || listed != usage {
		t.Fatalf("served %d; the key spent %d (listed %d, usage %d, reserved %d) of %d, and the next request needs %d: the 402 is not at the cap",
			served, spent, listed, usage, reserved, capMicros, needed)
	}
	// The cap raised to exactly the spend plus the worst case: one more request, then 402.
	exact := spent + needed
	if _, err := g.Accounts.SetCreditCap(ctx, tenant.Account.ID, id, &exact, store.CapPeriodDaily); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a cap raised to exactly the worst case", statusIs(t, c, g, key, chat, 200, ""))
	waitSettled(t, g, tenant.Account, served+1)
	if status, _, body := do(t, c, g.URL, chat, bearer); status != 402 {
		t.Fatalf("after the request the raised cap allowed: %d %s", status, body)
	}
	spent, _, listed = keySpend(t, g, tenant.Account.ID, id, store.CapPeriodDaily)
	if spent > exact || spent != listed {
		t.Fatalf("the key spent %d (listed %d) of a cap of %d", spent, listed, exact)
	}
	// A cap of what the key spent leaves nothing: Messages answers 402 in its envelope.
	if _, err := g.Accounts.SetCreditCap(ctx, tenant.Account.ID, id, &spent, store.CapPeriodDaily); err != nil {
		t.Fatal(err)
	}
	eventually(t, "messages at the key's cap", statusIs(t, c, g, key, validRequests["POST /v1/messages"], 402, `"billing_error"`))
	// The account's other keys are not capped by this one.
	if status, _, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + tenant.Key}); status != 200 {
		t.Fatalf("an uncapped key of the account: %d %s", status, body)
	}
}

// TestKeyCapCountsThePeriodsSpend: a cap put on a key that has spent, or moved from a daily to
// a monthly period, counts what the key spent in the period already: the budget of the period
// is the key's usage in it, and a request that would take the key past the cap is refused.
// Trial h12 D1: the new period's budget started at 0, and the key spent up to a whole cap more.
func TestKeyCapCountsThePeriodsSpend(t *testing.T) {
	// The cap's period is the UTC day (or month) the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	c := g.Client(t)
	ctx := context.Background()
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	chat := request{"POST", "/v1/chat/completions", chatBody("pricey", "hello", false, 64)}

	// An uncapped key spends; a monthly cap below that spend then refuses it at once.
	key, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "later capped"})
	bearer := map[string]string{"Authorization": "Bearer " + key}
	for range 3 {
		if status, _, body := do(t, c, g.URL, chat, bearer); status != 200 {
			t.Fatalf("uncapped: %d %s", status, body)
		}
	}
	waitSettled(t, g, tenant.Account, 3)
	_, _, listed := keySpend(t, g, tenant.Account.ID, id, store.CapPeriodMonthly)
	below := listed / 2
	if _, err := g.Accounts.SetCreditCap(ctx, tenant.Account.ID, id, &below, store.CapPeriodMonthly); err != nil {
		t.Fatal(err)
	}
	if spent, _, _ := keySpend(t, g, tenant.Account.ID, id, store.CapPeriodMonthly); spent != listed {
		t.Errorf("the month's budget counts %d of the key's %d", spent, listed)
	}
	// Until every part of the gateway knows the cap the key is still served (the change feed
	// carries it): those requests are counted, and then the cap holds.
	raced := int64(0)
	for deadline := time.Now().Add(10 * time.Second); ; {
		status, _, body := do(t, c, g.URL, chat, bearer)
		if status == http.StatusPaymentRequired && strings.Contains(string(body), "credit cap") {
			break
		}
		if status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("a cap below what the key spent: %d %s", status, body)
		}
		raced++
		time.Sleep(20 * time.Millisecond)
	}
	waitSettled(t, g, tenant.Account, 3+raced)

	// A daily cap made monthly keeps what the key spent today in this month's budget.
	capMicros := int64(200_000)
	key2, id2 := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{Name: "daily", CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily})
	bearer2 := map[string]string{"Authorization": "Bearer " + key2}
	served := 3 + raced
	for {
		status, _, body := do(t, c, g.URL, chat, bearer2)
		if status == 402 {
			break
		}
		if status != 200 || served > 30 {
			t.Fatalf("daily: %d %s", status, body)
		}
		served++
		waitSettled(t, g, tenant.Account, served)
	}
	daySpent, _, _ := keySpend(t, g, tenant.Account.ID, id2, store.CapPeriodDaily)
	if _, err := g.Accounts.SetCreditCap(ctx, tenant.Account.ID, id2, &capMicros, store.CapPeriodMonthly); err != nil {
		t.Fatal(err)
	}
	if monthSpent, _, listed := keySpend(t, g, tenant.Account.ID, id2, store.CapPeriodMonthly); monthSpent != daySpent || listed != daySpent {
		t.Errorf("after the switch to monthly the budget counts %d (listed %d) of the %d spent today", monthSpent, listed, daySpent)
	}
	eventually(t, "the same cap made monthly", statusIs(t, c, g, key2, chat, 402, "credit cap"))
}

// raceCappedKey sends n requests at once, streamed and not, spread over the gateways, with one
// capped key, and returns the statuses.
func raceCappedKey(t *testing.T, gws []*apitest.Gateway, key string, n int) map[int]int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stream := i%2 == 0
			g := gws[i%len(gws)]
			req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(chatBody("pricey", fmt.Sprintf("hello %d", i), stream, 64)))
			req.Header.Set("Authorization", "Bearer "+key)
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 402 && (!strings.Contains(string(body), "credit cap") || res.Header.Get("x-should-retry") != "false") {
				t.Errorf("402: %s", body)
			}
			if res.StatusCode == 200 && stream && !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
				t.Errorf("stream did not finish: %s", body)
			}
			mu.Lock()
			statuses[res.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return statuses
}

// checkCappedBooks checks, after a race on a capped key: some requests served and some refused
// and nothing else; the key's spend within its cap; every 200 billed exactly once; the budget,
// the key list and the usage records agreeing; nothing left reserved; the account's books.
func checkCappedBooks(t *testing.T, g *apitest.Gateway, tenant apitest.Tenant, keyID uuid.UUID, capMicros, granted int64, statuses map[int]int, total int) {
	t.Helper()
	if statuses[200] == 0 || statuses[402] == 0 || statuses[200]+statuses[402] != total {
		t.Fatalf("statuses %v: want some served and some refused at the key's cap, nothing else", statuses)
	}
	waitSettled(t, g, tenant.Account, int64(statuses[200]))
	_, usage := checkBooks(t, g, tenant.Account, granted)
	spent, reserved, listed := keySpend(t, g, tenant.Account.ID, keyID, store.CapPeriodMonthly)
	if spent > capMicros || spent != usage || listed != usage || reserved != 0 {
		t.Fatalf("the key spent %d of its cap of %d (listed %d, usage records %d, reserved %d)", spent, capMicros, listed, usage, reserved)
	}
	entries, err := g.Store.LedgerEntries(context.Background(), tenant.Account.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Reason == store.ReasonUsage {
			if seen[e.IdempotencyKey] {
				t.Errorf("request billed twice: %s", e.IdempotencyKey)
			}
			seen[e.IdempotencyKey] = true
		}
	}
	if len(seen) != statuses[200] {
		t.Fatalf("%d usage entries for %d answers of 200", len(seen), statuses[200])
	}
	t.Logf("statuses %v; the key spent %d of %d", statuses, spent, capMicros)
}

// TestCappedKeyConcurrentSpendNeverPassesTheCap: 200 concurrent requests, streamed and not, with
// one key whose cap covers only some of them, on an account with plenty of credit. The key's
// spend never passes its cap and every 200 is billed exactly once.
func TestCappedKeyConcurrentSpendNeverPassesTheCap(t *testing.T) {
	// The cap's period is the UTC day (or month) the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	capMicros := int64(600_000) // a request reserves up to ~64,000 and costs ~20,000
	key, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodMonthly})
	statuses := raceCappedKey(t, []*apitest.Gateway{g}, key, 200)
	checkCappedBooks(t, g, tenant, id, capMicros, granted, statuses, 200)
}

// TestKeyCapAcrossTwoGateways: the same race through two gateway instances on one database: the
// cap holds across processes, because the budget is one row both reserve against.
func TestKeyCapAcrossTwoGateways(t *testing.T) {
	// The cap's period is the UTC day (or month) the test runs in: one day, not two.
	clocktest.NotAcrossMidnight(t, time.Minute)
	g := apitest.Start(t, apitest.Options{Config: moneyConfig(t)})
	g2 := apitest.Start(t, apitest.Options{Config: g.Config, ConnString: g.ConnString})
	const granted = 100_000_000
	tenant := g.NewTenant(t, "acme", 0, granted)
	capMicros := int64(600_000)
	key, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodMonthly})
	statuses := raceCappedKey(t, []*apitest.Gateway{g, g2}, key, 200)
	checkCappedBooks(t, g, tenant, id, capMicros, granted, statuses, 200)
}

// TestCappedKeyDuringDatabaseOutage: while the database is down, a capped key's request (and
// its GET /v1/credits) is refused with 503 and Retry-After (its budget is kept only in the
// database), while an
// uncapped key of the same account is still served from the process's credit hold; once the
// database is back the capped key is served again.
func TestCappedKeyDuringDatabaseOutage(t *testing.T) {
	o := pgtest.NewOutage(t)
	g := apitest.Start(t, apitest.Options{ConnString: o.ConnString()})
	c := g.Client(t)
	tenant := g.NewTenant(t, "acme", 0, 5_000_000)
	capMicros := int64(1_000_000)
	capped, _ := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{CreditCapMicros: &capMicros})
	chat := validRequests["POST /v1/chat/completions"]
	for _, k := range []string{capped, tenant.Key} {
		eventually(t, "before the outage", statusIs(t, c, g, k, chat, 200, ""))
	}
	o.Stop()
	status, h, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + capped})
	if status != 503 || h.Get("Retry-After") == "" || strings.Contains(string(body), "connect") {
		t.Fatalf("a capped key while the database is down: %d %v %s", status, h, body)
	}
	if status, _, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + tenant.Key}); status != 200 {
		t.Fatalf("an uncapped key while the database is down: %d %s", status, body)
	}
	// Its credits too: what its cap leaves is known only to the database.
	credits := request{"GET", "/v1/credits", ""}
	if status, h, body := do(t, c, g.URL, credits, map[string]string{"Authorization": "Bearer " + capped}); status != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("a capped key's credits while the database is down: %d %v %s", status, h, body)
	}
	o.Start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, _, body := do(t, c, g.URL, chat, map[string]string{"Authorization": "Bearer " + capped})
		if status == 200 {
			break
		}
		if status != 503 || time.Now().After(deadline) {
			t.Fatalf("a capped key after the outage: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKeyPrincipalForLaterWork: the principal of a key looked up by its account and id (for
// work done later on its behalf, such as an agent's model calls) carries the key's limits; a
// disabled, expired or revoked key has none, nor has the key looked up under another account.
func TestKeyPrincipalForLaterWork(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	tenant := g.NewTenant(t, "acme", 0, 1_000_000)
	capMicros := int64(1234)
	_, id := keyWith(t, g, tenant.Account.ID, accounts.KeyOptions{CreditCapMicros: &capMicros, CapPeriod: store.CapPeriodDaily, Models: []string{"service-flint"}})
	p, err := g.Auth.KeyPrincipal(ctx, tenant.Account.ID, id)
	if err != nil || p.AccountID != tenant.Account.ID || p.Limits == nil || !p.Limits.HasCap || p.Limits.CapMicros != capMicros ||
		p.Limits.CapPeriod != store.CapPeriodDaily || !p.AllowsModel("service-flint") || p.AllowsModel("service-sonnet") {
		t.Fatalf("the principal of a capped, confined key: %+v %+v, %v", p, p.Limits, err)
	}
	other := g.NewTenant(t, "globex", 0, 1_000_000)
	if _, err := g.Auth.KeyPrincipal(ctx, other.Account.ID, id); !errors.Is(err, auth.ErrUnknown) {
		t.Fatalf("acme's key looked up as globex's: %v, want ErrUnknown", err)
	}
	if p, err := g.Auth.KeyPrincipal(ctx, tenant.Account.ID, tenant.KeyID); err != nil || p.Limits != nil || !p.AllowsModel("service-sonnet") {
		t.Fatalf("the principal of a key without limits: %+v, %v", p, err)
	}
	if _, err := g.Accounts.Disable(ctx, tenant.Account.ID, id); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Auth.KeyPrincipal(ctx, tenant.Account.ID, id); !errors.Is(err, auth.ErrDisabled) {
		t.Fatalf("a disabled key: %v", err)
	}
	past := time.Now().Add(-time.Second)
	if _, err := g.Store.SetAPIKeyLimits(ctx, tenant.Account.ID, tenant.KeyID, store.KeyLimits{ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Auth.KeyPrincipal(ctx, tenant.Account.ID, tenant.KeyID); !errors.As(err, new(*auth.ExpiredError)) {
		t.Fatalf("an expired key: %v", err)
	}
	if _, err := g.Accounts.RevokeAll(ctx, tenant.Account.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Auth.KeyPrincipal(ctx, tenant.Account.ID, id); !errors.Is(err, auth.ErrUnknown) {
		t.Fatalf("a revoked key: %v", err)
	}
}
