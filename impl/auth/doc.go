// Package auth resolves a request's bearer API key to the account and key it belongs to. Keys
// are checked offline first (format and checksum), then looked up by hash in the database and
// cached in memory. Revocations and cap changes are pushed by PostgreSQL LISTEN/NOTIFY (through
// impl/changefeed) to every gateway process, which drops its cached copy at once; while the
// notifications are not live the cache is bypassed, so a revoked key is never honoured from a stale entry. Last-use
// times are written in batches, off the request path.
package auth
