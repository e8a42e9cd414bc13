// Package session owns the web application's server-side sessions: an alexedwards/scs store in
// PostgreSQL (table web_sessions, migration 0008) that keeps only the SHA-256 of each session
// token, and the per-user listing the Sessions page shows (created, last seen, user agent).
//
// The store copies the signed-in user's id and the browser's user agent out of the session's
// data at every commit (the keys UserIDKey and UserAgentKey), so that a user's sessions can be
// listed and ended without decoding every session.
package session
