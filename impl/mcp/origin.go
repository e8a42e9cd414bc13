package mcp

import (
	"net/http"
	"net/url"
	"strings"
)

// The MCP transport requires a server to validate Origin, against DNS rebinding (a page of
// another site that reaches the endpoint under a name it controls): 2025-11-25 answers an
// invalid one 403. Command-line and desktop clients (Claude Code, Codex, mcp-remote, the SDKs)
// send no Origin and are served; a browser page is served when it is the gateway's own (its
// origin's host is the request's Host) or its origin is listed in Options.AllowedOrigins.

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
	return strings.EqualFold(u.Host, r.Host)
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
