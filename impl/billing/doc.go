// Package billing meters requests: it reserves each request's worst-case cost before the
// upstream call, settles the real cost after it, and writes usage and the ledger in batches,
// without a database round trip per request in the common case.
//
// # Money
//
// Amounts are int64 micro-units (1 USD = 1,000,000); prices are micro-units per million tokens,
// input and output apart, and Cost rounds up to a whole micro-unit in integer arithmetic.
//
// # Credit holds
//
// Like the credit grants of telecom online charging, a Meter (one per gateway process) draws
// credit from an account in chunks, as a hold: a row of credit_holds for (account, process) and
// the same amount added to accounts.held_micros, in one statement that grows the hold only as
// far as balance - held covers. A CHECK constraint keeps 0 <= held_micros <= balance_micros, so
// PostgreSQL itself refuses, across every process, anything that would hold or spend credit
// the account does not have. Holds are not movements of the balance and have no ledger entries:
// the ledger sums to the balance at all times.
//
// Reserve takes a request's worst case out of the process's hold in memory (no database call)
// when the hold covers it, and otherwise grows the hold in one round trip: by
// max(worst, min(max(10 × worst, 2 s of the account's recent reservations), 1 USD)), but never
// more than the account has and, unless the request needs more, never more than half of what
// it has left, so that the last credit of an account is not stranded in one process while
// another refuses requests. When the account cannot cover the worst case, Reserve returns an
// *InsufficientError, whose available amount (the account's free credit and the hold's) is
// always less than the worst case. Credit can move during a round trip (other processes draw
// what the trip asked for, settlements return credit to the hold, the process's other requests
// reserve what a grant brought): a reservation that a trip's answer shows the account covers
// draws again for what it lacks then, and what a grant or the settlements made enough is
// reserved before the account's lock is let go. After maxContendedTrips (6) such trips the
// request is refused with a 503 to retry at once (ErrContended), never a 402.
//
// # Holds of other processes
//
// A hold is returned once it has not been used for IdleRelease (5 s), so an account spread
// over several processes could be refused by one of them while another sat on its unused
// credit. So before Reserve answers 402 for a request that the account's balance would cover
// were it not for the other processes' holds (the grant's answer tells the balance and what is
// held; this process knows its own hold), it asks them to release their idle holds of the
// account: a NOTIFY on tollgate_credit_release ("want <account> <holder>"), which every meter
// LISTENs to while Run runs, on a connection of its own (release.go). It then waits until they
// say they returned what the request lacks ("released <account> <amount> <holder>"), or for
// ReleaseWait (500 ms) at most, and draws once more, asking again (up to maxReleaseAsks, 3,
// asks) while the others still hold what would cover it: what one process gave back may be
// drawn by a third before the asker draws. What the account still cannot cover is refused.
// One ask per account is in flight per process at a time, shared by the reservations that wait
// for it. A process so asked releases its hold of the account by the path of the idle release
// (the account marked releasing with the call in flight, the answer's version applied as
// there) at once when nothing of the account is in flight. While requests of the account are in
// flight it gives back at once the hold's free part, what no open reservation and no settled
// cost waiting to be written uses (store.ShrinkCreditHold, under the account's lock; the free
// part is taken out as outstanding while the call is in flight, and the answer's version is
// applied like a grant's), and again whenever some of it becomes free, for ReleaseWait from the
// last ask; it draws no credit ahead of need meanwhile, and has its settled records written at
// once so that the hold goes whole when it becomes idle. A request that the hold covers pays
// nothing for any of this: the ask is made only on the way to a 402, and the listener is one more connection per
// process.
//
// # Drawing ahead of need
//
// A request that has to draw credit waits for the database, and so does every other request of
// the account that the hold no longer covers meanwhile. So while Run runs, the meter draws the
// next chunk before the hold runs out. It keeps, per account, a moving average of the credit
// reserved per second (each reservation weighted by exp(-age / 1 s)). When a reservation
// leaves the hold's free credit (held, less open reservations and settled costs not yet
// written) below the low-water mark - what would last 1 s at that rate, or half a chunk,
// whichever is more, but never more than a chunk - the meter draws a chunk (sized as above for
// the reservation's worst case and the rate) in the background. That grant needs nothing: it
// takes at most half of what the account has left, and it is not sent when, at the last grant,
// half of what the account had left would not have covered one more such request (the rest is
// left to whichever process needs it; a request that needs it draws it as before). There is
// never more than one grant in flight per account: a request whose worst case the free credit
// does not cover waits for the grant in flight, then draws one itself if it still needs to.
// Close waits for the grants in flight before it returns the holds. Without Run, nothing is
// drawn ahead of need.
//
// Settle charges the real cost, returns what the reservation did not use to the hold at once and
// queues a usage record. A cost beyond the reservation (its input is an estimate, three bytes a
// token, which text made to be dense passes by up to three times) is charged out of the hold's
// free credit as far as that covers it, in memory, and the rest is waived (the record says how
// much): the hold is credit set aside in the database, so the balance never goes below zero.
// A key with a credit cap is charged the excess only as far as its cap has it free too (read and
// written with the key's budget locked, so the cap holds across processes), an agent session's
// call only within its ceiling (what was left of its max_spend); nothing beyond the reservation
// is charged on credit. CreditStats counts both, for the
// operator to see reservations that fall short. Release returns a reservation whole (the request never reached an
// upstream). Both are idempotent.
//
// # Batching writer
//
// Queued usage records are written every 200 ms or as soon as a batch is full, in one
// transaction per batch of two statements: the accounts are locked in id order (so that the
// writers of several processes never deadlock), then one statement inserts the records into
// usage_records, skipping those whose (account, request id) is already there (so a retried
// batch, or a request id settled twice, bills once: the unique index decides), and for the
// records it inserted appends their usage ledger entries (key usage:<request id>) and takes
// their cost out of the balance, out of held_micros and out of the process's hold. Usage
// ledger entries are written nowhere else (store.Append refuses them), so a request has a
// usage entry exactly when it has a usage record. Close (or the end of Run's context) writes
// everything and returns every hold. A batch with records of checkpointed streams (see Leases
// and crashes) deletes their checkpoints in the same transaction, one statement more; other
// batches pay nothing.
//
// # When the database does not take usage
//
// A batch whose write fails (the database is down, or the write takes longer than
// WriteTimeout, 5 s) is not dropped: it goes to the backlog, and so does every record settled
// after it, at every flush tick, until the backlog has been written: records reach the
// database in the order they were settled. The backlog is the spill file (Options.Spill, see
// impl/usagespill: an append-only file on local disk, one write and one fsync per tick) or,
// without one, memory (up to MaxBacklog records, 100,000). A second goroutine of Run, the
// replayer, writes the backlog in batches from its start, retrying with exponential backoff
// (from FlushInterval up to RetryMax, 5 s, with jitter) while the writes fail, and once it has
// written the last record it empties the backlog (truncates the file) and new records go
// straight to the database again. A batch that committed although its write reported a failure
// (the connection broke before the answer came) is written again and skipped by the unique
// index: billed once. The meter logs the start of an outage (the first failed write) and its
// end (the backlog written), not every retry; WriterStats reports the queue, the backlog, the
// failed writes and the refusals for the metrics.
//
// The spill file outlives the process. A process that stops while the database is away (its
// drain cannot write) leaves its records there; the next process that opens the file writes
// them first, billed to the hold of the process that settled them (the holder is kept with
// each record) while that hold is still there, or else to the account's free credit, and
// without touching its own view of its holds. So neither a long outage nor a restart during
// one loses usage.
//
// When the backlog is full (the file has reached its bound, 256 MiB by default, or the last
// eighth of it while the database does not take usage, or it cannot be written), Reserve
// refuses every new request with a 503 and Retry-After (apierror.Unavailable, wrapping
// ErrBacklogFull) rather than serve requests it could not bill. The last eighth is kept for
// the records of the requests in flight at that moment, so that they are durable too; what the
// file cannot take even so waits in memory. It serves again once the backlog has been written.
//
// # Leases and crashes
//
// A hold has a lease (Lease, 40 s by default: 4/3 of the outage cover below, at least 30 s)
// that its process renews every Lease/6; the process uses the hold only until Lease - Lease/20
// after it sent the last renewal (or grant) that the database answered, a bound that ends
// before the lease can end in the database, whose clock starts later. A hold that has not been
// used for 5 s is returned (or at once, when another process needs the credit: see Holds of
// other processes). Every process reaps the holds whose lease expired (their process
// is gone), which returns their credit to the account. A process killed without a drain (SIGKILL, a crash, a
// power cut) loses the usage it had settled but not yet written or spilled: the records of at
// most the last flush interval (200 ms), or, while a write is in flight, of that write's
// duration (at most WriteTimeout, when the database hangs instead of refusing); in the spill
// file a torn last write is dropped at the next start. That usage is never billed: in the
// customer's favour. A process that lost its hold (it could not renew it for a whole lease)
// bills later writes from the account's free credit as far as it goes, and says in the ledger
// entry's note what it could not bill.
//
// Streams in flight. A stream's answer reaches its client long before the stream is settled,
// so a crash must not take the stream out of the books, as it would the settled records above.
// The HTTP edge registers each stream (TrackStream: one lock of one of 64 shards, at its start
// and at its settlement) and, after each event it sends, hands over its progress (Progress:
// the usage the upstream reported so far and the text produced, under a lock of the stream's
// own, no allocation). Every CheckpointInterval (2 s) the meter turns the progress of every
// stream in flight that has delivered something into the usage record the stream would be
// settled with if it were cut now (the record the edge bills a stream cut short with, priced
// and costed as Settle does, status process_lost), and writes them all in one statement to
// stream_checkpoints, keyed by (account, request id), with the process as holder and a lease
// (Lease) that each write renews. A stream that settles deletes its checkpoint in the
// transaction that writes its usage record; a checkpoint that raced past its stream's
// settlement is not saved (its record is there) or is deleted by the process's next write;
// Close deletes the process's checkpoints once its records are written.
//
// When a process is gone, ReapExpiredHolds bills its checkpoints before it reaps its holds:
// every checkpoint of another holder that has an expired hold, or whose own lease expired,
// becomes a usage record through the writer's path for another process's records (as the
// backlog replay writes those an earlier process left): from the dead process's hold while it
// is there, else from the account's free credit, never below zero (the note says what was not
// billed); in the same transaction the checkpoints are deleted and the key reservations of
// those streams settled at their cost (so a capped key counts what its lost streams delivered,
// and its reservation no longer holds the worst case). The unique index of usage_records bills
// a request id once: reapers racing, a checkpoint whose stream's record was written already,
// and a record that arrives later (a spilled one) bill nothing twice. After reaping, the
// checkpoints of the holders it reaped are billed again, should another reaper have taken a
// hold in between.
//
// So a SIGKILL loses, of each stream in flight, at most what it delivered after the last
// checkpoint write that committed: at most one CheckpointInterval of output plus the duration
// of one write (the write that would have carried it). A stream that had delivered nothing at
// that write has no checkpoint and is lost whole, its input included, as is a request that is
// not a stream (nothing tracks it before it settles). During a database outage checkpoints
// are not written (the streams are served on), so the bound is then the outage's start. A
// stream whose process is cut off from the database for longer than a lease, while others
// reach it, is billed from its checkpoint by them; when its own record reaches the database
// later (written by that process, or replayed from its spill file by the next process, as
// after a graceful stop during a database outage that outlasted the lease), the record is
// skipped, as a request billed already, and the rest of its usage, the difference per token
// kind at the rates the request was billed at, is billed as a second record (request id +
// store.RestSuffix) in the same transaction, the key's spend raised to match: the two records
// together charge what the stream's own record says.
// A stream of an on-credit request is checkpointed too and billed from the free credit. Cost:
// per stream two shard locks and one record built per interval; per process one statement per
// interval while it streams; per reap one query that finds the lost checkpoints.
//
// # Database outages: credit
//
// A process that cannot reach the database keeps serving the requests its holds cover, and
// decides what to do with the others, as the Credit-Control-Failure-Handling of telecom online
// charging (RFC 4006) does. Options.Outage sets the policy; `tollgate serve` exposes it as
// -credit-outage-cover, -credit-failure-handling and -credit-risk-micros.
//
// The outage reserve. Each account keeps a moving average of what it spends: the costs it
// settled (not the worst cases it reserved), each weighted by exp(-age / 10 s), divided by what
// a steady rate would have added up to over the account's history (at least 2 s), so the rate
// is right from an account's first seconds. The hold's free credit (what its open reservations
// and unwritten costs leave) is kept at the low-water mark plus the reserve, OutagePolicy.Cover
// (30 s) of that rate: when a reservation leaves it below, the meter draws, ahead of need, a
// chunk or the shortfall if larger. The chunk cap (ChunkCapMicros, 1 USD) still bounds every
// grant drawn ahead of need, so a reserve above it is built in several grants, one at a time,
// as the account keeps spending; and a grant for the reserve never leaves the hold with more
// than half of what the account has left (the hold plus the account's available credit at the
// last grant), as the chunks never take more than half of the available credit, so that the
// reserve never strands an account's last credit in one process. So the hold of an active
// account (one that reserved within the idle release, 5 s) covers what its open reservations
// hold plus about Cover of its recent spending, as far as half of its credit goes; an account
// that idles longer has no hold, and one that spends faster during the outage than before runs
// out sooner.
//
// During an outage. A database call that fails because the database cannot be reached
// (store.Unavailable: a refused or lost connection, a timeout) marks the database down, with
// one log line, until a call succeeds (one more). Meanwhile reservations draw from the holds
// in memory as always; no grant is drawn ahead of need; the maintenance only pings the
// database, once a tick; and a reservation that its hold does not cover (spent, never drawn,
// or past its lease) goes to the failure handling at once, except one at a time that asks the
// database for credit (so the first request after the database returns finds it), each such
// call bounded by WriteTimeout so that a database that hangs costs one request at a time 5 s,
// not every request (the others of its account go to the failure handling while it asks,
// rather than wait for it: TestHungDatabaseAnswersTogether). The failure handling is FailureRefuse (the default): 503 with Retry-After
// (apierror.Unavailable wrapping ErrHoldSpent), and nothing is ever served beyond the credit
// held for it; or FailureContinue: the request is served on credit while the credit served so
// on the account (the worst cases of such requests in flight and the costs of those settled
// and not yet written) stays within OutagePolicy.RiskMicros (1 USD) and within what the
// account had available at the last grant this process drew, then refused as under refuse.
// The bound is per process: N processes cut off together may serve N times it. Or
// FailureShare (what `tollgate serve` uses unless told otherwise): the request is served on
// credit while the credit served so on the account stays within the process's share of the
// account's last-known available credit, what the account had available at the last grant this
// process drew (kept for five minutes after the account's state is forgotten) divided by
// the replica count (OutagePolicy.Replicas, or the number of processes that held credit in the
// database at this process's last renewal of its holds when that is larger); then refused. With the right count the processes
// together serve on credit at most what the account had available besides their holds, however
// long the outage lasts, except that a process's view is that of its last grant: the holds the
// others drew after it, divided by the count, may be served twice. The writer bills all of it
// from the account's free credit as below, so the balance never goes below zero; what it no
// longer covers goes unbilled and is noted.
//
// The lease during an outage. A process that cannot reach the database cannot renew its holds,
// and cannot tell a database that is down for everyone from one that only it cannot reach,
// while other processes still do and will reap its hold when the lease ends and hand the
// credit out again. So it uses a hold only while its own view of the lease lasts (above), which
// ends before anyone can reap it: no credit is ever reserved by two processes. The default
// lease leaves that view at least Cover after the last renewal before an outage (40 - 2 - 6.7
// s > 30 s), so the lease never cuts the reserve short; past it, the account's requests go to
// the failure handling. When the database is back, the maintenance renews every hold at once
// (a hold whose lease ended but that nobody reaped is renewed and used again) and its reaper
// waits a reap interval before reaping anyone's hold, so the other processes, back too, renew
// theirs first; the usage settled during the outage is then written (the replayer is woken),
// billed from the hold it was reserved against. If the hold was reaped meanwhile (the database
// stayed away from this process longer than the lease), the usage is billed from the account's
// free credit, where the reaped hold's credit went; what that no longer covers (another
// process has drawn the credit since) is not billed and the ledger entry's note says so. This
// is the one way a request served under refuse can go unbilled: a process cut off from a
// database others still reach, for longer than its lease, while they spend the account's
// credit; it is bounded by the hold.
//
// Reconciliation. A request served on credit is settled as any other, and its usage record
// carries OnCredit: the writer bills it from the account's free credit, never from the hold
// (which backs the other requests), after the records of the hold in the same batch; the usage
// record's on_credit column and the ledger entry's note ("served on credit during a database
// outage", with what was not billed, if the free credit did not cover it) show it as such. The
// balance never goes below zero. CreditStats reports the database's state, the refusals, and
// the requests and credit served on credit, for the metrics (tollgate_credit_*).
//
// # Key credit caps
//
// An API key may carry a credit cap: the most it may spend in a period, none (one period for
// ever), daily or monthly (UTC calendar days and months). ReserveForKey enforces it with the
// same guarantee as the account's credit, across every process: no request is served whose
// worst case, added to what the key spent in the period and to what its requests in flight
// reserved, would pass the cap. It reserves the worst case against the account's credit (as
// Reserve does, usually in memory) and then against the key's budget, a row of key_budgets per
// (key, period) holding spent_micros and reserved_micros, in one statement: an INSERT ... ON
// CONFLICT DO UPDATE whose WHERE adds the worst case only while spent + reserved + worst stays
// within the cap (the row is locked and re-read, so concurrent reservations of any processes
// never pass it together), and which writes in the same statement the request's row of
// key_reservations, held by this process with a lease. A refusal is a *KeyCapError, a 402 in
// the route's envelope that names the key's cap; the account's reservation is released.
// KeyBudget reads the same row for GET /v1/credits: what the cap leaves there (cap - spent -
// reserved) is the figure such a 402 gives, so the two never disagree.
//
// Settle ends the key's reservation in one more statement: the reservation row is marked
// settled, its amount leaves reserved_micros and the real cost (the same clamped cost as the
// usage record's) joins spent_micros. Release (and a settlement at 0 whose record goes under an
// id of its own, an in-process call's undelivered attempt) bills nothing under the request id,
// which the ledger leaves free for a retry: its amount leaves reserved_micros and the row is
// left as a reaped one (amount 0, not settled), so that a retry with the request id (an agent's
// step after a failed model call) is reserved against the cap and counted as the ledger bills
// it, not served as a request counted already. Settling is
// idempotent (only a row not settled yet is settled), so a settlement retried after an unknown
// outcome counts once. The settlement is written synchronously, after the answer has reached
// the client and without the request's context (a client that went away is billed all the
// same); one that the database does not take is kept in memory and retried by the maintenance
// (whose lease renewals keep the reservation meanwhile) at the reservation's part of the cost,
// which is all Settle charges when the write fails. A settlement beyond the reservation
// whose COMMIT went unanswered may have committed, with the excess the account was not charged:
// its retry finds the row settled and leaves it, and the writer of the request's usage record,
// enqueued after the settlement returned, takes the excess back: it makes the reservation
// count what the ledger billed for the request id (SettleKey, below), in the transaction that
// writes the record, and waits on the reservation's row lock for a settlement whose COMMIT
// the server has not carried out yet. The usage record is also what outlives a process killed
// or stopped before the retry. A release left pending is the reaper's: the reservation holds
// its worst case until its lease ends. A request counts in the period its reservation was made in, and
// its usage record's started_at is kept in that period, so the spend the key list shows (the
// sum of the key's usage records since the period start) is what the budget counts. A cap put
// on a key, or moved to another period, starts from that spend too: setting it raises the
// budget of the period that holds then to the cost of the key's usage records in it
// (store.SetAPIKeyLimits; what the key's requests in flight then settle goes to the budget of
// the period they reserved in, and is not counted again).
//
// A request id once. The ledger bills a request id once, and an agent retries a step with the
// same request id (after a failure, or a crash of its process) so that its model call is billed
// once; the key's budget counts a request id once too. A settled reservation keeps its row (the
// settled marker) for 7 days (keySettledRetention), far longer than a retry can come: an
// agent's steps are retried within its session's max_duration (an hour by default), a crashed
// step's job after agents.rescue_after (10 minutes). The reservation statement writes nothing
// when the key has a row for the request id, and says so; then, in one transaction, the row is
// locked (FOR UPDATE: the reservations and settlements of that request id, from every process,
// wait for it) and taken over. A settled row reserves nothing and needs no settlement: the
// retry is served (the account's credit is reserved as usual, and its usage record is skipped
// by the writer), and nothing is added to the key's spend, even when what is left of the cap
// would not cover its worst case. A live row (the first attempt's process is gone, or still at
// work) or a reaped one becomes this process's, with a fresh lease and the retry's worst case,
// which replaces the row's amount in reserved_micros only while spent + reserved stays within
// the cap (the old amount counts no more; a retry in a later period moves the reservation
// there); past the cap the retry gets the 402 and the row stays as it was. Two attempts in
// flight at once share the row: the first settlement counts its cost, the other adds nothing,
// as the ledger keeps the first usage record written. A reservation that races with another of
// the same request id (neither saw the other's row) fails on the primary key, which undoes its
// whole statement, and takes the row over as above. The budget's locks are taken after the
// reservation row's, as the settlement and the reaper take them, and a deadlock PostgreSQL
// breaks anyway is retried.
//
// Leases. The maintenance renews the leases of this process's key reservations every Lease/6
// while it has any (one UPDATE for all of them), and every ReapInterval returns the expired
// reservations of every process (whose process is gone) to their budgets; a reservation that
// its budget would refuse also returns the expired reservations of its key first, and tries
// once more. A reaped reservation keeps its row, with amount 0, so that the settlement of a
// request whose process was cut off from the database for longer than the lease (but not
// dead) still counts its cost: the one way a key can pass its cap, by at most such requests'
// worst cases. Reaped rows are deleted 7 days after their lease ended, and settled rows 7
// days after their settlement (store.KeyReservationRetention): a usage record replayed from a
// spill file within that week still settles its reaped reservation. The indexes of the renewal and of the reaper hold live rows only, so
// the settled markers a process keeps cost them nothing.
//
// What it costs. A key without a cap costs nothing: no database call, no allocation (the
// principal's limits are nil), and the one branch that skips the cap. A capped key's request
// costs two database round trips on the request path (the reservation before the upstream call,
// the settlement after the answer has been written), each a single statement on one budget row
// and one reservation row (the reservation also probes the reservation's primary key for a row
// of its request id, the settlement updates the row instead of deleting it), plus its share of
// one lease renewal every Lease/6 per process. A retry of a request id the key has a row for
// costs a transaction of up to four statements more. All
// the requests of one capped key, from every process, take the lock of the same budget row in
// turn, for the few microseconds of one statement each.
//
// During a database outage a capped key's request is refused with a 503 and Retry-After
// (apierror.Unavailable wrapping ErrKeyCapUnavailable): the key's budget is kept only in the
// database, so no process can tell what another has served against it. Uncapped keys of the
// same account are served from the holds as before. A capped key's usage record carries the
// settlement of its reservation too (store.UsageRecord.SettleKey, kept in the spill file): a
// settlement that waited in memory during an outage and was lost with its process is made when
// the record is written, and one made already is not counted again, whether the reservation
// was reaped meanwhile (its row waits, with amount 0, for 7 days after its lease ended) or not.
// The writer makes the reservation count the bill of the usage record the ledger holds for the
// request id, whether it takes the record or refuses it as a duplicate
// (store.SettleKeyReservationsAtBill): a settlement whose COMMIT went unanswered is brought
// down to it (the meter keeps no retry of its own for that),
// and when the ledger billed another attempt of the request id than the one the key counted (a
// retry served by another process while the first attempt's record waited in a dead
// process's spill file, or the replayed record billed before a retry's that settled against
// the key), the reservation is moved to that attempt's bill. A retry that found its request
// counted already (it holds nothing against the cap) still carries SettleKey for that. The spend of a key is what
// its usage records charge, except in the cases where the usage writer bills less than a record's cost
// (a hold lost to a long partition: the ledger note says so) and where a process is killed
// after a settlement but before its usage record is written (the record is lost, in the
// customer's favour, and the key's budget counts a little more than its records show).
//
// # Balance
//
// Balance, for GET /v1/credits, is the settled balance: settlements show within the flush
// interval, and reservations in flight are not subtracted (they are worst cases, and would
// make the balance shown jump down and back with every request).
package billing
