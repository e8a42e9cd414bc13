package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/mcp"
	"github.com/tollgate/tollgate/impl/mcpauth"
	"github.com/tollgate/tollgate/impl/metrics"
	"github.com/tollgate/tollgate/impl/ratelimit"
	"github.com/tollgate/tollgate/impl/store"
)

// Server implements the generated strict server interface.
type Server struct {
	store    *store.Store
	config   *config.Config
	auth     *auth.Authenticator
	limiter  ratelimit.Limiter
	metrics  *metrics.Metrics
	log      *slog.Logger
	validate *validator
	// sockets bounds what the Responses WebSockets remember (socketmemory.go).
	sockets   *socketMemory
	exchange  *exchange.Engine
	meter     *billing.Meter
	heartbeat time.Duration
	mcp       http.Handler
	oauth     *mcpauth.Server
	agents    *agent.Service
	methods   routeMethods
	// pageNotFound answers a browser's request for a path no route serves (Options.PageNotFound).
	pageNotFound http.Handler
	// streamsEnd ends when EndStreams is called: every stream still in flight then ends (an
	// inference stream with its format's in-band error: exchange.Engine.EndStreams).
	streamsEnd context.Context
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
	// Exchange runs the inference routes' exchanges (routing, admission, upstream attempts,
	// metering); its heartbeat paces every stream of the surface, and its EndStreams ends them.
	Exchange *exchange.Engine
	// Meter answers the credits route.
	Meter *billing.Meter
	// MCP serves /api/mcp behind authentication and the rate limit; nil means an MCP endpoint
	// with no tools.
	MCP http.Handler
	// Agents serves the /v1/agents routes; nil answers them 501.
	Agents *agent.Service
	// OAuth is the MCP endpoint's OAuth authorization server (its metadata, registration and
	// token endpoints, and its access tokens on /api/mcp); nil: API keys only.
	OAuth *mcpauth.Server
	// PageNotFound answers, instead of the JSON 404, a person's browser asking for a path that
	// no route serves (the web console's "not found" page): a GET or HEAD whose Accept names
	// text/html, with no Authorization header, of a path outside /v1/ and /api/ (browserAsks).
	// nil: every unknown path gets the JSON 404.
	PageNotFound http.Handler
}

// New builds the Server. It fails only if Options.Exchange is missing, or the embedded OpenAPI
// document cannot be loaded or its request schemas compiled.
func New(o Options) (*Server, error) {
	if o.Exchange == nil {
		return nil, errors.New("httpapi: Options.Exchange is required")
	}
	doc, err := api.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("load embedded OpenAPI document: %w", err)
	}
	validate, err := newValidator(doc)
	if err != nil {
		return nil, err
	}
	validate.budget = newBodyBudget(o.Config.Server.BodyBudgetBytes())
	if o.Metrics != nil && validate.budget != nil {
		o.Metrics.WatchBodyBudget(validate.budget.stats)
	}
	sockets := newSocketMemory(o.Config.Server.BodyBudgetBytes())
	if o.Metrics != nil && sockets != nil {
		o.Metrics.WatchSocketMemory(sockets.stats)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MCP == nil {
		o.MCP = mcp.NewHandler(mcp.Options{Logger: o.Logger})
	}
	return &Server{
		streamsEnd: o.Exchange.StreamsEnd(),
		store:      o.Store, config: o.Config, auth: o.Auth, limiter: o.Limiter, metrics: o.Metrics,
		log: o.Logger, validate: validate, sockets: sockets, exchange: o.Exchange, meter: o.Meter, heartbeat: o.Exchange.Heartbeat(), mcp: o.MCP,
		agents: o.Agents, methods: newRouteMethods(doc), oauth: o.OAuth, pageNotFound: o.PageNotFound,
	}, nil
}

// EndStreams ends every stream in flight, and any that starts later, with its format's in-band
// error (the gateway is shutting down; retry), billing what each produced. A shutdown calls it
// when its grace period is over.
// The exchange's streams end with it, and so do the surface's own (agent event tails, Responses
// WebSockets), which watch the same signal.
func (s *Server) EndStreams() { s.exchange.EndStreams() }

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
	mux.Handle("/api/mcp", mcp.WithCORS(s.mcp, s.authenticateMCP(s.limitRate(s.budgetMCP(s.mcp)))))
	if s.oauth != nil {
		s.oauth.Routes(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Before the 405: the Responses WebSocket mode (upgrade.go, responsesws.go).
		if s.serveResponsesUpgrade(w, r) {
			return
		}
		// The mux routes the escaped path: one that reaches here with a method its decoded path
		// is served for spells a separator as %2F (/v1%2Fchat/completions), which is no route:
		// a 404, not a 405 naming the request's own method (trial h16 D5).
		if methods := s.methods.allowed(r.URL.Path); len(methods) > 0 && !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, r, &apierror.Error{Kind: apierror.KindMethodNotAllowed,
				Message: fmt.Sprintf("%s is not served on %s; use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))})
			return
		}
		// A person who typed or followed a wrong address gets a page, not JSON; API clients
		// (and every path of the API's trees) keep the envelope.
		if s.pageNotFound != nil && browserAsks(r) {
			s.pageNotFound.ServeHTTP(w, r)
			return
		}
		hint, fam := baseURLHint(r.URL.Path)
		if fam == familyAnthropic {
			w.Header()[canonicalAnthropicRequestID] = w.Header()[canonicalRequestID]
		}
		msg := fmt.Sprintf("Invalid URL (%s %s)%s", r.Method, r.URL.EscapedPath(), hint)
		answerErrorIn(w, r, fam, &apierror.Error{Kind: apierror.KindNotFound, Message: msg}, true)
	})
	return s.edge(mux)
}

// openAIRoutes are the paths an OpenAI SDK adds to its base URL (which ends with /v1).
var openAIRoutes = []string{"/chat/completions", "/responses", "/models"}

// baseURLHint is what the 404 of an unknown path says of the base URL that most likely made
// it, after "Invalid URL (…)", and the envelope the client that made it reads: an Anthropic
// SDK's (which adds /v1/messages to its base URL) when the path ends as the Messages route
// does, else the route family's. A client's base URL with one /v1 too many or too few, or
// with a route in it (the OpenAI route given to an Anthropic SDK), is named; other paths get
// no hint. A path that names MCP elsewhere than the endpoint is told where it is.
func baseURLHint(path string) (string, family) {
	messages := strings.HasSuffix(path, "/messages") || strings.HasSuffix(path, "/messages/count_tokens")
	switch {
	case strings.HasPrefix(path, "/v1/v1/messages"):
		return ": the base URL should not end with /v1 for this client (Anthropic SDKs add /v1 themselves)", familyAnthropic
	case strings.HasPrefix(path, "/v1/v1/"):
		return ": the path has /v1 twice; the base URL of OpenAI SDKs ends with a single /v1", familyOf(path)
	case path == "/messages" || path == "/messages/count_tokens":
		return ": a client that adds /messages to its base URL needs one that ends with /v1 (the Anthropic SDKs and Claude Code add /v1/messages to the gateway's address alone)", familyAnthropic
	case messages && strings.Contains(path, "/v1/messages"):
		return ": the base URL of Anthropic SDKs and Claude Code is the gateway's address alone, without /v1 or a route (they add /v1/messages themselves)", familyAnthropic
	case slices.Contains(openAIRoutes, path):
		return ": the base URL of OpenAI SDKs should end with /v1", familyOpenAI
	case path == "/mcp" || strings.HasSuffix(path, "/mcp") || strings.HasPrefix(path, "/api/mcp/"):
		return ": the MCP endpoint is /api/mcp (streamable HTTP)", familyOf(path)
	}
	for _, route := range openAIRoutes {
		if strings.HasSuffix(path, route) && strings.HasPrefix(path, "/v1/") {
			return ": the base URL of OpenAI SDKs ends with /v1, without a route (they add " + route + " themselves)", familyOpenAI
		}
	}
	return "", familyOf(path)
}

// authenticateMCP authenticates a request of the MCP endpoint: an OAuth access token of
// s.oauth (checked against the database on every request), else an API key exactly as on the
// other routes. With OAuth on, a 401 of a request with no credential names the
// protected-resource metadata in its WWW-Authenticate header (RFC 9728), which is how MCP
// clients find the sign-in; a refused OAuth token gets the same with error="invalid_token"
// (RFC 6750 section 3.1); a refused API key gets the plain challenge it always got.
func (s *Server) authenticateMCP(next http.Handler) http.Handler {
	keys := s.authenticate(next)
	if s.oauth == nil {
		return keys
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := mcpauth.BearerToken(r.Header.Get("Authorization"))
		if len(r.Header["Authorization"]) > 1 {
			keys.ServeHTTP(w, r) // refused: more than one credential
			return
		}
		if !ok {
			if presentsCredential(r) {
				// An API key (well-formed or not) or another credential: refused exactly as
				// before OAuth existed, with the envelope's plain challenge, so that a client
				// with a revoked or mistyped key reports the key rather than starting a
				// browser sign-in.
				keys.ServeHTTP(w, r)
				return
			}
			keys.ServeHTTP(&challengeOn401{ResponseWriter: w, challenge: s.oauth.Challenge("", "")}, r)
			return
		}
		p, _, err := s.oauth.Verify(r.Context(), token)
		if invalid, ok := errors.AsType[*mcpauth.InvalidTokenError](err); ok {
			w = &challengeOn401{ResponseWriter: w, challenge: s.oauth.Challenge("invalid_token", invalid.Reason)}
			writeError(w, r, apierror.Unauthenticated(invalid.Error()))
			return
		}
		if err != nil {
			s.logger(r.Context()).Warn("authenticating an OAuth token: the database is unavailable", "err", err)
			writeError(w, r, err)
			return
		}
		if slot := auth.SlotFrom(r.Context()); slot != nil {
			slot.Set(p)
		} else {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// presentsCredential reports whether the request carries a credential at all: an
// Authorization header with something in it, or an x-api-key header.
func presentsCredential(r *http.Request) bool {
	a := strings.TrimSpace(r.Header.Get("Authorization"))
	if scheme, rest, _ := strings.Cut(a, " "); strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(rest) == "" {
		a = ""
	}
	return a != "" || strings.TrimSpace(r.Header.Get("x-api-key")) != ""
}

// challengeOn401 sets the OAuth challenge as the WWW-Authenticate header of a 401 (replacing
// the envelope's plain one).
type challengeOn401 struct {
	http.ResponseWriter
	challenge string
}

// WriteHeader implements http.ResponseWriter.
func (c *challengeOn401) WriteHeader(status int) {
	if status == http.StatusUnauthorized {
		c.Header().Set("WWW-Authenticate", c.challenge)
	}
	c.ResponseWriter.WriteHeader(status)
}

// Flush implements http.Flusher.
func (c *challengeOn401) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// Unwrap is for http.ResponseController.
func (c *challengeOn401) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// respondError answers an error returned by a handler, logging internal ones.
func (s *Server) respondError(w http.ResponseWriter, r *http.Request, err error) {
	// The time a failed exchange waited for upstreams is theirs, not the gateway's.
	addUpstreamWait(w, exchange.UpstreamWaitOf(err))
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

// browserAsks reports whether r is a browser's navigation to a page rather than an API
// client's call: a GET or HEAD with no Authorization header, whose Accept names text/html (with
// a quality above 0), of a path outside the API's trees /v1/ and /api/.
func browserAsks(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || r.Header.Get("Authorization") != "" {
		return false
	}
	p := r.URL.Path
	for _, tree := range []string{"/v1", "/api"} {
		if p == tree || strings.HasPrefix(p, tree+"/") {
			return false
		}
	}
	for _, accept := range r.Header.Values("Accept") {
		for _, item := range strings.Split(accept, ",") {
			media, params, _ := strings.Cut(item, ";")
			if !strings.EqualFold(strings.TrimSpace(media), "text/html") {
				continue
			}
			refused := false
			for _, param := range strings.Split(params, ";") {
				if k, v, ok := strings.Cut(param, "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && q <= 0 {
						refused = true
					}
				}
			}
			if !refused {
				return true
			}
		}
	}
	return false
}
