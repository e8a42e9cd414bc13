package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/impl/store"
)

// Client ID metadata documents (the registration the MCP authorization specification
// prefers): a client whose client_id is an https URL publishes its metadata, redirect URIs
// included, at that URL, and registers nowhere. The consent page fetches the document on each
// authorization request (it is the only place that does: the token endpoint finds the client
// by the code it issued) and keeps what it read in oauth_clients, under the URL.

// unfetchableDocument is the one refusal of a client ID metadata document that could not be
// fetched, whatever the cause.
const unfetchableDocument = "it could not be fetched (it must be served with status 200 from a public https address, at most 5 KiB of JSON)"

// maxClientDocument bounds a client ID metadata document (the draft suggests 5 KB).
const maxClientDocument = 5 << 10

// isDocumentClientID reports whether clientID names a client ID metadata document: an https
// URL with a path, no fragment, no user information and no dot segments.
func isDocumentClientID(clientID string) bool {
	u, err := url.Parse(clientID)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == "" &&
		!strings.Contains(clientID, "#") && u.User == nil && !strings.Contains("/"+u.Path+"/", "/./") && !strings.Contains("/"+u.Path+"/", "/../")
}

// clientDocument is the part of a client ID metadata document this server reads.
type clientDocument struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// documentClient fetches the client ID metadata document at clientID, checks it and stores the
// client. Its refusals are *AuthorizeError without a redirect (the client is not verified).
func (s *Server) documentClient(ctx context.Context, clientID string) (store.OAuthClient, error) {
	refuse := func(why string) error {
		return &AuthorizeError{Code: "invalid_client", Message: "The client's metadata document at " + clientID + " cannot be used: " + why + "."}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return store.OAuthClient{}, refuse("it is not a URL")
	}
	if ok, wait := s.documentHosts.Take(documentHost(req.URL)); !ok {
		s.log.Warn("mcpauth: client ID metadata documents fetched too often from one host; not fetched", "client_id", clientID)
		return store.OAuthClient{}, refuse(fmt.Sprintf("documents from %s were fetched too often; try again in %d seconds", req.URL.Hostname(), max(1, int(math.Ceil(wait.Seconds())))))
	}
	req.Header.Set("Accept", "application/json")
	// Every failure to fetch the document (refused address, unreachable, timeout, a status
	// other than 200, an unreadable or oversized body) is the same refusal, so that a client
	// ID cannot be used to learn what the gateway's network reaches or answers; the log has
	// the cause.
	unfetchable := func(cause any) error {
		s.log.Info("mcpauth: fetching a client ID metadata document failed", "client_id", clientID, "cause", cause)
		return refuse(unfetchableDocument)
	}
	resp, err := s.fetch.Do(req)
	if err != nil {
		return store.OAuthClient{}, unfetchable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.OAuthClient{}, unfetchable(fmt.Sprintf("status %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxClientDocument+1))
	if err != nil || len(body) > maxClientDocument {
		return store.OAuthClient{}, unfetchable(fmt.Sprintf("read %d bytes, error %v", len(body), err))
	}
	var doc clientDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return store.OAuthClient{}, refuse("it is not a JSON object")
	}
	switch {
	case doc.ClientID != clientID:
		return store.OAuthClient{}, refuse("its client_id is not its own URL")
	case len(doc.RedirectURIs) == 0 || len(doc.RedirectURIs) > maxRedirectURIs:
		return store.OAuthClient{}, refuse("it must list 1 to 10 redirect_uris")
	case doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none":
		return store.OAuthClient{}, refuse("token_endpoint_auth_method must be none")
	}
	for _, u := range doc.RedirectURIs {
		if why := redirectProblem(u); why != "" {
			return store.OAuthClient{}, refuse("redirect URI " + u + ": " + why)
		}
	}
	name := strings.TrimSpace(doc.ClientName)
	if clientNameProblem(name) != "" {
		name = ""
	}
	clientURI := ""
	if u, err := url.Parse(doc.ClientURI); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && len(doc.ClientURI) <= 500 {
		clientURI = doc.ClientURI
	}
	return s.store.SaveOAuthClient(ctx, store.OAuthClient{ID: clientID, Name: name, RedirectURIs: doc.RedirectURIs, ClientURI: clientURI})
}

// documentHost is the bucket of a document's URL in documentHostLimit: its host and port,
// lower-case, without a trailing dot or the default port 443, and an address as its one
// canonical form (so that one host is one bucket however written). Names that resolve to one
// address are still buckets of their own.
func documentHost(u *url.URL) string {
	host, port := strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), u.Port()
	if ip, err := netip.ParseAddr(host); err == nil {
		// One address has many spellings (an IPv4-mapped IPv6 form, leading zeros, where
		// the :: goes): the bucket is the address's (trial h11 D3).
		host = ip.WithZone("").Unmap().String()
	}
	if port == "" || port == "443" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// documentFetcher is the HTTP client that fetches client ID metadata documents: 5 seconds,
// no redirects, and (unless allowPrivate, for tests) only public addresses, so that a client
// ID cannot make the gateway reach into its own network.
func documentFetcher(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if !allowPrivate {
		dialer.Control = func(network, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil || !publicAddress(ip) {
				return errors.New("mcpauth: client ID metadata documents are fetched from public addresses only")
			}
			return nil
		}
	}
	return &http.Client{
		Timeout:       5 * time.Second,
		Transport:     &http.Transport{Proxy: nil, DialContext: dialer.DialContext, TLSHandshakeTimeout: 5 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refusedPrefixes are the address blocks of the IANA special-purpose address registries (IPv4
// and IPv6) and the other non-public blocks a client ID metadata document is never fetched
// from: "this network", private, shared (carrier-grade NAT), loopback, link-local, IETF
// protocol assignments, documentation, benchmarking, 6to4 relays, multicast and reserved; for
// IPv6 also NAT64 (which reaches IPv4 behind it), Teredo and the other IETF protocol
// assignments, 6to4 (which embeds an IPv4 address), documentation, SRv6, site-local,
// unique-local and link-local. IPv6 outside 2000::/3 is refused as well (publicAddress).
var refusedPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
		"192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001::/32",
		"2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16", "fec0::/10", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// globalIPv6 is the IPv6 global unicast space: the only IPv6 addresses IANA allocates for
// public use.
var globalIPv6 = netip.MustParsePrefix("2000::/3")

// publicAddress reports whether ip may be reached to fetch a client ID metadata document: a
// global unicast address outside every special-purpose block (refusedPrefixes). An
// IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
func publicAddress(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
		return false
	}
	if ip.Is6() && !globalIPv6.Contains(ip) {
		return false
	}
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
