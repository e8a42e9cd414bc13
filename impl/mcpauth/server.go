package mcpauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/addrlimit"
	"github.com/tollgate/tollgate/impl/store"
)

// ResourcePath is the path of the protected resource: the MCP endpoint.
const ResourcePath = "/api/mcp"

// Scope is the one scope this server grants: calling the MCP endpoint's tools as the member.
const Scope = "mcp"

// Prefixes of what the server hands out. The prefixes tell an access token from an API key
// (tgk_) at a glance, in a log or a leaked configuration file.
const (
	AccessTokenPrefix  = "tgoa_"
	refreshTokenPrefix = "tgor_"
	codePrefix         = "tgoc_"
	clientIDPrefix     = "tgc_"
)

// Lifetimes of what the server hands out (the defaults of Options).
const (
	DefaultAccessTTL  = 10 * time.Minute
	DefaultRefreshTTL = 30 * 24 * time.Hour
	DefaultCodeTTL    = 60 * time.Second
)

// DefaultGrantRPM is the requests-per-minute limit of each OAuth grant on the MCP endpoint
// (the default of Options.GrantRPM): a signed-in client has no API key whose cap would apply,
// so each grant gets this one, kept by the gateway's rate limiter like a key's.
const DefaultGrantRPM = 120

// DefaultGrantLifetime is a grant's absolute lifetime from the member's approval (the default
// of Options.GrantLifetime): no token of the grant expires after it, and after it the member
// must allow the client again.
const DefaultGrantLifetime = 90 * 24 * time.Hour

// Options configure a Server.
type Options struct {
	Store *store.Store
	// PublicURL is the gateway's address as clients and browsers see it (the web console's
	// web.public_url): the issuer, the endpoints and the resource are named from it.
	PublicURL string
	Logger    *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DocumentClient fetches client ID metadata documents (nil: a client that reaches public
	// addresses only, directly, with no redirects and a 5-second timeout).
	DocumentClient *http.Client
	// AccessTTL, RefreshTTL and CodeTTL are the lifetimes of access tokens, refresh tokens and
	// authorization codes (defaults DefaultAccessTTL, DefaultRefreshTTL, DefaultCodeTTL).
	AccessTTL, RefreshTTL, CodeTTL time.Duration
	// GrantRPM is each grant's requests-per-minute limit on the MCP endpoint (default
	// DefaultGrantRPM).
	GrantRPM int
	// GrantLifetime is a grant's absolute lifetime from its approval (default
	// DefaultGrantLifetime).
	GrantLifetime time.Duration
	// Agents, when set, ends the live agent sessions a grant's app started when the grant is
	// revoked, on the console or by its client, in the revocation's transaction (an
	// *agent.Service). Without it they end at their next step, or when the agents' sweep finds
	// the grant revoked.
	Agents GrantSessions
}

// GrantSessions ends, in tx, the live agent sessions of the account that the connected app
// with the grant started (agent.Service.EndGrantSessions). It is an interface so that this
// package does not import the agents.
type GrantSessions interface {
	EndGrantSessions(ctx context.Context, tx *store.AgentTx, accountID, grant uuid.UUID) error
}

// Server is the authorization server of the MCP endpoint. Create it with New.
type Server struct {
	store  *store.Store
	base   string // the public URL without a trailing slash, e.g. "https://tollgate.example.com"
	log    *slog.Logger
	now    func() time.Time
	access time.Duration
	fresh  time.Duration // refresh tokens' lifetime
	code   time.Duration
	fetch  *http.Client // fetches client ID metadata documents
	// documentHosts bounds those fetches per host (documentHostLimit).
	documentHosts *addrlimit.Limiter[string]
	// grantRPM is each grant's requests-per-minute limit on the MCP endpoint.
	grantRPM int
	// lifetime is a grant's absolute lifetime from its approval.
	lifetime time.Duration
	// agents ends the agent sessions of a revoked grant (Options.Agents; nil: none).
	agents GrantSessions
	// registerLimit, tokenLimit and revokeLimit limit the endpoints per client address.
	registerLimit, tokenLimit, revokeLimit *addrlimit.ByAddress
	// cleanupMu guards cleanedAt, when unused registered clients were last deleted.
	cleanupMu sync.Mutex
	cleanedAt time.Time
}

// New returns a Server for the gateway at o.PublicURL.
func New(o Options) (*Server, error) {
	u, err := url.Parse(o.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("mcpauth: the public URL %q is not an http(s) URL", o.PublicURL)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AccessTTL <= 0 {
		o.AccessTTL = DefaultAccessTTL
	}
	if o.RefreshTTL <= 0 {
		o.RefreshTTL = DefaultRefreshTTL
	}
	if o.CodeTTL <= 0 {
		o.CodeTTL = DefaultCodeTTL
	}
	if o.GrantLifetime <= 0 {
		o.GrantLifetime = DefaultGrantLifetime
	}
	if o.GrantRPM <= 0 {
		o.GrantRPM = DefaultGrantRPM
	}
	if o.DocumentClient == nil {
		o.DocumentClient = documentFetcher(false)
	}
	base := u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")
	return &Server{store: o.Store, base: base, log: o.Logger, now: o.Now, access: o.AccessTTL, fresh: o.RefreshTTL, code: o.CodeTTL,
		fetch: o.DocumentClient, grantRPM: o.GrantRPM, lifetime: o.GrantLifetime, agents: o.Agents, registerLimit: addrlimit.New[netip.Prefix](registerLimit, o.Now),
		tokenLimit: addrlimit.New[netip.Prefix](tokenLimit, o.Now), revokeLimit: addrlimit.New[netip.Prefix](revokeLimit, o.Now),
		documentHosts: addrlimit.New[string](documentHostLimit, o.Now)}, nil
}

// Issuer is the authorization server's issuer identifier (the gateway's public URL).
func (s *Server) Issuer() string { return s.base }

// Resource is the canonical URI of the protected resource, the MCP endpoint: the only value of
// the resource parameter (RFC 8707) this server accepts, and every token's audience.
func (s *Server) Resource() string { return s.base + ResourcePath }

// ResourceMetadataURL is the address of the MCP endpoint's protected-resource metadata
// (RFC 9728), which a 401 on /api/mcp names in its WWW-Authenticate header.
func (s *Server) ResourceMetadataURL() string {
	return s.base + "/.well-known/oauth-protected-resource" + ResourcePath
}

// Challenge is the WWW-Authenticate value of a 401 on /api/mcp; errCode is an RFC 6750 error
// ("invalid_token") or empty when the request carried no credential.
func (s *Server) Challenge(errCode, description string) string {
	v := `Bearer resource_metadata="` + s.ResourceMetadataURL() + `", scope="` + Scope + `"`
	if errCode != "" {
		v += `, error="` + errCode + `"`
		if description != "" {
			v += `, error_description="` + strings.ReplaceAll(description, `"`, `'`) + `"`
		}
	}
	return v
}

// secret returns prefix and 32 random bytes, base64url without padding, and its SHA-256.
func secret(prefix string) (string, []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	v := prefix + base64.RawURLEncoding.EncodeToString(b)
	return v, hash(v)
}

// hash is the stored form of a code or token.
func hash(v string) []byte {
	h := sha256.Sum256([]byte(v))
	return h[:]
}

// newTokens makes an access token and a refresh token, and what the store keeps of them.
func (s *Server) newTokens() (access, refresh string, st store.OAuthTokens) {
	now := s.now()
	access, ah := secret(AccessTokenPrefix)
	refresh, rh := secret(refreshTokenPrefix)
	return access, refresh, store.OAuthTokens{AccessHash: ah, AccessExpires: now.Add(s.access), RefreshHash: rh, RefreshExpires: now.Add(s.fresh),
		GrantLifetime: s.lifetime}
}

// roleRank orders the membership roles (owner above admin above member); an unknown role is
// the lowest.
func roleRank(role string) int {
	switch role {
	case "owner":
		return 3
	case "admin":
		return 2
	case "member":
		return 1
	}
	return 0
}

// roleLowered reports whether the member's role now is below the one they had when they
// approved the grant: the grant then no longer works (the member allows the client again,
// within their new role).
func roleLowered(granted, now string) bool { return roleRank(now) < roleRank(granted) }
