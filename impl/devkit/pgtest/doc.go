// Package pgtest gives each test its own fresh, empty PostgreSQL database.
//
// ConnString creates a database with a unique name for the calling test and
// drops it (DROP DATABASE ... WITH (FORCE)) when the test ends; Pool does the
// same and returns a pgxpool.Pool on it.
//
// The databases live on the server named by the TEST_DATABASE_URL
// environment variable when it is set (a URL or key/value connection string
// whose role may create databases). Otherwise the package starts one
// throwaway cluster per test binary from the installed PostgreSQL binaries
// (see package pgcluster), in a fresh temporary directory with its own socket
// directory, so test binaries running in parallel under "go test ./..." never
// share paths. When the binaries are missing, tests are skipped, or fail when
// the CI environment variable is "true".
//
// A package whose tests use pgtest should run them through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Main stops the throwaway cluster and deletes its directory once the tests
// have run; a TestMain that needs to do more calls Shutdown after m.Run
// instead. Without either the cluster still goes away, a moment after the test
// binary exits, through pgcluster's Ephemeral watchdog process; the same
// watchdog cleans up when a test binary panics or is killed.
package pgtest
