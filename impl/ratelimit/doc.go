// Package ratelimit limits requests per key over an exact rolling
// 60-second window.
//
// A request for a key at time t is allowed if and only if fewer than limit
// requests for that key were allowed in the half-open interval (t-60s, t].
// Rejected requests are not counted, so a client that keeps retrying while
// limited does not extend its own penalty. The window is a sliding log of
// allowed request times, not a set of fixed buckets or a token-bucket
// approximation, so the decision and the RetryAfter hint are exact.
//
// Two implementations share the Limiter interface:
//
//   - Local keeps the log in process memory, a ring of at most limit
//     timestamps per key, and is meant for a single gateway process.
//   - Redis keeps the log in a Redis sorted set per key and runs one Lua
//     script per call, so several gateway processes sharing one Redis
//     server share one cap.
//   - Fallback decides through a Redis limiter while Redis answers, and
//     through a Local one, against each key's cap shared out by replica
//     count, while it does not: no request fails or waits because Redis is
//     down. It probes Redis with backoff, returns to it when it is back and
//     writes the requests it allowed meanwhile into it; see Fallback for the
//     bounds this gives across the switches.
//
// A limit of zero or less means unlimited: the request is allowed and
// nothing is recorded.
package ratelimit
