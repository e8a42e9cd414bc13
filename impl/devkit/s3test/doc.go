// Package s3test gives tests a real S3-compatible object store: SeaweedFS's weed (weed mini:
// master, volume server, filer and S3 gateway in one process), built from the version pinned
// in tools/weed/go.mod, which keeps its dependency tree out of the service's go.mod.
//
// It is a test-only helper: import it only from tests and from other test helpers. Start
// starts a server for one test on free ports in a directory of the test's, with one identity
// (AccessKeyID, SecretAccessKey) and a bucket, and stops it when the test ends. Endpoint, Bucket, Region, AccessKeyID and
// SecretAccessKey configure a client (it is path-style), and Env gives the environment of a tollgate process that should use
// it. Outage tests Stop the server (SIGKILL, as a crash), Restart it on the same ports with
// the same data, or Freeze and Thaw it (SIGSTOP, SIGCONT: a store that accepts connections and
// never answers).
//
// The weed binary is built on first use (go build in tools/weed; a few minutes from a cold
// build cache) into the Go build cache's directory, tollgate-weed/<hash of tools/weed/go.mod
// and go.sum>/weed, and reused by every later test process and run; concurrent test processes
// build it once. TOLLGATE_WEED names a prebuilt binary instead. The tests never skip for want
// of it: a failed build fails them.
package s3test
