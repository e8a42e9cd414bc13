package agent

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/store"
)

// ModelCall is one model call of a session: a chat-completions request (non-streamed) for the
// session's account, run through the gateway's routing, reservation and metering.
type ModelCall struct {
	Principal auth.Principal
	// RequestID is the call's request id (agt_<session>_<turn>): its usage record's, which the
	// ledger bills once.
	RequestID string
	SessionID uuid.UUID
	// Body is the chat-completions request.
	Body []byte
	// CeilingMicros bounds the call's worst-case cost: its output bound is lowered to fit.
	CeilingMicros int64
}

// ModelAnswer is a model call's answer: the chat-completions response and what it cost.
type ModelAnswer struct {
	Body         []byte
	Expert       string
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
}

// ModelCaller runs model calls. It returns ErrSpendCeiling when not even a minimal call fits
// the ceiling, an *apierror.Error for a refusal or an upstream failure.
type ModelCaller func(ctx context.Context, c ModelCall) (ModelAnswer, error)

// ErrSpendCeiling reports a model call whose smallest worst case does not fit its ceiling.
var ErrSpendCeiling = errors.New("the model call does not fit the session's remaining spend")

// Options are what a Service is built from.
type Options struct {
	// Store is the database.
	Store *store.Store
	// Config is the gateway's configuration (its models and its agents section, whose unset
	// fields New fills with the defaults).
	Config *config.Config
	// Tools are the MCP tenant tools; a session is offered the read-only ones its environment
	// names, and open_ticket.
	Tools []mcp.Tool
	// Call runs model calls; nil for a Service that only reads and records (the operator's
	// commands), whose Run must not be called.
	Call   ModelCaller
	Logger *slog.Logger
}

// Service is the agents service. It is safe for concurrent use.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	cfg    config.Agents
	models *config.Config
	tools  map[string]mcp.Tool
	call   ModelCaller
	log    *slog.Logger
}

// New builds the service; it starts nothing (Run does).
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Config == nil {
		return nil, errors.New("agent: Store and Config are required")
	}
	cfg := o.Config.Agents
	cfg.ApplyDefaults()
	if err := cfg.Validate(o.Config); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{pool: o.Store.Pool(), q: db.New(o.Store.Pool()), cfg: cfg, models: o.Config,
		tools: map[string]mcp.Tool{}, call: o.Call, log: o.Logger}
	for _, t := range o.Tools {
		if t.Annotations.ReadOnly {
			s.tools[t.Name] = t
		}
	}
	return s, nil
}

// Run runs the job runner, the LISTEN fan-out and the approval expiry until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
