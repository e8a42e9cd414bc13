// Package agent owns tollgate's hosted agents (issue 13): slots assigned to accounts, sessions
// that really run in them, their event logs, queued messages, commands with their
// Idempotency-Keys, tickets and approval-gated actions, all in PostgreSQL; and the runner that
// drives sessions as River jobs (github.com/riverqueue/river), so that any process can continue
// any session.
//
// # Accounts
//
// Every method that takes a principal or an account refuses a zero account id as ErrNotFound
// (a caller that forgot to set the account reaches nothing). The operator's listings and
// resolutions (ListSlots, ListTickets, ListApprovals, CloseTicket, Resolve) take the account as
// a pointer: nil, and only nil, means every account.
//
// # States
//
// A session moves through provisioning → ready ⇄ busy → stopping → stopped | failed (see
// SessionTransitions for the exact set; nothing else is allowed). It ends with a reason:
// user_stop, max_turns, max_spend, max_duration, error, environment_ended, slot_unassigned,
// key_limit, key_revoked, key_disabled, key_expired, access_revoked or member_removed.
// A command (spawn, stop) moves accepted → running → done | failed; a message queued → taken.
// An approval moves pending → approved | denied | expired | cancelled, and an approved one's
// action queued → running → done | failed.
//
// # Steps
//
// A step is one River job, unique per (session, step number). It takes the session's queued
// messages, checks the stop request and the bounds, makes one model call (a turn) by calling
// the gateway's one exchange directly with the neutral request (exchange.Engine.Call with an
// llm.Request; the answer comes back as an llm.Response: the same routing, reservation,
// upstream attempts and metering as every HTTP request, with no HTTP request around it and no
// JSON in between; this package does not import impl/httpapi), with the environment's
// tools offered as functions, runs the tool calls the model answered,
// and then, in ONE transaction, appends the step's events, updates the session row, inserts
// the next job (another step after tool calls; none after a text answer, when the session goes
// back to ready) and completes the current job. The model sees the conversation rebuilt from
// the session's events (tool results as recorded: at most 4 KiB each).
//
// Bounds: max_turns bounds the model calls; max_spend the session's spend: each call's worst
// case must fit in what is left (its output bound is lowered to fit; when not even a minimal
// call fits, the session stops with max_spend), so the spend never exceeds it. max_duration is
// wall-clock time from ready: a job scheduled at the deadline stops a ready session, and every
// step checks it.
//
// # Keys
//
// A session acts for the API key that started it (its spawn's, or the key that requested the
// approved agent_spawn; agent_sessions.key_id), and keeps to that key's limits as its HTTP
// requests do. Every step reads the key again through the gateway's own lookup
// (Options.KeyPrincipal, auth.Authenticator.KeyPrincipal): a key revoked, disabled or expired
// since the last step ends the session (key_revoked, key_disabled, key_expired) before any
// further model call, and a revocation or a disabling itself ends the key's live sessions in
// its transaction (EndKeySessions, EndDisabledKeySessions, which accounts.Service passes to
// the store), so a session waiting for a message does not keep its slot; an expiry, which
// nobody acts on, is found by a sweep every config agents.session_sweep (endLapsed), which
// also ends the sessions of a grant past its lifetime and of keys or grants revoked by a
// process without the agents; a model
// taken out of the key's model subset ends it with key_limit. A key's credit cap is reserved
// against as on the HTTP routes (billing.Meter.ReserveForKey): the call's output bound is
// lowered to fit what is left of the cap in the period as well as of max_spend, and when not
// even a minimal call fits, or the reservation is refused (the 402 of an HTTP request), the
// session stops with key_limit; so the key's spend never passes its cap. The key's RPM cap
// counts HTTP requests only: a session's model calls are not requests and do not count.
//
// A session without a key (one started by the approved agent_spawn of a connected app, an MCP
// client signed in with OAuth) acts for its account alone, for as long as the app's OAuth grant
// works (agent_sessions.oauth_grant_id): every step reads the grant again, and a grant revoked,
// past its absolute lifetime, or whose member left the account or lost the role they allowed
// the app with, ends the session
// (access_revoked) before any further model call. An approval records the grant it was asked
// through too (agent_approvals.oauth_grant_id), and such an approval cannot be approved, nor
// its action run, once the grant stopped working (requesterGone), as for a revoked key. The
// grant's revocation (mcpauth.Server with Options.Agents) ends the app's live sessions in its
// transaction (EndGrantSessions).
//
// Every ending for a cause (a key, a member, a grant) is one entry of the account's audit log,
// agent.sessions_ended, naming the cause and the sessions ended (endEach), committed with them.
//
// A session a member started on the console (SpawnForMember) acts for its account and records
// the member (agent_sessions.started_by_user): every step checks that they are still in the
// account, and a removed member's session ends (member_removed) before any further model call
// (starterGone). The removal itself ends the member's live sessions in its transaction
// (EndMemberSessions, which members.Service.Remove passes to the store's DeleteMembership): a
// session waiting for a message takes no step, and would otherwise keep its slot. Starting needs only a membership, so a lowered role keeps the session; the
// console's sessions started before the member was recorded run as before, within their bounds.
//
// # Crashes
//
// A step's model call carries the request id agt_<session>_<turn>, and the ledger bills a
// request id once: a step retried after its process died (River's rescuer, after
// config agents.rescue_after, runs it on another process) makes the call again and is billed
// once. A step's effects (events, the session row, the ticket an open_ticket call opens and its
// audit log entry, the next job) commit together with the job's completion, or not at all.
//
// A step job has config agents.step_attempts attempts (River's MaxAttempts; the other jobs
// 25): whatever makes a step fail — an upstream outage, the database, a fault of ours, a
// crash — its last failed attempt fails the session (error) with an error event, in one
// transaction with the job's completion (a stop of the process is not a failure: River gives
// the attempt back). A job River discards all the same (its process died on the last attempt,
// the job timeout cut it, or failing the session could not be written) is found by a sweep of
// River's discarded start, step and stop jobs (every config agents.approval_sweep), which
// deletes the job and ends the session it held, so that no session stays busy for ever. A
// step given up after its model call was billed keeps the charge in the usage records (and
// the ledger); the session's spent counts only the steps that committed.
//
// # Fan-out
//
// Every event insert notifies tollgate_agent_events ('<session>:<seq>') at commit; Run holds
// one LISTEN connection per process and wakes the Wait channels of that session.
package agent
