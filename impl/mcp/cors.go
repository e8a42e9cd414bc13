package mcp

import "net/http"

// CORS headers for browser clients of the endpoint (the MCP Inspector in direct mode, a web
// app of a listed origin), as the Streamable HTTP transport needs them: the preflight answered,
// and the session id and the authentication challenge readable on the actual responses.
const (
	corsAllowMethods  = "POST, GET, DELETE, OPTIONS"
	corsAllowHeaders  = "Content-Type, Accept, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
	corsExposeHeaders = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
)

// WithCORS returns next (the endpoint behind its authentication) with CORS for the browser
// origins the MCP handler mcp serves (its Origin check: the gateway's own, or one listed). A
// preflight (OPTIONS with Access-Control-Request-Method) is answered here, before
// authentication, which a preflight never carries: 204 for an allowed origin, 403 for another.
// Every other request of an allowed origin gets Access-Control-Allow-Origin and the exposed
// headers, whatever its answer (a 401's challenge included). Trial h9 D11: a preflight was
// answered 401 with no CORS header, so that no browser client could call the endpoint.
func WithCORS(mcp, next http.Handler) http.Handler {
	h, ok := mcp.(*handler)
	if !ok {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := h.originAllowed(r)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		if preflight {
			if !allowed {
				w.WriteHeader(http.StatusForbidden)
				return
			}
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Allow-Methods", corsAllowMethods)
			hdr.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			hdr.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}
