// Package auth resolves a request's bearer API key to the account and key it belongs to. Keys
// are checked offline first (format and checksum), then looked up by hash in the database and
// cached in memory. Revocations and cap changes are pushed by PostgreSQL LISTEN/NOTIFY (through
// impl/changefeed) to every gateway process, which drops its cached copy at once. While the
// notifications are lost (the database is down or out of reach) the process is degraded: a key
// it already knows keeps authenticating, with its account and cap, for at most the feed's
// MaxStale after it was last known current; a key it does not know, or has held too long, gets a
// dependency error (503). Last-use times are written in batches, off the request path, and kept
// for the next batch when a write fails.
package auth
