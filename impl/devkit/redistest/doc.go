// Package redistest gives tests a Redis server to talk to.
//
// It is a test-only helper: import it only from tests and from other
// test helper packages. A test package that uses it calls Main from its
// TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// A TestMain that also needs other helpers' cleanup calls Begin before
// m.Run and Shutdown after it instead.
//
// URL then returns the server's address. If the REDIS_URL environment
// variable is set, that server is used and never flushed, so tests must keep
// their keys apart with Prefix. Otherwise the first call to URL starts one
// redis-server for the whole test process on a free loopback port, without
// persistence, and Main (or Shutdown) stops it when the tests are done. On
// Linux the server is also killed if the test process dies first. Where
// redis-server is not installed, tests that need it are skipped, or fail
// when the CI environment variable is "true".
//
// A test that plays a Redis outage starts a server of its own with
// NewServer, which it can stop and start again on the same port (Stop,
// Start) or freeze (Freeze, Thaw); that server never comes from REDIS_URL.
package redistest
