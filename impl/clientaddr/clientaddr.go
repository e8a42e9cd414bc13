// Package clientaddr finds the address of the client behind the load balancers and reverse
// proxies in front of the gateway (server.trusted_proxies), so that what is limited per client
// address (sign-ins, OAuth client registrations and token requests) is limited per client and
// not per balancer: behind one, every request's peer is the balancer's address, and all its
// clients shared one bucket.
//
// A proxy appends to X-Forwarded-For the address it received the request from. The client's
// address is therefore the rightmost entry that is not a trusted proxy's: entries to its left
// were written by the client itself, or by proxies the gateway does not know, and are not
// believed. A request whose peer is not a trusted proxy keeps its peer's address, whatever its
// X-Forwarded-For says.
package clientaddr

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Handler serves next with each request's RemoteAddr set to its client's address (Resolve)
// when its peer is a trusted proxy and it carries X-Forwarded-For. A request without the
// header costs a map lookup.
func Handler(next http.Handler, trusted []netip.Prefix) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if xff := r.Header["X-Forwarded-For"]; len(xff) > 0 {
			if addr := Resolve(r.RemoteAddr, xff, trusted); addr != r.RemoteAddr {
				r2 := new(http.Request)
				*r2 = *r
				r2.RemoteAddr = addr
				r = r2
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Resolve returns the address, as "host:port" (port 0 when it came from X-Forwarded-For), of
// the client of a request from peer (a RemoteAddr) with the X-Forwarded-For values xff: peer
// when it is not in trusted or xff holds no address; else the rightmost address of xff that
// is not in trusted, or the leftmost when all are. An entry that is not an address ends the
// walk: the chain to its left cannot be read, and the last trusted hop's view is kept.
func Resolve(peer string, xff []string, trusted []netip.Prefix) string {
	if !isTrusted(hostOf(peer), trusted) {
		return peer
	}
	var entries []string
	for _, v := range xff {
		entries = append(entries, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(entries) - 1; i >= 0; i-- {
		addr, ok := parseEntry(entries[i])
		if !ok {
			return client
		}
		client = net.JoinHostPort(addr.String(), "0")
		if !isTrusted(addr, trusted) {
			return client
		}
	}
	return client
}

// hostOf is the address of a RemoteAddr ("ip:port"), invalid when it has none.
func hostOf(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().WithZone("").Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.WithZone("").Unmap()
}

// parseEntry reads one X-Forwarded-For entry: an address, or an address and port.
func parseEntry(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	return netip.Addr{}, false
}

// isTrusted reports whether a is in one of the trusted prefixes.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
