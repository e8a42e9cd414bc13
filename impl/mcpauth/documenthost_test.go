package mcpauth

import (
	"net/url"
	"testing"
)

// TestDocumentHostIsOneBucketPerAddress: every spelling of one address, and a name with or
// without its trailing dot or default port, is one bucket of the fetch limit (trial h11 D3:
// six spellings of 192.0.43.7 were six fresh bursts).
func TestDocumentHostIsOneBucketPerAddress(t *testing.T) {
	for want, spellings := range map[string][]string{
		"192.0.43.7": {"https://192.0.43.7/x", "https://[::ffff:192.0.43.7]/x", "https://[::ffff:c000:2b07]/x", "https://[0::ffff:c000:2b07]/x",
			"https://[0:0:0::ffff:c000:2b07]/x", "https://[0000::ffff:c000:2b07]:443/x"},
		"2001:db8::1":         {"https://[2001:db8::1]/x", "https://[2001:0db8:0:0::0001]/x", "https://[2001:DB8::1]/x"},
		"client.example":      {"https://client.example/x", "https://CLIENT.example./x", "https://client.example:443/x"},
		"client.example:8443": {"https://client.example:8443/x"},
		"[2001:db8::1]:8443":  {"https://[2001:0db8::1]:8443/x"},
	} {
		for _, s := range spellings {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			if got := documentHost(u); got != want {
				t.Errorf("documentHost(%s) = %q, want %q", s, got, want)
			}
		}
	}
}
