// Package netns gives tests hosts of their own on one machine: a private network made of a
// bridge in the test's network namespace and, per host, a Linux network namespace joined to the
// bridge by a veth pair, with its own address on a private /24 (10.231.x.0/24, x chosen at
// random among the free ones), its loopback up and a default route through the bridge. A
// command run on a host (Host.Command) sees only that host's network: its own address and
// loopback, and the test's namespace through the bridge address (Network.Gateway), where the
// test's shared services (PostgreSQL, Redis, an object store) listen for every host.
//
// It needs root and iproute2's ip. Where namespaces cannot be made, New skips the test with the
// reason, or fails it when the CI environment variable is "true". Everything it makes is named
// after the test process's id and removed when the test ends (t.Cleanup); what a killed test
// run left behind (its process gone) is removed by the next New. It is a test-only helper:
// nothing in the production binary imports it (impl/archtest).
package netns
