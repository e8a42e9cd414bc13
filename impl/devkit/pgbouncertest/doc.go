// Package pgbouncertest puts a real PgBouncer in front of a test's PostgreSQL database, so that
// a test can open the store through a connection pooler as an operator's deployment does.
//
// Start starts one pgbouncer process of the test's own, in the pool mode the test asks for
// (session or transaction pooling), listening on a free loopback port, with the database of a
// connection string from pgtest behind it, and stops it when the test ends. On Linux it is also
// killed if the test process dies first. It needs the pgbouncer binary (Debian's package
// pgbouncer; .ci/run installs it): where it is not installed, the test is skipped, or fails
// when the CI environment variable is "true", as with redistest. PgBouncer refuses to run as
// root: a test that runs as root starts it as the "postgres" OS user, which the PostgreSQL
// server itself runs as then (package pgcluster).
//
// The package's own tests: TestGatewayBehindPgBouncer runs two real gateways (apitest) through
// it in session pooling, TestRevocationBehindTransactionPooling the change feed and key cache
// in transaction pooling; impl/store's tests open the store through it in both pool modes.
package pgbouncertest
