package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/pgtest"
	"github.com/tollgate/tollgate/impl/gateway"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/sim"
	"github.com/tollgate/tollgate/impl/store"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// world is one database with the upstream simulator and gateway processes ("nodes") on it.
type world struct {
	t       *testing.T
	conn    string
	cfg     *config.Config
	sim     *sim.Simulator
	simURL  string
	dataDir string
	store   *store.Store
	accts   *accounts.Service
}

// node is one gateway process: its own store, meter, HTTP surface, agents and River client.
type node struct {
	gw     *gateway.Gateway
	store  *store.Store
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// stop ends the node's Run (its agents stop as configured: agents.stop_grace) and waits.
func (n *node) stop() {
	n.once.Do(func() {
		n.cancel()
		<-n.done
		_ = n.gw.Close()
	})
}

// newWorld makes a fresh database and simulator; tune adjusts the configuration (short River
// timings are set already).
func newWorld(t *testing.T, tune func(*config.Config)) *world {
	t.Helper()
	cfg := config.Default()
	cfg.Agents.ApprovalSweep = 100 * time.Millisecond
	cfg.Agents.SessionSweep = 100 * time.Millisecond
	cfg.Agents.JobTimeout = 20 * time.Second
	cfg.Agents.RescueAfter = 30 * time.Second
	cfg.Agents.StopGrace = 2 * time.Second
	if tune != nil {
		tune(cfg)
	}
	w := &world{t: t, conn: pgtest.ConnString(t), cfg: cfg, sim: sim.New(sim.Options{}), dataDir: t.TempDir()}
	srv := httptest.NewServer(w.sim)
	t.Cleanup(srv.Close)
	w.simURL = srv.URL
	st, err := store.Open(context.Background(), w.conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.store, w.accts = st, &accounts.Service{Store: st, Config: cfg}
	return w
}

// start runs a node until the test ends (or its stop).
func (w *world) start() *node {
	t := w.t
	t.Helper()
	st, err := store.Open(context.Background(), w.conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	storage, err := dataset.NewDirStorage(w.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	retry := provider.RetryPolicy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxRetryAfter: time.Second}
	gw, err := gateway.New(gateway.Options{Store: st, Config: w.cfg, Logger: log, SimulatorURL: w.simURL, Retry: &retry, DatasetStorage: storage})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{gw: gw, store: st, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(n.done); _ = gw.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// tenant is an account with a key, credit, a slot "main" and (on node n) a loaded dataset
// "sales".
type tenant struct {
	p    auth.Principal
	name string
}

func (w *world) tenant(n *node, name string, creditMicros int64) tenant {
	t := w.t
	t.Helper()
	ctx := context.Background()
	acct, err := w.accts.CreateAccount(ctx, name, "default")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.accts.GrantCredit(ctx, acct.ID, creditMicros, "credit-"+name, "test"); err != nil {
		t.Fatal(err)
	}
	k, err := w.accts.CreateKey(ctx, acct.ID, name+"-key", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.gw.Agents.AssignSlot(ctx, acct.ID, "main"); err != nil {
		t.Fatal(err)
	}
	csv := "region,amount\nnorth,10\nsouth,32\neast,7\n"
	if _, err := n.gw.Datasets.Put(ctx, acct.ID, "sales", dataset.CSV, strings.NewReader(csv)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.gw.Datasets.Load(ctx, acct.ID, "sales", dataset.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	return tenant{p: auth.Principal{AccountID: acct.ID, KeyID: k.Key.ID}, name: name}
}

// waitSession waits until the session is in one of states and returns it.
func waitSession(t *testing.T, svc *agent.Service, p auth.Principal, id string, states ...string) agent.SessionView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last agent.SessionView
	for time.Now().Before(deadline) {
		list, err := svc.Sessions(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.ID == id {
				last = s
				for _, want := range states {
					if s.State == want {
						return s
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s is %s (%s), not %v", id, last.State, last.EndReason, states)
	return last
}

// allEvents reads the session's whole event log.
func allEvents(t *testing.T, svc *agent.Service, p auth.Principal, id string) []agent.Event {
	t.Helper()
	var out []agent.Event
	for {
		evs, err := svc.Events(context.Background(), p, id, int64(len(out)), agent.MaxTailLines)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
	}
}

// checkSeq checks that the events are numbered 1, 2, ... without gaps.
func checkSeq(t *testing.T, evs []agent.Event) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %v", i, e.Seq, kinds(evs))
		}
	}
}

func kinds(evs []agent.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func field(t *testing.T, e agent.Event, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// usageOf waits until the usage records of the session add up to its spend (the meter writes
// them in batches), and returns them by request id.
func usageOf(t *testing.T, w *world, p auth.Principal, sessionID string, spent int64) map[string]store.UsageRecord {
	t.Helper()
	id := uuid.MustParse(sessionID)
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := w.store.UsageRecords(context.Background(), p.AccountID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.UsageRecord{}
		var sum int64
		for _, r := range recs {
			if r.AgentSessionID == id {
				if _, dup := out[r.RequestID]; dup {
					t.Fatalf("two usage records for request %s", r.RequestID)
				}
				out[r.RequestID] = r
				sum += r.CostMicros
			}
		}
		if sum == spent {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage records of session %s cost %d, the session spent %d", sessionID, sum, spent)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func uuidOf(s string) uuid.UUID { return uuid.MustParse(s) }

// isConflict reports whether err is a *agent.ConflictError whose message contains text.
func isConflict(err error, text string) bool {
	var c *agent.ConflictError
	return errors.As(err, &c) && strings.Contains(c.Message, text)
}
