// Package client is the hand-written consumer package around the generated
// tollgate client in gen/api.
//
// The package owns the client-side rules of the service specification that a
// generated client cannot express on its own:
//
//   - Retries. Every request made through a [Client], including every generated
//     operation reached through [Client.API], goes through a [RetryTransport]:
//     bounded exponential backoff with jitter on HTTP 429, 502 and 529 and on
//     connection errors, honouring retry-after-ms and Retry-After, never retrying
//     when the gateway answers x-should-retry: false, and only replaying
//     requests whose body can be replayed.
//   - Authentication. Every request carries Authorization: Bearer <key>.
//   - The model list. [Client.Models] caches the account's model list briefly
//     and coalesces concurrent refreshes; [Client.Model] answers from that
//     cached list rather than polling the gateway per id.
//   - Errors. Non-2xx answers become a typed [*APIError] parsed from either of
//     the gateway's error envelopes, carrying the x-request-id of the answer.
//
// Operations without a convenience method here are called on [Client.API], the
// generated *api.ClientWithResponses; [ErrorFromResponse] turns their non-2xx
// answers into the same [*APIError].
package client
