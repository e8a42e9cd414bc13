// Package agent owns tollgate's hosted agents (issue 13): slots assigned to accounts, sessions
// that really run in them, their event logs, queued messages, commands with their
// Idempotency-Keys, tickets and approval-gated actions, all in PostgreSQL; and the runner that
// drives sessions as River jobs (github.com/riverqueue/river), so that any process can continue
// any session.
//
// # States
//
// A session moves through provisioning → ready ⇄ busy → stopping → stopped | failed (see
// SessionTransitions for the exact set; nothing else is allowed). It ends with a reason:
// user_stop, max_turns, max_spend, max_duration, error, environment_ended or slot_unassigned.
// A command (spawn, stop) moves accepted → running → done | failed; a message queued → taken.
// An approval moves pending → approved | denied | expired | cancelled, and an approved one's
// action queued → running → done | failed.
//
// # Steps
//
// A step is one River job, unique per (session, step number). It takes the session's queued
// messages, checks the stop request and the bounds, makes one model call (a turn) through the
// gateway's own routing, reservation and metering (Options.Call), with the environment's
// tools offered as chat-completions function tools, runs the tool calls the model answered,
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
// # Crashes
//
// A step's model call carries the request id agt_<session>_<turn>, and the ledger bills a
// request id once: a step retried after its process died (River's rescuer, after
// config agents.rescue_after, runs it on another process) makes the call again and is billed
// once. A step's effects (events, the session row, the ticket an open_ticket call opens, the
// next job) commit together with the job's completion, or not at all.
//
// # Fan-out
//
// Every event insert notifies tollgate_agent_events ('<session>:<seq>') at commit; Run holds
// one LISTEN connection per process and wakes the Wait channels of that session.
package agent
