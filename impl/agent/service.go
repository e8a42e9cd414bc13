package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/tool"
)

// ErrSpendCeiling reports a model call whose smallest worst case does not fit its ceiling
// (the exchange's exchange.ErrSpendCeiling).
var ErrSpendCeiling = exchange.ErrSpendCeiling

// Options are what a Service is built from.
type Options struct {
	// Store is the database.
	Store *store.Store
	// Config is the gateway's configuration (its models and its agents section, whose unset
	// fields New fills with the defaults).
	Config *config.Config
	// Tools are the MCP tenant tools; a session is offered the read-only ones its environment
	// names, and open_ticket.
	Tools []tool.Tool
	// Exchange runs the sessions' model calls, each a neutral request (llm.Request) for the
	// session's principal, through the gateway's one exchange (routing, reservation, upstream
	// attempts, metering) called directly; nil for a Service that only reads and records (the
	// operator's commands), whose Run must not be called.
	Exchange *exchange.Engine
	// KeyPrincipal returns the account's API key with id as the gateway's authentication sees it, with
	// its limits (auth.Authenticator.KeyPrincipal): auth.ErrUnknown for a revoked or unknown
	// key, auth.ErrDisabled for a disabled one, an *auth.ExpiredError for an expired one. Every
	// step of a session started with a key calls it, so that the session's model calls keep to
	// the key's limits; required with Exchange.
	KeyPrincipal func(ctx context.Context, accountID, id uuid.UUID) (auth.Principal, error)
	Logger       *slog.Logger
}

// Service is the agents service. It is safe for concurrent use.
type Service struct {
	store    *store.Store
	pool     *pgxpool.Pool
	q        *store.AgentQueries
	cfg      config.Agents
	models   *config.Config
	tools    map[string]checkedTool
	exchange *exchange.Engine
	key      func(ctx context.Context, accountID, id uuid.UUID) (auth.Principal, error)
	log      *slog.Logger
	riverLog *slog.Logger
	river    *river.Client[pgx.Tx]
	waiters  waiters
	// tails counts the live tails of each account (Follow).
	tails liveTails
	// working counts the jobs this process is running (Working).
	working atomic.Int64
	// endingsLeft counts the revocations whose ending of sessions failed (EndingsLeft), and
	// sessionsLeft the live sessions those endings had found (SessionsLeft).
	endingsLeft, sessionsLeft atomic.Int64
}

// Working is the number of the agents' jobs this process is running: a stopping gateway waits
// for them (their model calls settle through its meter) but not for the job runner's own
// calls to a database that hangs.
func (s *Service) Working() int64 { return s.working.Load() }

// checkedTool is a tool the agents may call, with its input schema compiled: a call's
// arguments are checked before its handler runs (tool.Handler's contract).
type checkedTool struct {
	tool.Tool
	schema *tool.Schema
}

// New builds the service; it starts nothing (Run does).
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Config == nil {
		return nil, errors.New("agent: Store and Config are required")
	}
	cfg := o.Config.Agents
	cfg.ApplyDefaults()
	cfg.DefaultModel = cfg.Model(o.Config)
	if err := cfg.Validate(o.Config); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{store: o.Store, pool: o.Store.Pool(), q: o.Store.Agents(), cfg: cfg, models: o.Config,
		tools: map[string]checkedTool{}, exchange: o.Exchange, key: o.KeyPrincipal, log: o.Logger,
		riverLog: riverLogger(o.Logger.Handler())}
	for _, t := range o.Tools {
		if t.Annotations.ReadOnly && t.Name != ToolOpenTicket {
			schema, err := tool.CompileSchema(t)
			if err != nil {
				return nil, fmt.Errorf("agents: tool %q: input schema: %w", t.Name, err)
			}
			s.tools[t.Name] = checkedTool{Tool: t, schema: schema}
		}
	}
	var err error
	if s.river, err = s.newRiver(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run runs the job runner (River: any process runs any session's jobs), the LISTEN fan-out of
// events, the approval expiry, the sweep of discarded jobs and that of lapsed sessions
// (sweepLapsed) until ctx ends. Then the running jobs get config agents.stop_grace to finish
// before they are cancelled; a cancelled step runs again, on any process, and its model call
// is billed once.
func (s *Service) Run(ctx context.Context) error {
	if s.exchange == nil || s.key == nil {
		return errors.New("agent: Run needs Options.Exchange and Options.KeyPrincipal")
	}
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := s.river.Start(work); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.listen(work) })
	wg.Go(func() { s.everySweep(work, s.cfg.ApprovalSweep, s.expireApprovals) })
	wg.Go(func() { s.everySweep(work, s.cfg.ApprovalSweep, s.sweepDiscarded) })
	wg.Go(func() { s.everySweep(work, s.cfg.SessionSweep, s.sweepLapsed) })
	<-ctx.Done()
	var err error
	if s.cfg.StopGrace > 0 {
		grace, done := context.WithTimeout(context.Background(), s.cfg.StopGrace)
		err = s.river.Stop(grace)
		done()
	}
	if s.cfg.StopGrace <= 0 || err != nil {
		hard, done := context.WithTimeout(context.Background(), 30*time.Second)
		err = s.river.StopAndCancel(hard)
		done()
	}
	cancel()
	wg.Wait()
	return err
}
