package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/changefeed"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/provider"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/routing"
	"github.com/tollgate/tollgate/impl/store"
)

// Server implements the generated strict server interface.
type Server struct {
	store     *store.Store
	config    *config.Config
	auth      *auth.Authenticator
	limiter   ratelimit.Limiter
	metrics   *metrics.Metrics
	log       *slog.Logger
	validate  *validator
	registry  *routing.Registry
	router    *routing.Router
	upstreams map[string]*provider.Upstream
	meter     *billing.Meter
	access    *modelAccess
	heartbeat time.Duration
	mcp       http.Handler
	agents    *agent.Service
	methods   routeMethods
	// streamsEnd ends when EndStreams is called: every stream still in flight then ends with
	// its format's in-band error (see respondStream).
	streamsEnd context.Context
	endStreams context.CancelFunc
}

var _ api.StrictServerInterface = (*Server)(nil)

// Options are the Server's collaborators.
type Options struct {
	Store  *store.Store
	Config *config.Config
	Auth   *auth.Authenticator
	// Limiter enforces per-key caps; nil disables them.
	Limiter ratelimit.Limiter
	// Metrics may be nil.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Upstreams are the configured providers by name, ready to call.
	Upstreams map[string]*provider.Upstream
	// Meter reserves and settles the cost of inference requests.
	Meter *billing.Meter
	// Router orders a fusion model's experts; nil means a fresh one.
	Router *routing.Router
	// Feed pushes model-access changes to the inference routes' cache.
	Feed *changefeed.Feed
	// Heartbeat is how long a stream may stay silent before a comment is sent (default 15 s).
	Heartbeat time.Duration
	// MCP serves /api/mcp behind authentication and the rate limit; nil means an MCP endpoint
	// with no tools.
	MCP http.Handler
	// Agents serves the /v1/agents routes; nil answers them 501.
	Agents *agent.Service
}

// New builds the Server. It fails only if the embedded OpenAPI document cannot be loaded or
// its request schemas compiled.
func New(o Options) (*Server, error) {
	doc, err := api.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded OpenAPI document: %w", err)
	}
	validate, err := newValidator(doc)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Router == nil {
		o.Router = routing.NewRouter(nil)
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	if o.MCP == nil {
		o.MCP = mcp.NewHandler(mcp.Options{Logger: o.Logger})
	}
	streamsEnd, endStreams := context.WithCancel(context.Background())
	return &Server{
		streamsEnd: streamsEnd, endStreams: endStreams,
		store: o.Store, config: o.Config, auth: o.Auth, limiter: o.Limiter, metrics: o.Metrics,
		log: o.Logger, validate: validate, registry: routing.NewRegistry(o.Config), router: o.Router,
		upstreams: o.Upstreams, meter: o.Meter, access: newModelAccess(o.Store, o.Feed), heartbeat: o.Heartbeat, mcp: o.MCP,
		agents: o.Agents, methods: newRouteMethods(doc),
	}, nil
}

// EndStreams ends every stream in flight, and any that starts later, with its format's in-band
// error (the gateway is shutting down; retry), billing what each produced. A shutdown calls it
// when its grace period is over.
func (s *Server) EndStreams() { s.endStreams() }

// Handler returns the whole HTTP surface.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, r, apierror.Invalid("", "the request body is not valid JSON"))
		},
		ResponseErrorHandlerFunc: s.respondError,
	})
	// Middlewares wrap in order, so the last listed runs first: authenticate, then the rate
	// limit, then validation.
	api.HandlerWithOptions(inferenceBinding{ServerInterface: strict, s: s}, api.StdHTTPServerOptions{
		BaseRouter:  mux,
		Middlewares: []api.MiddlewareFunc{s.validate.middleware, s.limitRate, s.authenticate},
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, r, apierror.Invalid("", "invalid request parameters"))
		},
	})
	// Every method: the MCP handler answers GET with 405 itself.
	mux.Handle("/api/mcp", s.authenticate(s.limitRate(s.mcp)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Before the 405: the Responses WebSocket handshake is refused with 426 (upgrade.go).
		if refuseResponsesUpgrade(w, r) {
			return
		}
		if methods := s.methods.allowed(r.URL.Path); len(methods) > 0 {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, r, &apierror.Error{Kind: apierror.KindMethodNotAllowed,
				Message: fmt.Sprintf("%s is not served on %s; use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))})
			return
		}
		msg := fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/v1/messages"):
			msg += ": the base URL should not end with /v1 for this client (Anthropic SDKs add /v1 themselves)"
		case strings.HasPrefix(r.URL.Path, "/v1/v1/"):
			msg += ": the path has /v1 twice; the base URL of OpenAI SDKs ends with a single /v1"
		case r.URL.Path == "/chat/completions" || r.URL.Path == "/responses" || r.URL.Path == "/models":
			msg += ": the base URL of OpenAI SDKs should end with /v1"
		}
		writeError(w, r, &apierror.Error{Kind: apierror.KindNotFound, Message: msg})
	})
	return s.edge(mux)
}

// respondError answers an error returned by a handler, logging internal ones.
func (s *Server) respondError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apierror.Error
	switch {
	case clientClosed(r):
		// The client went away (it is recorded as 499): worth a debug line, not an alert.
		s.logger(r.Context()).Debug("the client closed the request", "err", err)
	case errors.As(err, &e):
	case store.Unavailable(err):
		// The database cannot serve now: 503 with Retry-After, not a fault of ours. The access
		// log has the request; the outage itself is logged once, when it starts and ends.
		s.logger(r.Context()).Debug("the database is unavailable", "err", err)
		err = apierror.Unavailable("the database", err)
	default:
		s.logger(r.Context()).Error("handler failed", "err", err)
	}
	writeError(w, r, err)
}

// principal returns the verified caller; the authenticate middleware guarantees one.
func principal(ctx context.Context) (auth.Principal, error) {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return auth.Principal{}, errors.New("no principal on an authenticated route")
	}
	return p, nil
}
