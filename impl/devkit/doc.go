// Package devkit is the development and test kit, kept apart so that the packages beside it
// read as the product: throwaway PostgreSQL clusters and Redis servers for tests (pgtest,
// redistest; PgBouncer in front of a test's database, pgbouncertest; a migrated store on a
// fresh database, storetest), a whole gateway in a test (apitest), Chromium through chromedp (browsertest), a
// pinned S3-compatible server (s3test, SeaweedFS) and trace backend (jaegertest, Jaeger), both
// built once per version from tools/ (toolbuild), a wait past 00:00 UTC for tests whose
// assertions hold within one UTC day (clocktest), hosts
// in network namespaces (netns), the output of the child processes they start read while it is
// written (syncbuf), PDFs of many pages in few bytes (pdftest), the development OpenID provider of `tollgate dev` (devoidc),
// and the measuring and fault-injection runs (bench, chaos, hostile). Nothing here is linked into the production binary
// (impl/archtest checks it); the package itself has no code.
package devkit
