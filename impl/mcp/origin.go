package mcp

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The MCP transport requires a server to validate Origin, against DNS rebinding (a page of
// another site that reaches the endpoint under a name it controls): 2025-11-25 answers an
// invalid one 403. Command-line and desktop clients (Claude Code, Codex, mcp-remote, the SDKs)
// send no Origin and are served; a browser page is served when its origin is listed in
// Options.AllowedOrigins (the gateway passes web.public_url's origin there too), or when it is
// the gateway's own on a loopback address (its origin's host is the request's Host, and that
// is localhost, 127.0.0.0/8 or [::1]: a development gateway). An origin whose host merely equals
// the Host header is not enough: in a DNS rebinding attack the browser sends both, equal, for
// the attacker's name (trial h9 D8).

// originAllowed reports whether r may be served for its Origin header.
func (h *handler) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if _, ok := h.origins[strings.ToLower(origin)]; ok {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // "null" (a sandboxed page, a file) among them
	}
	return strings.EqualFold(u.Host, r.Host) && loopbackName(u.Hostname())
}

// loopbackName reports whether a host name is the loopback's: localhost (or a name under it,
// which browsers resolve to the loopback themselves), an IPv4 address in 127.0.0.0/8, or ::1.
func loopbackName(host string) bool {
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// originSet is the allowed origins, as browsers write them (lower case, no trailing slash).
func originSet(origins []string) map[string]struct{} {
	set := make(map[string]struct{}, len(origins))
	for _, o := range origins {
		if o = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/")); o != "" {
			set[o] = struct{}{}
		}
	}
	return set
}
