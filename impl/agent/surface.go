package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/store"
)

// requestHash identifies a request for its Idempotency-Key: the operation and its arguments.
func requestHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// idempotent runs a command in one transaction under its Idempotency-Key: the same key with
// the same request within 24 hours gets the first answer again (into out), the same key with
// another request a conflict naming the key. Requests with one key are serialised. by is the
// API key that sends the command (uuid.Nil: none), which its hash includes: the keys are per
// account, and another API key of the account that reuses one gets a conflict saying so (the
// same whatever its request, so that it learns nothing of the other key's), not the first
// answer, which its own request might have been refused. Another account's keys are its own.
// fn returns the command to record with its answer, or nil, when there is no key, to record
// none (a request that changed nothing).
func (s *Service) idempotent(ctx context.Context, account, by uuid.UUID, key, hash string, out any, fn func(tx *store.AgentTx) (*store.NewAgentCommand, error)) error {
	return s.inTx(ctx, func(tx *store.AgentTx) error {
		if key != "" {
			if err := tx.LockAgentKey(ctx, account.String()+":"+key); err != nil {
				return err
			}
			if _, err := tx.ForgetOldAgentCommandKey(ctx, account, key); err != nil {
				return err
			}
			c, err := tx.GetAgentCommandByKey(ctx, account, key)
			if err == nil {
				if c.KeyID.Valid && uuid.UUID(c.KeyID.Bytes) != by {
					return conflictf("the Idempotency-Key '%s' was already used by another API key of this account (the keys are per account): send this request with another Idempotency-Key", key)
				}
				if c.RequestHash != hash {
					return conflictf("the Idempotency-Key '%s' was already used with a different request", key)
				}
				return json.Unmarshal(c.Answer, out)
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		cmd, err := fn(tx)
		if err != nil || cmd == nil {
			return err // nil: nothing to record (no command, no key)
		}
		if cmd.Answer, err = json.Marshal(out); err != nil {
			return err
		}
		cmd.AccountID, cmd.RequestHash, cmd.KeyID = account, hash, pgUUID(by)
		if key != "" {
			cmd.IdempotencyKey = &key
		}
		return tx.InsertAgentCommand(ctx, *cmd)
	})
}

// slotFor is the caller's slot called name, locked; ErrNotFound when the account has none.
func slotFor(ctx context.Context, q *store.AgentQueries, account uuid.UUID, name string) (store.AgentSlot, error) {
	if !slotNameStorable(name) {
		return store.AgentSlot{}, ErrNotFound
	}
	sl, err := q.GetAgentSlotForUpdate(ctx, account, name)
	return sl, notFound(err)
}

// slotNameStorable reports whether a slot could be named name: PostgreSQL's text holds neither
// NUL nor bytes that are not UTF-8, so no slot is, and such a name (from a path or a body) is
// nobody's slot, answered as any slot that is not the caller's rather than sent to the
// database, which would refuse it with an error.
func slotNameStorable(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}

// liveSession is the live session of the account's slot, locked (ok false when it has none).
func liveSession(ctx context.Context, tx *store.AgentTx, account, slot uuid.UUID) (*sessionTx, bool, error) {
	row, err := tx.LiveSlotSessionForUpdate(ctx, account, slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &sessionTx{ctx: ctx, tx: tx, row: row, now: time.Now()}, true, nil
}

// noLiveSession is the conflict of a message or stop for a slot whose session has ended (or
// that never had one). A key with limits is told of an ended session only when it started it
// (sees): another's end (its state and reason) is not its to read, as GET /v1/agents shows it
// the slot without that session.
func noLiveSession(ctx context.Context, p auth.Principal, q *store.AgentQueries, slot store.AgentSlot) error {
	last, err := q.LatestSlotSession(ctx, p.AccountID, slot.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return conflictf("slot '%s' has no session; start one with POST /v1/agents", slot.Name)
	}
	if err != nil {
		return err
	}
	if !sees(p, last.KeyID) {
		return conflictf("slot '%s' has no live session, and this key started none there; start one with POST /v1/agents", slot.Name)
	}
	return conflictf("the session in slot '%s' has ended (%s); start a new one with POST /v1/agents", slot.Name, endedText(last))
}

// busySlot is the conflict of a spawn on a slot whose live session has not ended. It names
// that session and how to stop it, unless the caller is a key with limits that did not start
// it (another key did, or a member on the console): such a key neither sees that session
// (sees) nor may stop it (mayDrive), so it is told neither its id nor to stop it.
func busySlot(p auth.Principal, slot string, live store.AgentSession) error {
	if !sees(p, live.KeyID) {
		return conflictf("slot '%s' already runs a session that this key did not start (another key did, or a member on the web console), and this key has limits (a credit cap, a model subset or an expiry): it may neither follow nor stop it; spawn on another slot, or ask whoever started it to stop it", slot)
	}
	return conflictf("slot '%s' already runs session %s (%s); stop it first with DELETE /v1/agents/%s", slot, live.ID, live.State, slot)
}

// spawnParams are a new session's settings, resolved against the configuration.
type spawnParams struct {
	model, purpose, agentName, environment, profile string
	maxTurns                                        int
	maxSpend                                        int64
	maxDuration                                     time.Duration
}

// resolveSpawn fills a spawn's defaults from the configuration and checks what it names;
// allows is the requesting key's model subset (nil: checked when the action was requested).
func (s *Service) resolveSpawn(ctx context.Context, q *store.AgentQueries, account uuid.UUID, a SpawnAction, allows func(string) bool) (spawnParams, error) {
	p := spawnParams{model: a.Model, purpose: strings.TrimSpace(a.Purpose), agentName: a.AgentName,
		environment: a.TargetEnvironment, profile: a.ResourceProfile}
	if p.profile == "" {
		p.profile = s.cfg.DefaultProfile
	}
	prof, ok := s.cfg.Profiles[p.profile]
	if !ok {
		return p, apierror.Invalid("resource_profile", "unknown resource profile '%s' (configured: %s)", p.profile, names(s.cfg.Profiles))
	}
	if p.environment == "" {
		p.environment = s.cfg.DefaultEnvironment
	}
	if _, ok := s.cfg.Environments[p.environment]; !ok {
		return p, apierror.Invalid("target_environment", "unknown target environment '%s' (configured: %s)", p.environment, names(s.cfg.Environments))
	}
	if p.model == "" {
		p.model = s.cfg.DefaultModel
	}
	if p.model == "" {
		return p, apierror.Invalid("model", "no chat model is configured for agents")
	}
	// Refused by the key's model subset, the model is "not available to this key", whether the
	// account has it or not (a key learns nothing of the account's other models); else by the
	// account's. A defaulted model is named as the default, for the caller to name another.
	unavailable := func(to, which string) error {
		if a.Model == "" {
			return apierror.Invalid("model", "the agents' default model '%s' is not available to this %s; name %s with 'model'", p.model, to, which)
		}
		return apierror.Invalid("model", "model '%s' is not available to this %s", p.model, to)
	}
	if allows != nil && !allows(p.model) {
		return p, unavailable("key", "a chat model the key may use")
	}
	m, ok := s.models.Model(p.model)
	if ok {
		has, err := q.AccountHasModel(ctx, account, p.model)
		if err != nil {
			return p, err
		}
		ok = has
	}
	if !ok {
		return p, unavailable("account", "one of its chat models")
	}
	if m.Family != config.FamilyChat {
		return p, apierror.Invalid("model", "model '%s' is a Messages model; agents run on chat models", p.model)
	}
	// A model whose every expert takes only accounts with an upstream key of their own, which
	// this account has none of, is refused here as its requests are (403 upstream_key_required),
	// rather than accepted and the session failed at its first model call.
	if s.exchange != nil {
		if err := s.exchange.RequireReachable(ctx, account, p.model); err != nil {
			return p, err
		}
	}
	p.maxTurns, p.maxSpend, p.maxDuration = prof.MaxTurns, prof.MaxSpendMicros, prof.MaxDuration
	// A spawn may lower its profile's bounds, never raise them: the profile is the operator's.
	if a.MaxTurns != nil {
		if *a.MaxTurns < 1 || *a.MaxTurns > prof.MaxTurns {
			return p, apierror.Invalid("max_turns", "'max_turns' must be from 1 to %d (the '%s' profile's bound)", prof.MaxTurns, p.profile)
		}
		p.maxTurns = *a.MaxTurns
	}
	if a.MaxSpend != nil {
		if *a.MaxSpend < 1 || *a.MaxSpend > prof.MaxSpendMicros {
			return p, apierror.Invalid("max_spend", "'max_spend' must be from 1 to %d micro-units (the '%s' profile's bound)", prof.MaxSpendMicros, p.profile)
		}
		p.maxSpend = *a.MaxSpend
	}
	return p, nil
}

func names[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// starter is who a session acts for, each uuid.Nil when not: the API key, the OAuth grant of
// the connected app whose approved agent_spawn started it, and the member who started it on the
// console. The session ends when the one it records stops working (principal).
type starter struct{ key, grant, user uuid.UUID }

// createSession creates a session in the slot, with the prompt as its first message, and the
// job that provisions it, recording by.
func (s *Service) createSession(ctx context.Context, tx *store.AgentTx, account uuid.UUID, by starter, slot store.AgentSlot, p spawnParams, prompt string, command uuid.UUID) (_ store.AgentSession, err error) {
	params := store.NewAgentSession{
		ID: uuid.New(), AccountID: account, SlotID: pgUUID(slot.ID), SlotName: slot.Name, Model: p.model,
		Purpose: store.CleanText(p.purpose), AgentName: store.CleanText(p.agentName), TargetEnvironment: p.environment, ResourceProfile: p.profile,
		MaxTurns: int32(p.maxTurns), MaxSpendMicros: p.maxSpend, MaxDurationSeconds: int32(max(p.maxDuration/time.Second, 1)),
		KeyID: pgUUID(by.key), OauthGrantID: pgUUID(by.grant), StartedByUser: pgUUID(by.user),
	}
	// The session's trace starts here (trace.go); its steps continue it from the row.
	spanCtx, span := startInvokeAgent(ctx, params)
	defer func() { endSpan(span, err) }()
	params.TraceParent = traceparent(spanCtx)
	row, err := tx.InsertAgentSession(ctx, params)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return row, conflictf("slot '%s' already runs a session", slot.Name)
		}
		return row, err
	}
	st := &sessionTx{ctx: ctx, tx: tx, row: row, now: time.Now()}
	if err := st.event("state", map[string]string{"from": "", "to": StateProvisioning}); err != nil {
		return row, err
	}
	if strings.TrimSpace(prompt) != "" {
		if err := tx.InsertAgentMessage(ctx, store.NewAgentMessage{ID: uuid.New(), AccountID: account, SessionID: row.ID, Text: store.CleanText(prompt)}); err != nil {
			return row, err
		}
	}
	if err := st.save(); err != nil {
		return row, err
	}
	return st.row, s.insert(ctx, tx, startArgs{SessionID: row.ID, CommandID: command}, nil)
}

// Spawn starts a session in the caller's slot with prompt as its first message (POST
// /v1/agents). The slot must have no live session (a conflict naming it otherwise).
func (s *Service) Spawn(ctx context.Context, p auth.Principal, slot, prompt, idempotencyKey string) (SpawnResult, error) {
	return s.SpawnWith(ctx, p, slot, prompt, idempotencyKey, SpawnAction{})
}

// SpawnForMember is Spawn for a member of p's account on the console (p has no key): the
// session records the member (user), and each of its steps checks that they are still in the
// account, so that it does not outlive their membership.
func (s *Service) SpawnForMember(ctx context.Context, p auth.Principal, user uuid.UUID, slot, prompt string) (SpawnResult, error) {
	if user == uuid.Nil {
		return SpawnResult{}, errors.New("agent: a member's spawn names no member")
	}
	return s.spawn(ctx, p, user, slot, prompt, "", SpawnAction{})
}

// SpawnWith is Spawn with the settings agent_spawn takes (its Purpose is the prompt's first
// line, whatever set): a model the key may use, an environment, a resource profile, a name, and
// bounds that may lower the profile's, each checked as agent_spawn's are (trial h13 D5: POST
// /v1/agents left them out without a word).
func (s *Service) SpawnWith(ctx context.Context, p auth.Principal, slot, prompt, idempotencyKey string, settings SpawnAction) (SpawnResult, error) {
	return s.spawn(ctx, p, uuid.Nil, slot, prompt, idempotencyKey, settings)
}

// spawn is SpawnWith for the member user of p's account (uuid.Nil: none, a key's or an app's).
func (s *Service) spawn(ctx context.Context, p auth.Principal, user uuid.UUID, slot, prompt, idempotencyKey string, settings SpawnAction) (SpawnResult, error) {
	if strings.TrimSpace(slot) == "" {
		return SpawnResult{}, apierror.Invalid("slot", "'slot' is required: the name of one of your agent slots")
	}
	if err := checkText("prompt", prompt); err != nil {
		return SpawnResult{}, err
	}
	if _, err := tenantOf(p); err != nil {
		return SpawnResult{}, err
	}
	var out SpawnResult
	settings.Purpose = firstLine(prompt)
	asked, err := json.Marshal(settings)
	if err != nil {
		return SpawnResult{}, err
	}
	err = s.idempotent(ctx, p.AccountID, p.KeyID, idempotencyKey, requestHash("spawn", p.KeyID.String(), slot, prompt, string(asked)), &out, func(tx *store.AgentTx) (*store.NewAgentCommand, error) {
		// The request is checked before the slot: a spawn with a bad setting (a bound above
		// its profile's, an unknown profile, a model the key may not use) is a 400 whatever
		// the slot runs, not a 409 that, once the slot is free, turns into the 400.
		params, err := s.resolveSpawn(ctx, tx.AgentQueries, p.AccountID, settings, p.AllowsModel)
		if err != nil {
			return nil, err
		}
		if err := s.fitsContext("prompt", params.model, prompt); err != nil {
			return nil, err
		}
		sl, err := slotFor(ctx, tx.AgentQueries, p.AccountID, slot)
		if err != nil {
			return nil, err
		}
		if live, ok, err := liveSession(ctx, tx, p.AccountID, sl.ID); err != nil {
			return nil, err
		} else if ok {
			return nil, busySlot(p, slot, live.row)
		}
		cmd := uuid.New()
		row, err := s.createSession(ctx, tx, p.AccountID, starter{key: p.KeyID, grant: grantOf(p), user: user}, sl, params, prompt, cmd)
		if err != nil {
			return nil, err
		}
		out = SpawnResult{CommandID: cmd.String(), Slot: slot, SessionID: row.ID.String(), Status: StateProvisioning}
		return &store.NewAgentCommand{ID: cmd, SlotID: pgUUID(sl.ID), SessionID: pgUUID(row.ID), Kind: "spawn", Status: CommandAccepted}, nil
	})
	return out, err
}

// maxPurpose is the most bytes of a prompt's first line that a session's purpose keeps.
const maxPurpose = 200

// firstLine is a prompt's first line, at most maxPurpose bytes: the purpose of a session spawned
// by POST /v1/agents. A line cut short ends at a word where one ends near the cut, and with an
// ellipsis, so that a list does not show a clipped word as if it were the whole purpose
// (newcomer trial: "… ORDER BY units DESC" read "… ORDE").
func firstLine(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.TrimSpace(line)
	const ellipsis = "…"
	cut, shortened := bound(line, maxPurpose-len(ellipsis))
	if !shortened {
		return line
	}
	if i := strings.LastIndexByte(cut, ' '); i >= len(cut)-40 && i > 0 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ") + ellipsis
}

// MaxQueuedMessages bounds the messages a busy session keeps for its next turn.
const MaxQueuedMessages = 16

// MaxTextChars bounds a spawn's prompt and a message, in characters (the contract's maxLength,
// checked here too for the callers that do not come through it: the web console).
const MaxTextChars = 262_144

// checkText refuses a prompt or message above MaxTextChars, naming field.
func checkText(field, text string) error {
	if len(text) > MaxTextChars && utf8.RuneCountInString(text) > MaxTextChars {
		return apierror.Invalid(field, "'%s' is longer than %d characters", field, MaxTextChars)
	}
	return nil
}

// fitsContext refuses a message (or a spawn's prompt) that alone is above the context window of
// the session's model, counted at four bytes a token: its turn's model call would be refused
// (by the provider's count, or by the gateway's own check of a more certain count,
// convert.ContextBytesPerToken), and the session would fail with it (trial h13 D8: a
// 262,144-character message of emoji was accepted, and failed its session). The count is
// closer than the inference check's, which leaves a request near the window to the provider:
// a refused message only asks for a shorter one, a refused model call ends the session.
// Messages that only together pass the window are the model call's to refuse.
func (s *Service) fitsContext(field, model, text string) error {
	if s.models == nil {
		return nil
	}
	m, ok := s.models.Model(model)
	if !ok || m.ContextTokens <= 0 {
		return nil
	}
	if tokens := len(text) / 4; tokens > m.ContextTokens {
		return apierror.Invalid(field, "'%s' is about %d tokens, more than the context window of the session's model %s (%d tokens)", field, tokens, model, m.ContextTokens)
	}
	return nil
}

// send queues a message for a live session, making a ready one busy; a busy session takes at
// most MaxQueuedMessages.
func (s *Service) send(st *sessionTx, text string) (uuid.UUID, bool, error) {
	switch st.row.State {
	case StateStopping:
		return uuid.Nil, false, conflictf("the session in slot '%s' is stopping (%s)", st.row.SlotName, st.row.EndReason)
	case StateStopped, StateFailed:
		return uuid.Nil, false, conflictf("the session in slot '%s' has ended (%s); start a new one with POST /v1/agents", st.row.SlotName, endedText(st.row))
	}
	if st.row.State != StateReady {
		// Queued messages are kept in the database, unbilled until a turn takes them: a
		// session holds a bounded number (trial h5: 146 MB queued by five requests).
		n, err := st.tx.CountQueuedAgentMessages(st.ctx, st.row.ID)
		if err != nil {
			return uuid.Nil, false, err
		}
		if n >= MaxQueuedMessages {
			return uuid.Nil, false, conflictf("the session in slot '%s' has %d messages waiting for its next turn already; send more when the turn has ended", st.row.SlotName, n)
		}
	}
	if err := s.fitsContext("text", st.row.Model, text); err != nil {
		return uuid.Nil, false, err
	}
	id := uuid.New()
	if err := st.tx.InsertAgentMessage(st.ctx, store.NewAgentMessage{ID: id, AccountID: st.row.AccountID, SessionID: st.row.ID, Text: store.CleanText(text)}); err != nil {
		return uuid.Nil, false, err
	}
	if st.row.State != StateReady {
		return id, true, nil // taken at the next turn (provisioning: at the first)
	}
	if err := st.move(StateBusy, ""); err != nil {
		return uuid.Nil, false, err
	}
	if err := s.enqueueStep(st); err != nil {
		return uuid.Nil, false, err
	}
	return id, false, st.save()
}

// SendMessage sends text to the live session of the caller's slot (POST
// /v1/agents/{slot}/messages): a ready session starts a turn; a busy one takes it at its next
// turn (Queued). A slot whose session has ended answers a conflict naming the end.
func (s *Service) SendMessage(ctx context.Context, p auth.Principal, slot, text, idempotencyKey string) (MessageResult, error) {
	return s.sendMessage(ctx, p, slot, uuid.Nil, text, idempotencyKey)
}

// SendSessionMessage is SendMessage to the session with id only: when the slot's live session is
// another one (the session ended, or its slot was given back and another session started in a
// slot of the same name), it answers a conflict and sends nothing (a page of that session, trial
// h13 D6).
func (s *Service) SendSessionMessage(ctx context.Context, p auth.Principal, slot string, session uuid.UUID, text string) (MessageResult, error) {
	return s.sendMessage(ctx, p, slot, session, text, "")
}

// sendMessage is SendMessage, to session only unless it is uuid.Nil.
func (s *Service) sendMessage(ctx context.Context, p auth.Principal, slot string, session uuid.UUID, text, idempotencyKey string) (MessageResult, error) {
	if strings.TrimSpace(text) == "" {
		return MessageResult{}, apierror.Invalid("text", "'text' is required: the message for the agent")
	}
	if err := checkText("text", text); err != nil {
		return MessageResult{}, err
	}
	if _, err := tenantOf(p); err != nil {
		return MessageResult{}, err
	}
	var out MessageResult
	err := s.idempotent(ctx, p.AccountID, p.KeyID, idempotencyKey, requestHash("message", p.KeyID.String(), slot, text), &out, func(tx *store.AgentTx) (*store.NewAgentCommand, error) {
		sl, err := slotFor(ctx, tx.AgentQueries, p.AccountID, slot)
		if err != nil {
			return nil, err
		}
		st, ok, err := liveSession(ctx, tx, p.AccountID, sl.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, noLiveSession(ctx, p, tx.AgentQueries, sl)
		}
		if err := isSession(st, session); err != nil {
			return nil, err
		}
		if err := mayDrive(p, st.row.KeyID, driveMessage); err != nil {
			return nil, err
		}
		id, queued, err := s.send(st, text)
		if err != nil {
			return nil, err
		}
		out = MessageResult{MessageID: id.String(), Slot: slot, SessionID: st.row.ID.String(), Queued: queued}
		return &store.NewAgentCommand{ID: id, SlotID: pgUUID(sl.ID), SessionID: pgUUID(st.row.ID), Kind: "message", Status: MessageQueued}, nil
	})
	return out, err
}

// isSession refuses the live session st when the caller addressed another one (want; uuid.Nil
// addresses whichever is live).
func isSession(st *sessionTx, want uuid.UUID) error {
	if want == uuid.Nil || st.row.ID == want {
		return nil
	}
	return conflictf("session %s is no longer the live session of its slot (session %s is): nothing was done", want, st.row.ID)
}

// Verbs of what a key drives a session to do, for mayDrive's refusal.
const (
	driveMessage = "send messages only to"
	driveStop    = "stop only"
)

// mayDrive refuses a key with limits (a credit cap, a model subset, an expiry) the messages to
// a session that another key started, and its stop (verb says which, driveMessage or
// driveStop): a session's turns run under the limits of the key that started it and are billed
// to that key, so a limited key prompting another key's session would spend past its own
// limits, on models outside its own. A key without limits may message any session of its
// account (it could start one with the account's whole reach anyway).
func mayDrive(p auth.Principal, sessionKey pgtype.UUID, verb string) error {
	if sees(p, sessionKey) {
		return nil
	}
	return apierror.Forbidden("this session was not started by this key (another key or a member on the web console started it), and this key has limits (a credit cap, a model subset or an expiry): it may %s the sessions it started", verb)
}

// sees reports whether the caller may see a session that key started, or an approval that key
// asked for. A key with limits (a credit cap, a model subset or an expiry) sees only its own: the
// sessions it started (their events, and the tickets they opened) and the approvals it asked
// for, as it drives only those (mayDrive); the rest of its account's are answered as if they
// were not there (ErrNotFound, as another account's), and left out of its listings. Any other
// caller (a key without limits, a member on the console, a connected app signed in with OAuth)
// sees every one of its account's.
func sees(p auth.Principal, key pgtype.UUID) bool {
	return p.Limits == nil || fromPG(key) == p.KeyID
}

// ownKey is the key to whose sessions and approvals the caller's listings are narrowed (sees):
// the caller's key when it has limits, else uuid.Nil (every one of the account's).
func ownKey(p auth.Principal) uuid.UUID {
	if p.Limits == nil {
		return uuid.Nil
	}
	return p.KeyID
}

// stopSession asks a live session to stop with reason: a provisioning or ready one stops at
// once (its stop job), a busy one at its next step boundary. A session stopping already keeps
// its state and reason; its new stop job finishes it when no step is in flight (stoppedIdle:
// a stop whose job was lost), else the step in flight ends it.
func (s *Service) stopSession(st *sessionTx, reason string, command uuid.UUID) error {
	finish := st.row.State == StateReady || st.row.State == StateProvisioning
	if st.row.State == StateStopping {
		idle, err := stoppedIdle(st)
		if err != nil {
			return err
		}
		finish = idle
	} else {
		if err := st.move(StateStopping, reason); err != nil {
			return err
		}
		if err := st.save(); err != nil {
			return err
		}
	}
	return s.insert(st.ctx, st.tx, stopArgs{SessionID: st.row.ID, CommandID: command, Finish: finish}, nil)
}

// stoppedIdle reports whether the stopping session st entered stopping with no step in flight
// (from ready or provisioning), which no step will end: a step in flight, or one that ran
// after, ends a stopping session in the transaction that appends its events, so the move to
// stopping is the session's last event.
func stoppedIdle(st *sessionTx) (bool, error) {
	evs, err := st.tx.ListAgentEvents(st.ctx, st.row.AccountID, st.row.ID, st.row.NextSeq-2, 1)
	if err != nil || len(evs) == 0 {
		return false, err
	}
	var moved struct{ From, To string }
	if evs[0].Kind != "state" || json.Unmarshal(evs[0].Data, &moved) != nil || moved.To != StateStopping {
		return false, nil
	}
	return moved.From == StateReady || moved.From == StateProvisioning, nil
}

// Stop stops the live session of the caller's slot (DELETE /v1/agents/{slot}), asynchronously:
// the answer's status is "stopping". A key with limits stops only the sessions it started, as
// it messages only those (mayDrive).
func (s *Service) Stop(ctx context.Context, p auth.Principal, slot, idempotencyKey string) (StopResult, error) {
	return s.stop(ctx, p, slot, uuid.Nil, idempotencyKey)
}

// StopSession is Stop of the session with id only: when the slot's live session is another one,
// it answers a conflict and stops nothing (a page of that session, trial h13 D6).
func (s *Service) StopSession(ctx context.Context, p auth.Principal, slot string, session uuid.UUID) (StopResult, error) {
	return s.stop(ctx, p, slot, session, "")
}

// stop is Stop, of session only unless it is uuid.Nil.
func (s *Service) stop(ctx context.Context, p auth.Principal, slot string, session uuid.UUID, idempotencyKey string) (StopResult, error) {
	if _, err := tenantOf(p); err != nil {
		return StopResult{}, err
	}
	var out StopResult
	err := s.idempotent(ctx, p.AccountID, p.KeyID, idempotencyKey, requestHash("stop", p.KeyID.String(), slot), &out, func(tx *store.AgentTx) (*store.NewAgentCommand, error) {
		sl, err := slotFor(ctx, tx.AgentQueries, p.AccountID, slot)
		if err != nil {
			return nil, err
		}
		st, ok, err := liveSession(ctx, tx, p.AccountID, sl.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, noLiveSession(ctx, p, tx.AgentQueries, sl)
		}
		if err := isSession(st, session); err != nil {
			return nil, err
		}
		if err := mayDrive(p, st.row.KeyID, driveStop); err != nil {
			return nil, err
		}
		// A stop of a session that is stopping already answers the stop under way (its first
		// command) and changes nothing: no command, no job, no state event. With an
		// Idempotency-Key, the key keeps that answer (a command done at once). Only when no stop
		// command is under way (the session stops for a bound or a revocation, or its stop
		// command failed) is the stop recorded and carried out as a new one.
		if st.row.State == StateStopping {
			under, err := tx.FirstLiveAgentStopCommand(ctx, p.AccountID, st.row.ID)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, err
			}
			if err == nil {
				out = StopResult{CommandID: under.ID.String(), Slot: slot, SessionID: st.row.ID.String(), Status: StateStopping, Repeated: true}
				if idempotencyKey == "" {
					return nil, nil
				}
				return &store.NewAgentCommand{ID: uuid.New(), SlotID: pgUUID(sl.ID), SessionID: pgUUID(st.row.ID), Kind: "stop", Status: CommandDone}, nil
			}
		}
		cmd := uuid.New()
		if err := s.stopSession(st, ReasonUserStop, cmd); err != nil {
			return nil, err
		}
		out = StopResult{CommandID: cmd.String(), Slot: slot, SessionID: st.row.ID.String(), Status: StateStopping}
		return &store.NewAgentCommand{ID: cmd, SlotID: pgUUID(sl.ID), SessionID: pgUUID(st.row.ID), Kind: "stop", Status: CommandAccepted}, nil
	})
	return out, err
}

// Overview is every slot of the caller's account with its current (or last) session (GET
// /v1/agents); a key with limits is shown only a session it started (sees): a slot whose
// session another key started is listed without it. ErrNotFound for a principal without an
// account.
func (s *Service) Overview(ctx context.Context, p auth.Principal) ([]SlotView, error) {
	acct, err := tenantOf(p)
	if err != nil {
		return nil, err
	}
	slots, err := s.q.ListAgentSlots(ctx, &acct)
	if err != nil {
		return nil, err
	}
	out := make([]SlotView, len(slots))
	for i, sl := range slots {
		out[i].Slot = sl.Name
		row, err := s.q.LatestSlotSession(ctx, acct, sl.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !sees(p, row.KeyID) {
			continue
		}
		v := view(row)
		out[i].Session = &v
	}
	return out, nil
}

// SlotSession is the current (or last) session of the caller's slot: ErrNotFound for a slot
// that is not the caller's, a conflict for one that never had a session, and for a key with
// limits a refusal (403) when another key started it (sees).
func (s *Service) SlotSession(ctx context.Context, p auth.Principal, slot string) (SessionView, error) {
	if _, err := tenantOf(p); err != nil {
		return SessionView{}, err
	}
	if !slotNameStorable(slot) {
		return SessionView{}, ErrNotFound
	}
	sl, err := s.q.GetAgentSlot(ctx, p.AccountID, slot)
	if err != nil {
		return SessionView{}, notFound(err)
	}
	row, err := s.q.LatestSlotSession(ctx, p.AccountID, sl.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return SessionView{}, conflictf("slot '%s' has no session; start one with POST /v1/agents", slot)
	}
	if err != nil {
		return SessionView{}, err
	}
	if !sees(p, row.KeyID) {
		return SessionView{}, apierror.Forbidden("the session in slot '%s' was not started by this key (another key or a member on the web console started it), and this key has limits (a credit cap, a model subset or an expiry): it may follow only the sessions it started", slot)
	}
	return view(row), nil
}

// session is the caller's session with id, one it sees (sees): another key's session is
// ErrNotFound to a key with limits.
func (s *Service) session(ctx context.Context, p auth.Principal, sessionID string) (store.AgentSession, error) {
	row, err := s.accountSession(ctx, p, sessionID)
	if err == nil && !sees(p, row.KeyID) {
		return store.AgentSession{}, ErrNotFound
	}
	return row, err
}

// accountSession is the session with id of the caller's account, whichever key started it.
func (s *Service) accountSession(ctx context.Context, p auth.Principal, sessionID string) (store.AgentSession, error) {
	if _, err := tenantOf(p); err != nil {
		return store.AgentSession{}, err
	}
	id, err := parseID(sessionID)
	if err != nil {
		return store.AgentSession{}, err
	}
	row, err := s.q.GetAccountAgentSession(ctx, p.AccountID, id)
	return row, notFound(err)
}

// Events are the caller's session's events after afterSeq, in order, at most limit (1 to 500).
func (s *Service) Events(ctx context.Context, p auth.Principal, sessionID string, afterSeq int64, limit int) ([]Event, error) {
	row, err := s.session(ctx, p, sessionID)
	if err != nil {
		return nil, err
	}
	return s.events(ctx, p.AccountID, row.ID, afterSeq, limit)
}

// events are the events of the account's session id after afterSeq, in order, at most limit
// (1 to 500); none for another account's session.
func (s *Service) events(ctx context.Context, account, id uuid.UUID, afterSeq int64, limit int) ([]Event, error) {
	limit = min(max(limit, 1), MaxTailLines)
	rows, err := s.q.ListAgentEvents(ctx, account, id, max(afterSeq, 0), int32(limit))
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(rows))
	for i, e := range rows {
		out[i] = Event{Seq: e.Seq, Kind: e.Kind, Data: e.Data, At: e.CreatedAt}
	}
	return out, nil
}

// Sessions are the caller's sessions, newest first (at most 100); a key with limits's only
// those it started (sees).
func (s *Service) Sessions(ctx context.Context, p auth.Principal) ([]SessionView, error) {
	if _, err := tenantOf(p); err != nil {
		return nil, err
	}
	rows, err := s.q.ListAccountAgentSessions(ctx, p.AccountID, ownKey(p), 100)
	if err != nil {
		return nil, err
	}
	out := make([]SessionView, len(rows))
	for i, r := range rows {
		out[i] = view(r)
	}
	return out, nil
}

// Tail answers tail_agent_session. With cursor 0 it returns the session's newest maxLines
// events; with a cursor (the seq of the last event seen) the events after it. When there are
// none it waits up to maxWait for new ones, as one of the account's live tails (Follow: a
// 429 when it holds agents.max_live_tails). maxLines is clamped to 1..500 (0: 100), maxWait
// to 0..30 s. The answer's Cursor continues after its last event.
func (s *Service) Tail(ctx context.Context, p auth.Principal, sessionID string, cursor int64, maxLines int, maxWait time.Duration) (Tail, error) {
	if maxLines <= 0 {
		maxLines = 100
	}
	maxLines = min(maxLines, MaxTailLines)
	maxWait = min(max(maxWait, 0), MaxTailWait)
	row, err := s.session(ctx, p, sessionID)
	if err != nil {
		return Tail{}, err
	}
	start := time.Now()
	read := func() ([]Event, error) {
		if cursor <= 0 {
			rows, err := s.q.ListAgentEventsTail(ctx, p.AccountID, row.ID, int32(maxLines))
			if err != nil {
				return nil, err
			}
			out := make([]Event, len(rows))
			for i, e := range rows {
				out[len(rows)-1-i] = Event{Seq: e.Seq, Kind: e.Kind, Data: e.Data, At: e.CreatedAt}
			}
			return out, nil
		}
		return s.events(ctx, p.AccountID, row.ID, cursor, maxLines)
	}
	evs, err := read()
	if err != nil {
		return Tail{}, err
	}
	if len(evs) == 0 && maxWait > 0 {
		// Waiting, the call follows the session: one of the account's live tails.
		release, err := s.Follow(p)
		if err != nil {
			return Tail{}, err
		}
		defer release()
		wctx, cancel := context.WithTimeout(ctx, maxWait)
		select {
		case <-s.Wait(wctx, row.ID.String(), max(cursor, 0)):
		case <-wctx.Done():
		}
		cancel()
		if ctx.Err() != nil {
			return Tail{}, ctx.Err()
		}
		if evs, err = read(); err != nil {
			return Tail{}, err
		}
	}
	if row, err = s.q.GetAccountAgentSession(ctx, p.AccountID, row.ID); err != nil {
		return Tail{}, err
	}
	t := Tail{Session: view(row), Events: evs, Cursor: max(cursor, 0), Waited: time.Since(start)}
	if len(evs) > 0 {
		t.Cursor = evs[len(evs)-1].Seq
	}
	return t, nil
}

// Tickets are the caller's tickets in state (default open; "all" for every state), newest
// first, at most limit (1 to 500; 0: 50); a key with limits's only those that the sessions it
// started opened (sees). ErrNotFound for a principal without an account.
func (s *Service) Tickets(ctx context.Context, p auth.Principal, state string, limit int) ([]Ticket, error) {
	if _, err := tenantOf(p); err != nil {
		return nil, err
	}
	if state == "" {
		state = "open"
	}
	return s.listTickets(ctx, &p.AccountID, ownKey(p), state, limit)
}
