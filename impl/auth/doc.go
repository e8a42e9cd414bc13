// Package auth resolves a request's bearer API key to the account and key it belongs to. Keys
// are checked offline first (format and checksum), then looked up by hash in the database and
// cached in memory. Revocations and cap changes are pushed by PostgreSQL LISTEN/NOTIFY (through
// impl/changefeed) to every gateway process, which drops its cached copy at once. While the
// notifications are lost (the database is down or out of reach) the process is degraded: a key
// it already knows keeps authenticating, with its account and cap, for at most the feed's
// MaxStale after it was last known current; a key it does not know, or has held too long, gets a
// dependency error (503). Last-use times are written in batches, off the request path, and kept
// for the next batch when a write fails.
//
// A key may carry limits beyond its requests-per-minute cap (Principal.Limits, nil when it has
// none): an expiry (from then on the key is refused with an *ExpiredError, checked against the
// clock on every request, with no database call), a credit cap per period (enforced by
// impl/billing), and a subset of its account's models (Principal.AllowsModel). A disabled key
// is cached as such and refused with ErrDisabled; disabling, enabling and every change of a
// limit are pushed like revocations, so every process applies them within a second.
package auth
