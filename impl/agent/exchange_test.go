package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/tenanttools"
)

// TestStepCallsTheExchangeWithoutHTTP (issue 19, item 1): the agents are built on the exchange
// alone (exchange.Engine, the meter, the upstreams, the store), with no HTTP surface anywhere in
// the process: no httpapi.Server, no handler, no request context. A spawned session's steps
// call the exchange directly with the neutral request (llm.Request) and the session's
// principal, and read the neutral answer (llm.Response); each model call is routed,
// reserved, answered by the upstream and settled exactly as through the gateway: one usage
// record a turn (route agent, tagged with the session), one ledger entry each, and the
// session's spend equal to their sum.
func TestStepCallsTheExchangeWithoutHTTP(t *testing.T) {
	w := newWorld(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	st, err := store.Open(ctx, w.conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	feed := changefeed.NewWithOptions(st, changefeed.Options{Logger: log})
	authn := auth.New(st, feed, auth.Options{Logger: log})
	meter := billing.New(st, billing.Options{Logger: log})
	upstreams := provider.FromConfig(w.cfg, w.simURL, provider.NewTransport())
	for _, u := range upstreams {
		u.Retry = provider.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: time.Second}
	}
	exch := exchange.New(exchange.Options{Config: w.cfg, Store: st, Feed: feed, Upstreams: upstreams, Meter: meter, Logger: log})
	storage, err := dataset.NewDirStorage(w.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	datasets := dataset.New(st, storage, dataset.Options{Logger: log})
	t.Cleanup(func() { _ = datasets.Close() })
	svc, err := agent.New(agent.Options{Store: st, Config: w.cfg, Tools: tenanttools.Tools(datasets), Exchange: exch,
		KeyPrincipal: authn.KeyPrincipal, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	// Stopped before the store and the datasets close (cleanups run last first).
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { feed.Run(ctx) })
	wg.Go(func() { _ = meter.Run(ctx) })
	wg.Go(func() { _ = svc.Run(ctx) })

	acct, err := w.accts.CreateAccount(ctx, "bare", "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.accts.GrantCredit(ctx, acct.ID, 5_000_000, "credit-bare", "test"); err != nil {
		t.Fatal(err)
	}
	k, err := w.accts.CreateKey(ctx, acct.ID, "bare-key", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.AssignSlot(ctx, acct.ID, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := datasets.Put(ctx, acct.ID, "sales", dataset.CSV, strings.NewReader("region,amount\nnorth,10\nsouth,32\neast,7\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := datasets.Load(ctx, acct.ID, "sales", dataset.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	p := auth.Principal{AccountID: acct.ID, KeyID: k.Key.ID}

	res, err := svc.Spawn(ctx, p, "main", "What is the total of the sales? "+script(querySales), "")
	if err != nil {
		t.Fatal(err)
	}
	s := waitSession(t, svc, p, res.SessionID, agent.StateReady)
	if s.Turns != 2 || s.SpentMicros <= 0 || s.SpentMicros > s.MaxSpendMicros {
		t.Fatalf("session after its answer: %+v", s)
	}
	evs := allEvents(t, svc, p, res.SessionID)
	checkSeq(t, evs)
	want := []string{"state", "state", "state", "message_in", "model_call", "tool_call", "tool_result", "model_call", "message_out", "state"}
	if fmt.Sprint(kinds(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds(evs), want)
	}
	if answer := field(t, evs[8], "text").(string); !strings.Contains(answer, "49") {
		t.Fatalf("answer %q", answer)
	}
	usage := usageOf(t, w, p, res.SessionID, s.SpentMicros)
	if len(usage) != 2 {
		t.Fatalf("%d usage records, want 2", len(usage))
	}
	for turn := 1; turn <= 2; turn++ {
		r, ok := usage[agent.RequestID(uuidOf(res.SessionID), turn)]
		if !ok || r.Route != exchange.AgentRoute || r.APIKeyID != p.KeyID || r.Model != "service-flint" || r.CostMicros <= 0 {
			t.Fatalf("usage of turn %d: %+v (found %v)", turn, r, ok)
		}
		if got := field(t, evs[4+3*(turn-1)], "request_id"); got != agent.RequestID(uuidOf(res.SessionID), turn) {
			t.Fatalf("model_call event of turn %d names request %v", turn, got)
		}
	}
	checkLedger(t, w, p, usage)
}
