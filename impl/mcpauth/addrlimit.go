package mcpauth

import (
	"math"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/impl/addrlimit"
)

// The registration, token and revocation endpoints take no credential worth the name (public
// clients), so each keeps a token bucket per client address (impl/addrlimit): enough to stop
// one address from filling oauth_clients or hammering the database, not a global quota.
var (
	registerLimit = addrlimit.Rate{Burst: 20, PerMinute: 10}
	tokenLimit    = addrlimit.Rate{Burst: 60, PerMinute: 60}
	revokeLimit   = addrlimit.Rate{Burst: 30, PerMinute: 30}
)

// documentHostLimit bounds the fetches of client ID metadata documents per host the URLs
// name, in each gateway process: any signed-in member can make the consent page fetch any
// public https URL, and without a bound a loop of them would make the gateway a relay of GETs
// at one third party. A real client's document is fetched once per authorization.
var documentHostLimit = addrlimit.Rate{Burst: 10, PerMinute: 10}

// limited wraps an endpoint's handler with the limiter: a request over its address's rate is
// answered 429 with Retry-After, in the OAuth error shape.
func limited(l *addrlimit.ByAddress, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, wait := l.Take(addrlimit.Key(r.RemoteAddr))
		if !ok {
			seconds := max(1, int(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(seconds))
			writeError(w, http.StatusTooManyRequests, "temporarily_unavailable",
				"too many requests from this address; retry in "+strconv.Itoa(seconds)+" seconds")
			return
		}
		next(w, r)
	}
}
