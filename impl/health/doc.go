// Package health owns the process's readiness: a small set of named conditions that the parts
// of a gateway process set as their situation changes (starting up, shutting down, running
// with a dependency lost), and the handler of the readiness probe that reports them.
//
// A Readiness holds the conditions. A part of the process registers its own condition once,
// with Condition, and sets it with Set whenever its state changes; a condition whose state is
// cheaper to compute on demand registers a function with Check instead, which the probe calls.
// Each condition is in one of three states:
//
//   - OK: nothing to report.
//   - Degraded: the process serves, with weaker guarantees (say, from caches while a database
//     is unreachable). The process stays ready; the probe names the condition.
//   - Down: the process cannot serve (it is starting, or shutting down). The probe answers 503.
//
// The process is ready when no condition is Down. Every change of a condition's state is
// logged once, at info level when it becomes OK and at warning level otherwise. Reasons are
// short fixed phrases ("waiting for the database"), never raw error text: the probe's body
// shows them.
//
// Handler serves the probe (GET /readyz on the metrics listener of tollgate serve): 200 when
// ready, 503 otherwise, with a short JSON body:
//
//	{"status":"not_ready","conditions":{"shutdown":{"state":"down","reason":"shutting down"},"startup":{"state":"ok"}}}
//
// status is "ready", "degraded" (ready, with at least one Degraded condition) or "not_ready".
// Liveness is a separate, trivial probe (GET /healthz): a process that is not ready is still
// alive, and restarting it would not bring a database back.
package health
