package mcpauth

import (
	"net/netip"
	"testing"
)

// TestPublicAddress: client ID metadata documents are fetched only from global unicast
// addresses outside the IANA special-purpose blocks; IPv4-mapped addresses are judged as the
// IPv4 address they carry.
func TestPublicAddress(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1", "169.254.169.254", "172.16.0.1",
		"192.0.0.8", "192.0.2.1", "192.88.99.1", "192.168.1.1", "198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9",
		"224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b::808:808", "64:ff9b:1::1", "100::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
		"2001:db8::1", "2002:7f00:1::1", "2002:0808:0808::1", "3fff::1", "5f00::1", "fec0::1", "fc00::1", "fd12:3456::1",
		"fe80::1", "fe80::1%eth0", "ff02::1", "ff0e::1",
	}
	for _, a := range refused {
		if publicAddress(netip.MustParseAddr(a)) {
			t.Errorf("%s is allowed, want it refused", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "::ffff:8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"} {
		if !publicAddress(netip.MustParseAddr(a)) {
			t.Errorf("%s is refused, want it allowed", a)
		}
	}
}
