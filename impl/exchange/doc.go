// Package exchange owns the inference exchange: everything between a caller's request and the
// answer it gets, for every caller alike. The HTTP routes and the Responses WebSocket
// (impl/httpapi) hand it the client's request in its wire format, the agents' steps
// (impl/agent) the request in the neutral form (llm.Request), each with the verified caller
// and the request id; nothing here knows of an HTTP server, a request context or a response
// writer.
//
// An Engine is built once per process (impl/gateway) from the configuration, the model-access
// cache's store and change feed, the upstreams, the meter, the router, the metrics and the
// logger. Engine.Start resolves the model (it must exist, be granted to the account and to the
// key, and be served on the request's route family), checks the context window, reserves the
// worst-case cost (impl/billing; 402 when it cannot be covered), orders the experts
// (impl/routing) and calls them (impl/provider: retries before the first byte, failover to the
// next expert) until one answers; everything that can still fail before the answer fails
// there, with the apierror vocabulary, and leaves nothing reserved. Every upstream is sent the
// gateway's end-user identifiers in place of the client's (impl/enduserid: namespaced by the
// account, whose part is made once with its cached model grants), unless its provider is
// configured to take the clients' values as they came. The Exchange it returns
// owns the reservation and the upstream's response:
//
//   - Answer reads a complete answer and puts it in the client's format (the upstream's bytes
//     with the model replaced when the formats agree, else a translation by impl/convert);
//     the caller writes it and calls Settle;
//   - Stream relays a streamed answer event by event to the caller's StreamWriter (impl/sse
//     events, framed by the caller), in the client's format (impl/streamconv), and settles it:
//     what the upstream produced is billed also when the client goes away, nothing when the
//     upstream failed before producing anything; a shutdown's EndStreams ends every stream
//     with its format's in-band error;
//   - SettleUndelivered settles an answer the client never got (nothing billed).
//
// Settlement bills each token kind at the answering expert's price and writes the usage record
// (impl/billing's batching writer). Engine.Call is the in-process form the agents use: a
// neutral request, not streamed, whose output bound is lowered until its worst case fits a
// spend ceiling; every expert is sent an encoding of it (nothing is parsed), and the answer
// comes back decoded (llm.Response, with the gateway's id and model), settled before Call
// returns, its usage record on route "agent" and tagged with the session.
//
// The exchange's spans (admission, one CLIENT span per upstream try, settlement) and the GenAI
// metrics are made here (tracing.go); with tracing off none of it allocates.
package exchange
