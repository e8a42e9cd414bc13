package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/store"
)

// promptAction is the arguments of agent_prompt.
type promptAction struct {
	SessionID string `json:"session_id"`
	Prompt    string `json:"prompt"`
}

func approvalView(a store.AgentApproval) Approval {
	out := Approval{ID: a.ID.String(), AccountID: a.AccountID, KeyID: idText(a.KeyID), Action: a.Action, State: a.State,
		SessionID: idText(a.SessionID), MessageID: idText(a.MessageID), ResolvedBy: a.ResolvedBy, RequestedBy: a.RequestedBy,
		Arguments: a.Arguments, ArgumentsHash: a.ArgumentsHash, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, ResolvedAt: a.ResolvedAt}
	if a.ActionStatus != nil {
		out.ActionStatus = *a.ActionStatus
	}
	if a.Failure != nil {
		out.Failure = *a.Failure
	}
	return out
}

// requester names who asks when no key does: the connected app of an OAuth grant and the
// member who granted it ("Claude Code (alice@example.com)"); "" for a key's request.
func requester(p auth.Principal) string {
	o := p.OAuth
	if o == nil {
		return ""
	}
	app := o.ClientName
	if app == "" {
		app = o.ClientID
	}
	if o.UserEmail == "" {
		return app
	}
	return app + " (" + o.UserEmail + ")"
}

// grantOf is the OAuth grant a connected app acts through, or uuid.Nil for a key's or a
// member's principal: an approval and the session of an approved spawn record it, so that
// revoking the grant stops both (requesterGone, principal).
func grantOf(p auth.Principal) uuid.UUID {
	if p.OAuth == nil {
		return uuid.Nil
	}
	return p.OAuth.GrantID
}

// Bounds of what an approval holds: a person reads the arguments before approving, and every
// request to an agent tool made one, kept after it is resolved or expires.
const (
	// MaxApprovalText bounds a spawn's purpose and a prompt, in bytes.
	MaxApprovalText = 32 << 10
	// MaxApprovalName bounds a spawn's names (model, environment, profile, agent name).
	MaxApprovalName = 200
	// MaxPendingApprovals bounds the approvals an account has pending at once.
	MaxPendingApprovals = 100
)

// request records a pending approval of an action with its exact arguments, unless the
// account has MaxPendingApprovals pending already.
func (s *Service) request(ctx context.Context, p auth.Principal, action string, args any) (Approval, error) {
	if _, err := tenantOf(p); err != nil {
		return Approval{}, err
	}
	b, err := json.Marshal(args)
	if err != nil {
		return Approval{}, err
	}
	b = storableJSON(b)
	sum := sha256.Sum256(append([]byte(action+"\n"), b...))
	var a store.AgentApproval
	// The count and the insert under one lock of the account's approvals: requests at once all
	// passed the count before (trial h13 D2: 130 at once left 118 pending).
	err = s.inTx(ctx, func(tx *store.AgentTx) error {
		if err := tx.LockAgentKey(ctx, "approvals:"+p.AccountID.String()); err != nil {
			return err
		}
		pending, err := tx.CountPendingAgentApprovals(ctx, p.AccountID)
		if err != nil {
			return err
		}
		if pending >= MaxPendingApprovals {
			return conflictf("the account has %d approvals pending, the most it may: a person must approve or deny some (or let them expire) before more are asked for", pending)
		}
		a, err = tx.InsertAgentApproval(ctx, store.NewAgentApproval{ID: uuid.New(), AccountID: p.AccountID, KeyID: pgUUID(p.KeyID),
			Action: action, Arguments: b, ArgumentsHash: hex.EncodeToString(sum[:]), ExpiresAt: time.Now().Add(s.cfg.ApprovalTTL),
			RequestedBy: requester(p), TraceParent: traceparent(ctx), OauthGrantID: pgUUID(grantOf(p))})
		return err
	})
	if err != nil {
		return Approval{}, err
	}
	return approvalView(a), nil
}

// RequestSpawn records an approval for agent_spawn and returns it at once; nothing runs until a
// person approves it. The arguments are checked now (a clear refusal rather than an approval
// bound to fail).
func (s *Service) RequestSpawn(ctx context.Context, p auth.Principal, a SpawnAction) (Approval, error) {
	if _, err := tenantOf(p); err != nil {
		return Approval{}, err
	}
	a.Purpose = strings.TrimSpace(a.Purpose)
	if a.Purpose == "" {
		return Approval{}, apierror.Invalid("purpose", "'purpose' is required: what the agent is to do")
	}
	if len(a.Purpose) > MaxApprovalText {
		return Approval{}, apierror.Invalid("purpose", "'purpose' is %d bytes; it may be at most %d (a person reads it before approving)", len(a.Purpose), MaxApprovalText)
	}
	for field, v := range map[string]string{"model": a.Model, "target_environment": a.TargetEnvironment,
		"resource_profile": a.ResourceProfile, "agent_name": a.AgentName} {
		if len(v) > MaxApprovalName {
			return Approval{}, apierror.Invalid(field, "'%s' is %d bytes; it may be at most %d", field, len(v), MaxApprovalName)
		}
	}
	if _, err := s.resolveSpawn(ctx, s.q, p.AccountID, a, p.AllowsModel); err != nil {
		return Approval{}, err
	}
	// An account without a slot gets a refusal now, not an approval that can only fail once a
	// person has approved it (trial h9 D10). Whether a slot is free is seen when it runs; the
	// approval says whether one is now (newcomer walk s11h3: only the Approvals page said so).
	has, err := hasSlot(ctx, s.q, p.AccountID)
	if err != nil {
		return Approval{}, err
	}
	if !has {
		return Approval{}, errNoSlot
	}
	free, err := hasFreeSlot(ctx, s.q, p.AccountID)
	if err != nil {
		return Approval{}, err
	}
	ap, err := s.request(ctx, p, "spawn", a)
	ap.NoFreeSlot = err == nil && !free
	return ap, err
}

// hasFreeSlot reports whether a slot of the account runs no session now, whichever key
// started the sessions that run (the rule of FreeAgentSlots, without its lock).
func hasFreeSlot(ctx context.Context, q *store.AgentQueries, account uuid.UUID) (bool, error) {
	slots, err := q.ListAgentSlots(ctx, &account)
	if err != nil {
		return false, err
	}
	for _, sl := range slots {
		row, err := q.LatestSlotSession(ctx, account, sl.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if Ended(row.State) {
			return true, nil
		}
	}
	return false, nil
}

// hasSlot reports whether the account has an agent slot at all (free or not).
func hasSlot(ctx context.Context, q *store.AgentQueries, account uuid.UUID) (bool, error) {
	slots, err := q.ListAgentSlots(ctx, &account)
	return len(slots) > 0, err
}

// errNoSlot refuses a spawn for an account that has no agent slot at all.
var errNoSlot = conflictf("this account has no agent slot: an operator assigns one (tollgate admin slot assign ACCOUNT NAME)")

// RequestPrompt records an approval for agent_prompt (a message to the caller's session).
func (s *Service) RequestPrompt(ctx context.Context, p auth.Principal, sessionID, prompt string) (Approval, error) {
	if strings.TrimSpace(prompt) == "" {
		return Approval{}, apierror.Invalid("prompt", "'prompt' is required: the message for the agent")
	}
	if len(prompt) > MaxApprovalText {
		return Approval{}, apierror.Invalid("prompt", "'prompt' is %d bytes; it may be at most %d (a person reads it before approving)", len(prompt), MaxApprovalText)
	}
	// Another key's session is refused as the HTTP message to it is (403, mayDrive), rather than
	// answered as unknown: the refusal says why.
	row, err := s.accountSession(ctx, p, sessionID)
	if err != nil {
		return Approval{}, err
	}
	if err := mayDrive(p, row.KeyID, driveMessage); err != nil {
		return Approval{}, err
	}
	if row.State == StateStopping || row.State == StateStopped || row.State == StateFailed {
		return Approval{}, conflictf("session %s has ended (%s): nothing can be sent to it; ask for a new one with agent_spawn", row.ID, endedText(row))
	}
	return s.request(ctx, p, "prompt", promptAction{SessionID: row.ID.String(), Prompt: prompt})
}

// approval reads an approval, expiring it when it is pending past its expiry; accountID nil
// reads any account's (the operator's; a zero id: ErrNotFound). It reads by the account before
// it writes anything: another account's approval is ErrNotFound, as an unknown one, and its
// row is left untouched (expired or not).
func (s *Service) approval(ctx context.Context, accountID *uuid.UUID, approvalID string) (store.AgentApproval, error) {
	if _, err := scope(accountID); err != nil {
		return store.AgentApproval{}, err
	}
	id, err := parseID(approvalID)
	if err != nil {
		return store.AgentApproval{}, err
	}
	read := func() (store.AgentApproval, error) {
		if accountID == nil {
			a, err := s.q.GetAgentApproval(ctx, id)
			return a, notFound(err)
		}
		a, err := s.q.GetAccountAgentApproval(ctx, *accountID, id)
		return a, notFound(err)
	}
	a, err := read()
	if err != nil || a.State != ApprovalPending {
		return a, err
	}
	owner := a.AccountID // the operator's: the approval's own account
	if accountID != nil {
		owner = *accountID
	}
	expired, err := s.q.ExpireAgentApproval(ctx, owner, id)
	if err != nil || expired == 0 {
		return a, err
	}
	return read()
}

// ApprovalStatus is the caller's approval (agent_action_status); a key with limits sees only
// the approvals it asked for (sees): another key's is ErrNotFound, as another account's.
func (s *Service) ApprovalStatus(ctx context.Context, p auth.Principal, approvalID string) (Approval, error) {
	a, err := s.approval(ctx, &p.AccountID, approvalID)
	if err != nil {
		return Approval{}, err
	}
	if !sees(p, a.KeyID) {
		return Approval{}, ErrNotFound
	}
	return approvalView(a), nil
}

// ListApprovals lists approvals (accountID nil: every account's; a zero id: ErrNotFound) in state ("" or "all": any),
// newest first, at most limit (1 to 500; 0: 50).
func (s *Service) ListApprovals(ctx context.Context, accountID *uuid.UUID, state string, limit int) ([]Approval, error) {
	acct, err := scope(accountID)
	if err != nil {
		return nil, err
	}
	switch state {
	case "all":
		state = ""
	case "", ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalCancelled:
	default:
		return nil, apierror.Invalid("state", "'state' is pending, approved, denied, expired, cancelled or all")
	}
	if _, err := s.q.ExpireAgentApprovals(ctx); err != nil {
		return nil, err
	}
	rows, err := s.q.ListAgentApprovals(ctx, acct, state, int32(listLimit(limit)))
	if err != nil {
		return nil, err
	}
	out := make([]Approval, len(rows))
	for i, a := range rows {
		out[i] = approvalView(a)
	}
	return out, nil
}

// Resolve approves or denies a pending approval, exactly once under any concurrency (one
// conditional update); an approved action's job is inserted in the same transaction. It is
// never reachable with an API key: the operator's CLI and the signed-in web application call
// it. ErrNotFound for an approval not of accountID (when given); a conflict when it is no
// longer pending (naming its state, expired included).
func (s *Service) Resolve(ctx context.Context, accountID *uuid.UUID, approvalID string, approve bool, by string) (Approval, error) {
	cur, err := s.approval(ctx, accountID, approvalID)
	if err != nil {
		return Approval{}, err
	}
	state := ApprovalDenied
	if approve {
		state = ApprovalApproved
	}
	if approve && cur.State == ApprovalPending {
		if why, err := requesterGone(ctx, s.q, cur); err != nil {
			return Approval{}, err
		} else if why != "" {
			return Approval{}, conflictf("approval %s cannot be approved: %s; deny it", cur.ID, why)
		}
	}
	// The writes name the caller's account (the approval's own, read above, for the operator's
	// nil), so that they could touch no other account's row even if the read above did not
	// check it.
	owner := cur.AccountID
	if accountID != nil {
		owner = *accountID
	}
	var out store.AgentApproval
	err = s.inTx(ctx, func(tx *store.AgentTx) error {
		a, err := tx.ResolveAgentApproval(ctx, owner, cur.ID, state, by)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.ExpireAgentApproval(ctx, owner, cur.ID); err != nil {
				return err
			}
			now, err := tx.GetAccountAgentApproval(ctx, owner, cur.ID)
			if err != nil {
				return err
			}
			return conflictf("approval %s is already %s", cur.ID, now.State)
		}
		if err != nil {
			return err
		}
		out = a
		if approve {
			return s.insert(ctx, tx, actionArgs{ApprovalID: a.ID}, nil)
		}
		return nil
	})
	if err != nil {
		return Approval{}, err
	}
	return approvalView(out), nil
}

// requesterGone says why the API key or the connected app that asked for an approval can no
// longer act ("" when it can, or when neither asked: a member): a key revoked (a leaked one,
// say), disabled or expired since must not have its request run by someone's approval (trial
// h13 D7: its prompt ran a billed turn in another key's session), and neither must a connected
// app whose OAuth grant was revoked since, or whose member left the account or lost the role
// they allowed the app with (grantGone). It reads with q (the caller's transaction's, when it
// has one: a second connection while the approval row is locked could wait for the pool the
// other runs of the action hold). Its error is a dependency failure.
func requesterGone(ctx context.Context, q *store.AgentQueries, a store.AgentApproval) (string, error) {
	if grant := fromPG(a.OauthGrantID); grant != uuid.Nil {
		gone, err := grantGone(ctx, q, grant)
		if err != nil || !gone {
			return "", err
		}
		return "the connected app that asked for it lost its access since (its access was revoked or reached the end of its lifetime, or its member left the account or lost the role they allowed the app with)", nil
	}
	id := fromPG(a.KeyID)
	if id == uuid.Nil {
		return "", nil
	}
	k, err := q.GetAccountAPIKey(ctx, a.AccountID, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && k.RevokedAt != nil:
		return "the API key that asked for it was revoked since", nil
	case err != nil:
		return "", err
	case k.DisabledAt != nil:
		return "the API key that asked for it was disabled since", nil
	case k.ExpiresAt != nil && !k.ExpiresAt.After(time.Now()):
		return "the API key that asked for it has expired since", nil
	}
	return "", nil
}

// grantGone reports whether an OAuth grant no longer works: revoked (on the console's Connected
// apps, by the client, by a replayed code or refresh token, or with its member's removal or
// lowered role), past its absolute lifetime (its expires_at: none of its tokens works after
// it), its member no longer in the account, or the grant deleted. Its error is a dependency
// failure.
func grantGone(ctx context.Context, q *store.AgentQueries, grant uuid.UUID) (bool, error) {
	active, err := q.OAuthGrantActive(ctx, grant)
	if err != nil {
		return false, err
	}
	return !active, nil
}

// expireApprovals expires the pending approvals past their expiry (one sweep of Run's, every
// config agents.approval_sweep).
func (s *Service) expireApprovals(ctx context.Context) {
	if ids, err := s.q.ExpireAgentApprovals(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("agent: expiring approvals failed", "err", err)
	} else if len(ids) > 0 {
		s.log.Info("agent: approvals expired", "count", len(ids))
	}
}

// everySweep calls sweep every interval until ctx ends: the approvals' expiry and the sweep of
// discarded jobs every config agents.approval_sweep, that of lapsed sessions every
// agents.session_sweep.
func (s *Service) everySweep(ctx context.Context, interval time.Duration, sweep func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sweep(ctx)
		}
	}
}

// errActionMoved reports an approved action whose status another run has moved on.
var errActionMoved = errors.New("agent: the approved action was moved on by another run")

type actionWorker struct {
	river.WorkerDefaults[actionArgs]
	s *Service
}

func (w *actionWorker) NextRetry(job *river.Job[actionArgs]) time.Time {
	return retryDelay(job.Attempt)
}

// Work runs an approved action: its status goes running, then done (with the session or
// message it made) or failed (with why), in the transaction that completes the job. The
// approval row is locked for the whole transaction and each move is conditional on the status
// before it, so the action runs once even when River runs the job again while a first run is
// still alive: the second run waits for the lock and then finds the action done (or failed)
// and only completes its job. A status committed as running (none is: the moves commit
// together) would be a run that is gone, and runs again under the lock.
func (w *actionWorker) Work(ctx context.Context, job *river.Job[actionArgs]) error {
	s := w.s
	return s.inTx(ctx, func(tx *store.AgentTx) error {
		a, err := tx.GetAgentApprovalForUpdate(ctx, job.Args.ApprovalID)
		if errors.Is(err, pgx.ErrNoRows) {
			return complete(ctx, tx, job)
		}
		if err != nil {
			return err
		}
		if a.State != ApprovalApproved || a.ActionStatus == nil || (*a.ActionStatus != ActionQueued && *a.ActionStatus != ActionRunning) {
			return complete(ctx, tx, job) // already run
		}
		status := *a.ActionStatus
		set := func(to string, session, message uuid.UUID, failure string) error {
			p := store.AgentActionUpdate{ID: a.ID, From: status, ActionStatus: to, SessionID: pgUUID(session), MessageID: pgUUID(message)}
			if failure != "" {
				p.Failure = &failure
			}
			n, err := tx.SetAgentApprovalAction(ctx, p)
			if err != nil {
				return err
			}
			if n != 1 {
				// Not reachable while the row is locked; a run that finds it anyway must not
				// run the action a second time.
				return errActionMoved
			}
			status = to
			return nil
		}
		if err := set(ActionRunning, uuid.Nil, uuid.Nil, ""); errors.Is(err, errActionMoved) {
			return complete(ctx, tx, job)
		} else if err != nil {
			return err
		}
		// A key that asked and was revoked (disabled, expired) since the approval fails it, and
		// so does a connected app whose grant stopped working since.
		if why, err := requesterGone(ctx, tx.AgentQueries, a); err != nil {
			return err
		} else if why != "" {
			if err := set(ActionFailed, uuid.Nil, uuid.Nil, why); err != nil {
				return err
			}
			return complete(ctx, tx, job)
		}
		// The action runs in a savepoint: a refusal rolls its writes back and is recorded.
		var session, message uuid.UUID
		sp, err := tx.Savepoint(ctx)
		if err != nil {
			return err
		}
		// The job has no span: what the action starts links to the request that asked for it.
		actx := ctx
		if sc := spanContextOf(a.TraceParent); sc.IsValid() {
			actx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
		switch a.Action {
		case "spawn":
			session, err = s.spawnApproved(actx, sp.AgentTx, a)
		case "prompt":
			session, message, err = s.promptApproved(actx, sp.AgentTx, a)
		default:
			err = conflictf("unknown action %q", a.Action)
		}
		var ce *ConflictError
		var ae *apierror.Error
		switch {
		case err == nil:
			if err := sp.Release(ctx); err != nil {
				return err
			}
			if err := set(ActionDone, session, message, ""); err != nil {
				return err
			}
		case errors.As(err, &ce) || errors.As(err, &ae) || errors.Is(err, ErrNotFound):
			if rerr := sp.Rollback(ctx); rerr != nil {
				return rerr
			}
			failure := err.Error()
			if errors.Is(err, ErrNotFound) {
				failure = "the session does not exist any more"
			}
			if err := set(ActionFailed, session, uuid.Nil, failure); err != nil {
				return err
			}
		case store.RefusedData(err):
			// The database refuses the action's data (a value out of a column's range, a
			// check): it would on every run, so the action fails now, saying so.
			if rerr := sp.Rollback(ctx); rerr != nil {
				return rerr
			}
			s.log.Error("agent: the database refused an approved action's data; the action fails", "approval", a.ID, "err", err)
			if err := set(ActionFailed, uuid.Nil, uuid.Nil, "the database refused the action's data"); err != nil {
				return err
			}
		default:
			return err // the database: the job runs again
		}
		return complete(ctx, tx, job)
	})
}

// spawnApproved starts an approved agent_spawn in the account's first free slot (by name).
func (s *Service) spawnApproved(ctx context.Context, tx *store.AgentTx, a store.AgentApproval) (uuid.UUID, error) {
	var args SpawnAction
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		return uuid.Nil, err
	}
	free, err := tx.FreeAgentSlots(ctx, a.AccountID)
	if err != nil {
		return uuid.Nil, err
	}
	if len(free) == 0 {
		if has, err := hasSlot(ctx, tx.AgentQueries, a.AccountID); err == nil && !has {
			return uuid.Nil, errNoSlot
		}
		return uuid.Nil, conflictf("no free slot: every agent slot of the account runs a session")
	}
	params, err := s.resolveSpawn(ctx, tx.AgentQueries, a.AccountID, args, nil)
	if err != nil {
		return uuid.Nil, err
	}
	row, err := s.createSession(ctx, tx, a.AccountID, starter{key: fromPG(a.KeyID), grant: fromPG(a.OauthGrantID)}, free[0], params, args.Purpose, uuid.Nil)
	if err != nil {
		return uuid.Nil, err
	}
	return row.ID, nil
}

// promptApproved sends an approved agent_prompt to its session.
func (s *Service) promptApproved(ctx context.Context, tx *store.AgentTx, a store.AgentApproval) (uuid.UUID, uuid.UUID, error) {
	var args promptAction
	if err := json.Unmarshal(a.Arguments, &args); err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	id, err := uuid.Parse(args.SessionID)
	if err != nil {
		return uuid.Nil, uuid.Nil, ErrNotFound
	}
	// The session id is the requester's argument: it is locked as the approval's account's
	// only (another account's is ErrNotFound).
	st, err := lockAccountSession(ctx, tx, a.AccountID, id)
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	msg, _, err := s.send(st, args.Prompt)
	return id, msg, err
}

func listLimit(limit int) int {
	if limit <= 0 {
		return 50
	}
	return min(limit, 500)
}
