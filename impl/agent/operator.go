package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

// AssignSlot assigns a slot called name to the account (the operator's `tollgate admin slot
// assign`). ErrNotFound when the account does not exist; a conflict when it has the slot.
func (s *Service) AssignSlot(ctx context.Context, accountID uuid.UUID, name string) error {
	if _, err := tenantID(accountID); err != nil {
		return err
	}
	name = strings.TrimSpace(name)
	if name == "" || strings.ContainsAny(name, "/ \t\n") || len(name) > 64 {
		return apierror.Invalid("slot", "a slot name is 1 to 64 characters without '/' or spaces")
	}
	_, err := s.q.InsertAgentSlot(ctx, accountID, name)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return conflictf("the account already has slot '%s'", name)
		case "23503":
			return ErrNotFound
		}
	}
	return err
}

// UnassignSlot takes a slot from the account; a live session in it stops (slot_unassigned: at
// once when ready, at its next step boundary when busy). The slot's sessions stay, under
// their slot name.
func (s *Service) UnassignSlot(ctx context.Context, accountID uuid.UUID, name string) error {
	if _, err := tenantID(accountID); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *store.AgentTx) error {
		sl, err := slotFor(ctx, tx.AgentQueries, accountID, name)
		if err != nil {
			return err
		}
		st, ok, err := liveSession(ctx, tx, accountID, sl.ID)
		if err != nil {
			return err
		}
		if ok {
			if err := s.stopSession(st, ReasonSlotUnassigned, uuid.Nil); err != nil {
				return err
			}
		}
		_, err = tx.DeleteAgentSlot(ctx, accountID, sl.ID)
		return err
	})
}

// EndMemberSessions ends, in tx, the live sessions the member user started on the console in
// the account (member_removed), for the member's removal from it (members.Service.Remove
// passes it to the store's DeleteMembership, whose transaction it joins): a ready session,
// waiting for a message, which no step would check, and a provisioning one are stopped at once
// and their slots freed (a start job still to come finds the session ended); a busy one stops
// at its step boundary, before any further model call, as its step's own check (starterGone)
// would have it. A session stopping already keeps its reason. Sessions a key started are not
// the member's; those the connected apps they allowed started end too, with access_revoked,
// as the removal revokes the apps' grants. Each ending is in the account's audit log
// (endEach).
func (s *Service) EndMemberSessions(ctx context.Context, tx *store.AgentTx, accountID, userID uuid.UUID) error {
	return s.endOrLeave(ctx, tx, "member "+userID.String(), func(tx *store.AgentTx, found *sessionCount) error {
		return s.endMember(ctx, tx, accountID, userID, found)
	})
}

// endMember is EndMemberSessions' ending, in tx; it counts the sessions it finds to end in
// found.
func (s *Service) endMember(ctx context.Context, tx *store.AgentTx, accountID, userID uuid.UUID, found *sessionCount) error {
	ids, err := found.add(tx.MemberLiveSessionIDs(ctx, accountID, userID))
	if err != nil {
		return err
	}
	if err := s.endEach(ctx, tx, accountID, ids, ReasonMemberRemoved, "member "+userID.String()); err != nil {
		return err
	}
	if ids, err = found.add(tx.MemberGrantsLiveSessionIDs(ctx, accountID, userID)); err != nil {
		return err
	}
	return s.endEach(ctx, tx, accountID, ids, ReasonAccessRevoked, "grants of member "+userID.String())
}

// EndKeySessions ends, in tx, the live sessions of the account started with one of the keys
// (key_revoked), for the keys' revocation (accounts.Service passes it to the store's
// revocation, whose transaction it joins), as EndMemberSessions does for a removed member: a
// ready or provisioning session is stopped at once and its slot freed, a busy one stops at its
// step boundary. Other keys' sessions are untouched.
func (s *Service) EndKeySessions(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID) error {
	return s.endKeys(ctx, tx, accountID, keys, ReasonKeyRevoked)
}

// EndDisabledKeySessions is EndKeySessions for the keys' disabling (key_disabled). Disabling
// is reversible but a session is not paused: a paused session would hold its slot as a
// waiting one did, so it ends, and the key enabled again starts a new one.
func (s *Service) EndDisabledKeySessions(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID) error {
	return s.endKeys(ctx, tx, accountID, keys, ReasonKeyDisabled)
}

// endKeys ends, in tx, the live sessions of the account started with one of the keys, for
// reason.
func (s *Service) endKeys(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, keys []uuid.UUID, reason string) error {
	cause := make([]string, len(keys))
	for i, k := range keys {
		cause[i] = k.String()
	}
	target := "key " + strings.Join(cause, ", ")
	if len(keys) > 1 {
		target = "keys " + strings.Join(cause, ", ")
	}
	return s.endOrLeave(ctx, tx, target, func(tx *store.AgentTx, found *sessionCount) error {
		ids, err := found.add(tx.KeysLiveSessionIDs(ctx, accountID, keys))
		if err != nil {
			return err
		}
		return s.endEach(ctx, tx, accountID, ids, reason, target)
	})
}

// endOrLeave runs end, the ending of the sessions of a revocation (of cause: a key, a grant, a
// member), in a savepoint of the revocation's transaction tx. The agents never undo a
// revocation: when end fails (a lock timeout, River's insert, the sessions' update), its writes
// are rolled back to the savepoint, the failure is logged and counted (EndingsLeft, and its
// sessions in SessionsLeft), and the
// revocation commits all the same; the sweep of lapsed sessions (config agents.session_sweep)
// ends those sessions later, and each of their steps refuses to run meanwhile. Only a
// transaction that cannot go on at all (the savepoint neither started nor rolled back) is an
// error, which the revocation could not have committed either. end counts in found the
// sessions it looks up to end, which the warning names (sessions).
func (s *Service) endOrLeave(ctx context.Context, tx *store.AgentTx, cause string, end func(tx *store.AgentTx, found *sessionCount) error) error {
	sp, err := tx.Savepoint(ctx)
	if err != nil {
		return err
	}
	var found sessionCount
	err = end(sp.AgentTx, &found)
	if err == nil {
		return sp.Release(ctx)
	}
	if rerr := sp.Rollback(ctx); rerr != nil {
		return errors.Join(err, rerr)
	}
	s.endingsLeft.Add(1)
	s.sessionsLeft.Add(int64(found.n))
	s.log.Warn("agent: ending the sessions of a revocation failed; the revocation stands and the gateway's sweep of lapsed sessions will end them",
		"cause", cause, "sessions", found.value(), "within", s.cfg.SessionSweep, "err", err)
	return nil
}

// sessionCount counts the live sessions an ending of endOrLeave looked up to end: all of them
// are left to the sweep when the ending fails, since its writes are rolled back.
type sessionCount struct {
	n int
	// unknown is set when a look-up failed: n counts the sessions of the look-ups before it.
	unknown bool
}

// add counts the sessions of one look-up, and passes its answer on.
func (c *sessionCount) add(ids []uuid.UUID, err error) ([]uuid.UUID, error) {
	c.n += len(ids)
	c.unknown = c.unknown || err != nil
	return ids, err
}

// value is the count as the warning logs it: a number, "unknown", or "at least N" when a
// look-up failed after others found N.
func (c *sessionCount) value() any {
	switch {
	case !c.unknown:
		return c.n
	case c.n == 0:
		return "unknown"
	default:
		return "at least " + strconv.Itoa(c.n)
	}
}

// EndingsLeft is how many revocations (of a key, a grant, a member) had their ending of agent
// sessions fail in this process and left it to the sweep of lapsed sessions (endOrLeave): one
// for each such revocation, whether it had found one session, several or none. It counts
// revocations, not sessions: SessionsLeft counts those.
func (s *Service) EndingsLeft() int64 { return s.endingsLeft.Load() }

// SessionsLeft is how many live agent sessions the endings counted in EndingsLeft had found
// and left running until the sweep of lapsed sessions ends them: each revocation's count, as
// its warning gives it (a session left by two revocations counted twice; when a look-up of
// sessions failed, only those found before it, so a lower bound).
func (s *Service) SessionsLeft() int64 { return s.sessionsLeft.Load() }

// auditSessionsEnded is the audit log's action for the sessions a cause ended
// (audit.ActionAgentSessionsEnded of impl/web/audit; the tests check that the two agree).
const auditSessionsEnded = "agent.sessions_ended"

// endEach locks each of the account's sessions ids in tx and ends it for reason (endFor), and
// records, when it ended any, one entry in the account's audit log in tx: actor "tollgate",
// the cause as its target (the key, the member, the grant), and after it the reason, the count
// and the ids of the sessions ended, so that an operator can see why a session stopped.
func (s *Service) endEach(ctx context.Context, tx *store.AgentTx, accountID uuid.UUID, ids []uuid.UUID, reason, cause string) error {
	var ended []string
	for _, id := range ids {
		st, err := lockAccountSession(ctx, tx, accountID, id)
		if err != nil {
			return err
		}
		did, err := s.endFor(st, reason)
		if err != nil {
			return err
		}
		if did {
			ended = append(ended, id.String())
		}
	}
	if len(ended) == 0 {
		return nil
	}
	after, err := json.Marshal(map[string]any{"reason": reason, "count": len(ended), "sessions": ended})
	if err != nil {
		return err
	}
	return tx.RecordAudit(ctx, store.AuditEntry{AccountID: accountID, Actor: "tollgate", Action: auditSessionsEnded,
		Target: cause, After: after})
}

// endFor ends the locked session st for reason, the removal of its member or the revocation
// of its key (EndMemberSessions, EndKeySessions), and reports whether it did: a session
// stopping already, or ended since it was listed, keeps its reason.
func (s *Service) endFor(st *sessionTx, reason string) (bool, error) {
	switch st.row.State {
	case StateReady, StateProvisioning:
		if err := st.end(StateStopped, reason); err != nil {
			return false, err
		}
		return true, st.save()
	case StateBusy:
		return true, s.stopSession(st, reason, uuid.Nil)
	}
	return false, nil
}

// ListSlots lists the slots of an account (nil: of every account; a zero id: ErrNotFound) with
// their live sessions.
func (s *Service) ListSlots(ctx context.Context, accountID *uuid.UUID) ([]SlotAssignment, error) {
	acct, err := scope(accountID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.ListAgentSlots(ctx, acct)
	if err != nil {
		return nil, err
	}
	out := make([]SlotAssignment, len(rows))
	for i, r := range rows {
		out[i] = SlotAssignment{AccountID: r.AccountID, Account: r.AccountName, Slot: r.Name, SessionID: idText(r.SessionID),
			SessionState: r.SessionState, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

func ticketView(t store.AgentTicket) Ticket {
	return Ticket{ID: t.ID.String(), AccountID: t.AccountID, SessionID: idText(t.SessionID), Title: t.Title, Body: t.Body,
		State: t.State, OpenedBy: t.OpenedBy, CreatedAt: t.CreatedAt, ClosedAt: t.ClosedAt}
}

// OpenTicket opens a ticket of the account (an operator's, or an agent's through
// open_ticket), optionally about one of its sessions.
func (s *Service) OpenTicket(ctx context.Context, accountID uuid.UUID, sessionID *uuid.UUID, title, body, openedBy string) (Ticket, error) {
	if _, err := tenantID(accountID); err != nil {
		return Ticket{}, err
	}
	title = strings.TrimSpace(title)
	if title == "" {
		return Ticket{}, apierror.Invalid("title", "a ticket needs a title")
	}
	p := store.NewAgentTicket{ID: uuid.New(), AccountID: accountID, Title: truncate(store.CleanText(title), 200), Body: store.CleanText(body), OpenedBy: openedBy}
	if sessionID != nil {
		if _, err := s.q.GetAccountAgentSession(ctx, accountID, *sessionID); err != nil {
			return Ticket{}, notFound(err)
		}
		p.SessionID = pgUUID(*sessionID)
	}
	t, err := s.q.InsertAgentTicket(ctx, p)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return Ticket{}, ErrNotFound
	}
	if err != nil {
		return Ticket{}, err
	}
	return ticketView(t), nil
}

// CloseTicket closes an open ticket (accountID nil: of any account). ErrNotFound for a ticket
// not of the account (and for a zero account id); a conflict when it is already closed.
func (s *Service) CloseTicket(ctx context.Context, accountID *uuid.UUID, ticketID string) (Ticket, error) {
	if _, err := scope(accountID); err != nil {
		return Ticket{}, err
	}
	id, err := parseID(ticketID)
	if err != nil {
		return Ticket{}, err
	}
	var t store.AgentTicket
	if accountID == nil {
		t, err = s.q.GetAgentTicket(ctx, id) // the operator's: any account's
	} else {
		t, err = s.q.GetAccountAgentTicket(ctx, *accountID, id)
	}
	if err != nil {
		return Ticket{}, notFound(err)
	}
	owner := t.AccountID // the operator's: the ticket's own account
	if accountID != nil {
		owner = *accountID
	}
	closed, err := s.q.CloseAgentTicket(ctx, owner, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Ticket{}, conflictf("ticket %s is already closed", id)
	}
	if err != nil {
		return Ticket{}, err
	}
	return ticketView(closed), nil
}

// ListTickets lists tickets (accountID nil: of every account; a zero id: ErrNotFound) in state (open, closed; "" or
// "all": any), newest first, at most limit (1 to 500; 0: 50).
func (s *Service) ListTickets(ctx context.Context, accountID *uuid.UUID, state string, limit int) ([]Ticket, error) {
	return s.listTickets(ctx, accountID, uuid.Nil, state, limit)
}

// listTickets is ListTickets, of the sessions key started only unless it is uuid.Nil.
func (s *Service) listTickets(ctx context.Context, accountID *uuid.UUID, key uuid.UUID, state string, limit int) ([]Ticket, error) {
	switch state {
	case "all":
		state = ""
	case "", "open", "closed":
	default:
		return nil, apierror.Invalid("state", "'state' is open, closed or all")
	}
	acct, err := scope(accountID)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.ListAgentTickets(ctx, acct, key, state, int32(listLimit(limit)))
	if err != nil {
		return nil, err
	}
	out := make([]Ticket, len(rows))
	for i, t := range rows {
		out[i] = ticketView(t)
	}
	return out, nil
}

// EndGrantSessions ends, in tx, the live sessions of the account that the connected app with
// the OAuth grant started through approved agent_spawns (access_revoked), for the grant's
// revocation, as EndKeySessions does for a key's: a ready or provisioning session is stopped
// at once and its slot freed, a busy one stops at its step boundary.
func (s *Service) EndGrantSessions(ctx context.Context, tx *store.AgentTx, accountID, grant uuid.UUID) error {
	target := "grant " + grant.String()
	return s.endOrLeave(ctx, tx, target, func(tx *store.AgentTx, found *sessionCount) error {
		ids, err := found.add(tx.GrantLiveSessionIDs(ctx, accountID, grant))
		if err != nil {
			return err
		}
		return s.endEach(ctx, tx, accountID, ids, ReasonAccessRevoked, target)
	})
}

// sweepLapsed ends the live sessions whose right to run lapsed with nobody ending them
// (endLapsed): a key that reached its expiry, a grant past its lifetime, and whatever a process
// without the agents revoked or disabled, or whose revocation's own ending of them failed
// (endOrLeave) (one sweep of Run's, every config agents.session_sweep).
func (s *Service) sweepLapsed(ctx context.Context) {
	n, err := s.endLapsed(ctx)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("agent: ending the sessions whose key or grant lapsed failed", "err", err)
	}
	if n > 0 {
		s.log.Info("agent: sessions ended, their key or grant lapsed", "count", n)
	}
}

// lapsedCause is what a group of lapsed sessions ends for: their account, the reason, and the
// key or grant.
type lapsedCause struct {
	account uuid.UUID
	reason  string
	target  string
}

// endLapsed ends the live sessions, not stopping yet, whose connected app's grant no longer
// works (access_revoked), whose key was revoked, disabled or has expired (key_revoked,
// key_disabled, key_expired), or whose member who started them on the console left the
// account (member_removed), as their next step would, so that one waiting for a message
// frees its slot: one transaction, and one audit entry, per account, reason and key or grant.
// It returns how many it ended, and the failures of the groups it could not end.
func (s *Service) endLapsed(ctx context.Context) (int, error) {
	rows, err := s.q.LapsedSessions(ctx)
	if err != nil {
		return 0, err
	}
	var order []lapsedCause
	groups := map[lapsedCause][]uuid.UUID{}
	for _, r := range rows {
		c := lapsedCause{account: r.AccountID, reason: r.Reason, target: "key " + idText(r.KeyID)}
		switch r.Reason {
		case ReasonAccessRevoked:
			c.target = "grant " + idText(r.OauthGrantID)
		case ReasonMemberRemoved:
			c.target = "member " + idText(r.StartedByUser)
		}
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], r.ID)
	}
	// A group that fails is left to the next sweep and the others go on: stopping at the
	// first failure would leave every later account's sessions running, round after round,
	// behind one whose ending keeps failing.
	ended := 0
	var failed []error
	for _, c := range order {
		err := s.inTx(ctx, func(tx *store.AgentTx) error {
			return s.endEach(ctx, tx, c.account, groups[c], c.reason, c.target)
		})
		if err != nil {
			if ctx.Err() != nil {
				return ended, err
			}
			failed = append(failed, fmt.Errorf("account %s, %s (%s): %w", c.account, c.target, c.reason, err))
			continue
		}
		ended += len(groups[c])
	}
	return ended, errors.Join(failed...)
}
