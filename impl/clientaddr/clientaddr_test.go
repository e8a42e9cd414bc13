package clientaddr

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

var trusted = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("fd00::/8")}

// TestResolve: the client is the rightmost X-Forwarded-For entry that is not a trusted proxy,
// and only when the peer is one; what a client writes to the left of it is never believed.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"a peer that is no proxy keeps its address", "198.51.100.9:5000", []string{"203.0.113.1"}, "198.51.100.9:5000"},
		{"no header", "10.0.0.2:5000", nil, "10.0.0.2:5000"},
		{"one balancer", "10.0.0.2:5000", []string{"203.0.113.1"}, "203.0.113.1:0"},
		{"a client's own entry is not believed", "10.0.0.2:5000", []string{"1.2.3.4, 203.0.113.1"}, "203.0.113.1:0"},
		{"two proxies", "10.0.0.2:5000", []string{"203.0.113.1, 10.0.0.7"}, "203.0.113.1:0"},
		{"headers joined", "10.0.0.2:5000", []string{"6.6.6.6", "203.0.113.1", "10.0.0.7"}, "203.0.113.1:0"},
		{"all trusted: the leftmost", "127.0.0.1:5000", []string{"10.0.0.9, 10.0.0.7"}, "10.0.0.9:0"},
		{"an entry with a port", "10.0.0.2:5000", []string{"203.0.113.1:4711"}, "203.0.113.1:0"},
		{"IPv6", "[fd00::1]:5000", []string{"2001:db8::5"}, "[2001:db8::5]:0"},
		{"IPv4-mapped", "[::ffff:10.0.0.2]:5000", []string{"::ffff:203.0.113.1"}, "203.0.113.1:0"},
		{"garbage ends the walk at the last trusted hop", "10.0.0.2:5000", []string{"203.0.113.1, nonsense"}, "10.0.0.2:5000"},
		{"garbage to the left of the client is not read", "10.0.0.2:5000", []string{"nonsense, 203.0.113.1"}, "203.0.113.1:0"},
	} {
		if got := Resolve(c.peer, c.xff, trusted); got != c.want {
			t.Errorf("%s: Resolve(%q, %q) = %q, want %q", c.name, c.peer, c.xff, got, c.want)
		}
	}
}

// TestHandler: the handler sees the client's address in RemoteAddr; the request the server
// holds is not changed.
func TestHandler(t *testing.T) {
	var seen string
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.RemoteAddr }), trusted)
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.2:5000"
	r.Header.Set("X-Forwarded-For", "203.0.113.1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != "203.0.113.1:0" || r.RemoteAddr != "10.0.0.2:5000" {
		t.Errorf("handler saw %q, request holds %q", seen, r.RemoteAddr)
	}
}
