package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/store"
)

// outageModel is a chat model of the chat simulator priced at 2,000 micro-units a token, so
// that steady traffic spends several times, within the outage, what a hold of chunks capped
// at 1 USD would hold.
const outageModel = "outage-pricey"

func outageConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Models = append(cfg.Models, config.Model{ID: outageModel, Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 2_000_000_000, OutputPerMTok: 2_000_000_000}, MaxOutputTokens: 64,
		Backend: &config.Upstream{Provider: "sim-openai-chat", Model: "sim-pricey"}})
	for i := range cfg.Plans {
		cfg.Plans[i].Models = append(cfg.Plans[i].Models, outageModel)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// outageCall is one request of the test and its answer.
type outageCall struct {
	status    int
	header    http.Header
	body      []byte
	requestID string
	err       error
	start     time.Time
	end       time.Time
}

// chatCall sends a chat completion of the outage model with key (safe from any goroutine).
func chatCall(c *http.Client, base, key, prompt string) outageCall {
	body := `{"model":"` + outageModel + `","max_tokens":40,"messages":[{"role":"user","content":"` + prompt + ` [[sim words=30]]"}]}`
	call := outageCall{start: time.Now()}
	defer func() { call.end = time.Now() }()
	req, err := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		call.err = err
		return call
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := c.Do(req)
	if err != nil {
		call.err = err
		return call
	}
	defer res.Body.Close()
	call.body, call.err = io.ReadAll(res.Body)
	call.status, call.header, call.requestID = res.StatusCode, res.Header, res.Header.Get("x-request-id")
	call.end = time.Now()
	return call
}

// TestDatabaseOutageCredit (issue 12, must-show 1) stops PostgreSQL under steady traffic, for
// 8 s, with two gateways on it: one with the default failure handling (refuse), one with
// continue and a risk bound of 0.30 USD. Both keep the default outage cover (holds sized for
// 30 s of each account's recent spend rate).
//
//   - A steady account (20 requests a second on the refuse gateway, about 1.6 USD a second)
//     gets 200 to every request before, throughout and after the outage: its hold covers the
//     outage at its recent rate, although the outage spends several times what a hold of
//     chunks capped at 1 USD (the meter's ChunkCapMicros) would hold.
//   - Keys that the gateways have never seen get 503 with Retry-After, in the route's envelope.
//   - An active account that spends fast during the outage runs through its hold: on the
//     refuse gateway it then gets 503 with Retry-After; on the continue gateway it gets 200 on
//     credit up to its risk bound, then 503.
//
// Afterwards every 200 has exactly one usage record and one ledger entry and nothing else
// has, every balance is the sum of its ledger and not below zero, everything served under
// refuse was billed in full (no overspend), and what was served on credit is marked as such
// in its usage record and ledger entry, and billed from the account's free credit.
//
// The outage is 8 s rather than the 20 s: every behaviour shows within it (the steady
// account spends more than a chunk-sized hold holds within the first seconds, the hold
// accounts run out within the first second), and it keeps the test well under a minute.
func TestDatabaseOutageCredit(t *testing.T) {
	const (
		outage     = 8 * time.Second
		riskBound  = 300_000
		chunkCap   = 1_000_000 // billing.Options.ChunkCapMicros's default, which the gateway keeps
		steadyRate = 20        // requests a second
	)
	o := pgtest.NewOutage(t)
	cfg := outageConfig(t)
	feed := changefeed.Options{Heartbeat: 200 * time.Millisecond, HeartbeatWait: 500 * time.Millisecond}
	refuse := apitest.Start(t, apitest.Options{ConnString: o.ConnString(), Config: cfg, ChangeFeed: feed})
	cont := apitest.Start(t, apitest.Options{ConnString: o.ConnString(), Config: cfg, ChangeFeed: feed,
		CreditOutage: billing.OutagePolicy{FailureHandling: billing.FailureContinue, RiskMicros: riskBound}})
	steady := refuse.NewTenant(t, "steady", 0, 500_000_000)
	spentRefuse := refuse.NewTenant(t, "spent-refuse", 0, 10_000_000)
	spentContinue := cont.NewTenant(t, "spent-continue", 0, 10_000_000)
	unseenRefuse, _ := refuse.NewKey(t, steady.Account.ID, 0)
	unseenContinue, _ := cont.NewKey(t, spentContinue.Account.ID, 0)
	c := refuse.Client(t) // every answer is validated against the OpenAPI document

	// Steady traffic, paced, from two workers until stopped.
	var steadyMu sync.Mutex
	var steadyCalls []outageCall
	stopSteady := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Go(func() {
			tick := time.NewTicker(2 * time.Second / steadyRate)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stopSteady:
					return
				case <-tick.C:
				}
				call := chatCall(c, refuse.URL, steady.Key, fmt.Sprintf("steady %d-%d", w, i))
				steadyMu.Lock()
				steadyCalls = append(steadyCalls, call)
				steadyMu.Unlock()
			}
		})
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopSteady)
			workers.Wait()
		}
	}
	defer stop()

	// Before: the steady account's hold grows to cover the outage at its spend rate (measured
	// here from its usage records), and the two other accounts are active, with holds.
	ctx := context.Background()
	spentSince := func(since time.Time) int64 {
		steadyMu.Lock()
		defer steadyMu.Unlock()
		n := int64(0)
		for _, call := range steadyCalls {
			if call.start.After(since) && call.status == 200 {
				n++
			}
		}
		return n
	}
	time.Sleep(time.Second)
	_, cost0, err := refuse.Store.UsageTotals(ctx, steady.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	_, cost1, err := refuse.Store.UsageTotals(ctx, steady.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	rate := float64(cost1-cost0) / time.Since(t0).Seconds()
	need := int64(rate * outage.Seconds() * 1.25)
	t.Logf("steady account: %d requests in 2 s, spending about %.0f micro-units a second: %d over the outage, and a quarter more",
		spentSince(t0), rate, int64(rate*outage.Seconds()))
	if need <= 2*chunkCap {
		t.Fatalf("the steady account spends %d over the outage: not more than a hold without an outage reserve (%d)", need, 2*chunkCap)
	}
	holdOf := func(g *apitest.Gateway, acct uuid.UUID) int64 {
		holds, err := g.Store.CreditHolds(ctx, acct)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range holds {
			return h.AmountMicros
		}
		return 0
	}
	waitUntil(t, "the steady account's hold covers the outage", func() bool { return holdOf(refuse, steady.Account.ID) >= need })
	var warmRefuse, warmContinue []string
	for i := range 3 {
		for _, a := range []struct {
			g   *apitest.Gateway
			key string
			ids *[]string
		}{{refuse, spentRefuse.Key, &warmRefuse}, {cont, spentContinue.Key, &warmContinue}} {
			call := chatCall(c, a.g.URL, a.key, fmt.Sprintf("warm %d", i))
			if call.status != 200 {
				t.Fatalf("before the outage: %d %s (%v)", call.status, call.body, call.err)
			}
			*a.ids = append(*a.ids, call.requestID)
		}
	}
	t.Logf("holds before the outage: steady %d, spent-refuse %d, spent-continue %d",
		holdOf(refuse, steady.Account.ID), holdOf(refuse, spentRefuse.Account.ID), holdOf(cont, spentContinue.Account.ID))

	o.Stop()
	outageStart := time.Now()

	// Keys the gateways have never seen cannot be checked: 503 with Retry-After.
	for _, u := range []struct {
		g   *apitest.Gateway
		key string
	}{{refuse, unseenRefuse}, {cont, unseenContinue}} {
		call := chatCall(c, u.g.URL, u.key, "unseen")
		checkUnavailable(t, "unseen key", "/v1/chat/completions", call.status, call.header, call.body)
	}

	// The two other accounts spend as fast as they can until their holds run out: until three
	// requests in a row are refused. (A request may still be served after a refusal: the
	// gateway settles a request after its answer has left, so the credit its worst case held
	// may return to the hold, or to the risk bound, just after the next request was refused.)
	burst := func(g *apitest.Gateway, key string) (served []string, refusals []outageCall) {
		for i, inRow := 0, 0; inRow < 3; i++ {
			if i > 1000 {
				t.Fatal("the hold never ran out")
			}
			call := chatCall(c, g.URL, key, fmt.Sprintf("burst %d", i))
			switch {
			case call.err != nil:
				t.Fatal(call.err)
			case call.status == 200:
				served = append(served, call.requestID)
				inRow = 0
			default:
				refusals = append(refusals, call)
				inRow++
			}
		}
		return served, refusals
	}
	servedRefuse, refusedRefuse := burst(refuse, spentRefuse.Key)
	servedContinue, refusedContinue := burst(cont, spentContinue.Key)
	for _, call := range append(refusedRefuse, refusedContinue...) {
		checkUnavailable(t, "spent hold", "/v1/chat/completions", call.status, call.header, call.body)
	}
	sRefuse, sContinue := refuse.Meter.CreditStats(), cont.Meter.CreditStats()
	t.Logf("outage: spent-refuse served %d then refused; spent-continue served %d (%d of them on credit, %d micro-units) then refused",
		len(servedRefuse), len(servedContinue), sContinue.OnCreditRequests, sContinue.OnCreditMicros)
	if !sRefuse.DatabaseDown || sRefuse.OutageRefused < 3 || sRefuse.OnCreditRequests != 0 {
		t.Errorf("refuse gateway's credit during the outage: %+v", sRefuse)
	}
	if !sContinue.DatabaseDown || sContinue.OutageRefused < 3 || sContinue.OnCreditRequests < 1 || sContinue.OnCreditMicros > riskBound {
		t.Errorf("continue gateway's credit during the outage: %+v", sContinue)
	}

	time.Sleep(time.Until(outageStart.Add(outage)))
	o.Start()
	outageEnd := time.Now()
	waitUntil(t, "the meters reach the database again", func() bool {
		return !refuse.Meter.CreditStats().DatabaseDown && !cont.Meter.CreditStats().DatabaseDown
	})
	time.Sleep(time.Second)
	stop()

	// Every steady request got 200, throughout.
	during := 0
	var duringIDs []string
	for _, call := range steadyCalls {
		if call.err != nil || call.status != 200 {
			t.Errorf("steady request at %v of the outage: %d %s (%v)", call.start.Sub(outageStart).Round(time.Millisecond), call.status, call.body, call.err)
		}
		if call.start.After(outageStart) && call.end.Before(outageEnd) {
			during++
			duringIDs = append(duringIDs, call.requestID)
		}
	}
	if during < steadyRate {
		t.Errorf("only %d steady requests during the outage", during)
	}

	// The books, once the usage of the outage is written.
	for _, g := range []*apitest.Gateway{refuse, cont} {
		waitUntil(t, "the usage backlog is written", func() bool {
			s := g.Meter.WriterStats()
			return s.Backlog == 0 && s.Queued == 0
		})
	}
	var steadyIDs []string
	for _, call := range steadyCalls {
		steadyIDs = append(steadyIDs, call.requestID)
	}
	steadyRecords := checkOutageBooks(t, refuse.Store, steady.Account.ID, steadyIDs)
	var outageSpend int64
	for _, id := range duringIDs {
		outageSpend += steadyRecords[id].CostMicros
	}
	t.Logf("%d steady requests during the outage, spending %d micro-units (a hold without the outage reserve holds at most about %d)",
		during, outageSpend, 2*chunkCap)
	if outageSpend <= 2*chunkCap {
		t.Errorf("the steady account spent %d during the outage: the test did not need the outage reserve", outageSpend)
	}

	refuseRecords := checkOutageBooks(t, refuse.Store, spentRefuse.Account.ID, append(warmRefuse, servedRefuse...))
	for id, r := range refuseRecords {
		if r.OnCredit {
			t.Errorf("request %s served on credit under refuse", id)
		}
	}
	continueRecords := checkOutageBooks(t, cont.Store, spentContinue.Account.ID, append(warmContinue, servedContinue...))
	var onCredit, onCreditCost int64
	for _, r := range continueRecords {
		if r.OnCredit {
			onCredit++
			onCreditCost += r.CostMicros
		}
	}
	final := cont.Meter.CreditStats()
	if onCredit < 1 || onCredit != final.OnCreditRequests || onCreditCost != final.OnCreditMicros || onCreditCost > riskBound || final.AtRiskMicros != 0 {
		t.Errorf("%d requests (%d micro-units) marked on credit; the meter's stats: %+v", onCredit, onCreditCost, final)
	}
	for _, id := range warmContinue {
		if continueRecords[id].OnCredit {
			t.Errorf("request %s before the outage served on credit", id)
		}
	}
	t.Logf("spent-continue: %d requests served on credit for %d micro-units (bound %d), billed from the account's free credit",
		onCredit, onCreditCost, riskBound)
}

// checkOutageBooks checks that each request of ids (the x-request-id of every 200 answer the
// account got) has exactly one usage record and one usage ledger entry, and that no other
// request has either; that everything was billed in full, with a note only (and always) on
// what was served on credit; and that the balance is the sum of the ledger and not below zero.
// It returns the usage records by request id.
func checkOutageBooks(t *testing.T, st *store.Store, acct uuid.UUID, ids []string) map[string]store.UsageRecord {
	t.Helper()
	ctx := context.Background()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" || want[id] {
			t.Errorf("request id %q missing or repeated", id)
		}
		want[id] = true
	}
	var records []store.UsageRecord
	waitUntil(t, "every usage record is written", func() bool {
		var err error
		records, err = st.UsageRecords(ctx, acct, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		return len(records) >= len(want)
	})
	byID := make(map[string]store.UsageRecord, len(records))
	for _, r := range records {
		if _, dup := byID[r.RequestID]; dup {
			t.Errorf("two usage records of request %s", r.RequestID)
		}
		if !want[r.RequestID] {
			t.Errorf("usage record of request %s, which got no 200", r.RequestID)
		}
		byID[r.RequestID] = r
	}
	entries, err := st.LedgerEntries(ctx, acct, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	usage := 0
	for _, e := range entries {
		if e.Reason != store.ReasonUsage {
			continue
		}
		usage++
		id := strings.TrimPrefix(e.IdempotencyKey, "usage:")
		r, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("usage ledger entry %s without a usage record", e.IdempotencyKey)
		case e.AmountMicros != -r.CostMicros:
			t.Errorf("request %s: ledger entry %d for a cost of %d (%s)", id, e.AmountMicros, r.CostMicros, e.Note)
		case r.OnCredit != (e.Note == "served on credit during a database outage"):
			t.Errorf("request %s: on credit %v, ledger note %q", id, r.OnCredit, e.Note)
		}
	}
	if usage != len(want) || len(byID) != len(want) {
		t.Errorf("%d usage ledger entries and %d usage records for %d answers of 200", usage, len(byID), len(want))
	}
	credit, err := st.AccountCredit(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := st.LedgerSum(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if credit.BalanceMicros < 0 || sum != credit.BalanceMicros || credit.HeldMicros > credit.BalanceMicros {
		t.Errorf("balance %d, held %d, ledger sum %d", credit.BalanceMicros, credit.HeldMicros, sum)
	}
	return byID
}
