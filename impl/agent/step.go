package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/exchange"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/tool"
)

// ToolOpenTicket is the agents' own tool: it opens a ticket of the session's account.
const ToolOpenTicket = "open_ticket"

// MaxToolResult bounds the text of a tool result kept in the event log (and so what the model
// sees of it in later turns).
const MaxToolResult = 4 << 10

// openTicketSchema is the input schema of open_ticket.
const openTicketSchema = `{"type":"object","additionalProperties":false,"required":["title","body"],"properties":{` +
	`"title":{"type":"string","minLength":1,"maxLength":200,"description":"A one-line summary of what a person must look at."},` +
	`"body":{"type":"string","maxLength":8000,"description":"The details: what was found, and what is asked."}}}`

// openTicketArgs is openTicketSchema compiled, to check an open_ticket call's arguments as
// every other tool's are checked against theirs (the schema is a constant: compiled once, and a
// schema that does not compile is a programming error, which TestOpenTicketArgumentsAreChecked
// would meet first).
var openTicketArgs = sync.OnceValue(func() *tool.Schema {
	schema, err := tool.CompileSchema(tool.Tool{Name: ToolOpenTicket, InputSchema: json.RawMessage(openTicketSchema)})
	if err != nil {
		panic("agent: open_ticket's input schema: " + err.Error())
	}
	return schema
})

// RequestID is the request id of a session's model call in a turn: deterministic, so a step run
// again after a crash is billed once.
func RequestID(session uuid.UUID, turn int) string {
	return fmt.Sprintf("agt_%s_%d", strings.ReplaceAll(session.String(), "-", ""), turn)
}

type stepWorker struct {
	river.WorkerDefaults[stepArgs]
	s *Service
}

func (w *stepWorker) NextRetry(job *river.Job[stepArgs]) time.Time { return retryDelay(job.Attempt) }

// toolCall is one tool call the model answered, and its result.
type toolCall struct {
	ID, Name, Arguments string
	Result              string
	Truncated, IsError  bool
	ticket              *store.NewAgentTicket
}

// work runs one attempt of a step (Work wraps it).
func (w *stepWorker) work(ctx context.Context, job *river.Job[stepArgs]) error {
	s := w.s
	row, err := s.q.GetAgentSession(ctx, job.Args.SessionID)
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(notFound(err), ErrNotFound) {
			return nil
		}
		return err
	}
	if row.Step != job.Args.Step || (row.State != StateBusy && row.State != StateStopping) {
		return nil // a step that already ran (or a session stopped meanwhile)
	}
	// The step boundary: a stop request and the bounds end the session before any call.
	reason := ""
	switch {
	case row.State == StateStopping:
		reason = row.EndReason
	case row.Turns >= row.MaxTurns:
		reason = ReasonMaxTurns
	case row.SpentMicros >= row.MaxSpendMicros:
		reason = ReasonMaxSpend
	case !deadline(row).IsZero() && time.Now().After(deadline(row)):
		reason = ReasonMaxDuration
	}
	if reason != "" {
		return s.finishStep(ctx, job, func(st *sessionTx) error { return st.end(StateStopped, reason) })
	}
	p, reason, err := s.principal(ctx, row)
	if err != nil {
		return err
	}
	if reason != "" {
		return s.finishStep(ctx, job, func(st *sessionTx) error { return st.end(StateStopped, reason) })
	}

	queued, err := s.q.ListQueuedAgentMessages(ctx, row.ID)
	if err != nil {
		return err
	}
	events, err := s.q.AllAgentEvents(ctx, row.ID)
	if err != nil {
		return err
	}
	env := s.environment(row.TargetEnvironment)
	req, err := s.modelRequest(row, events, queued, env)
	if err != nil {
		return err
	}
	turn := int(row.Turns) + 1
	describeStep(trace.SpanFromContext(ctx), row, p, turn)
	// The call's worst case must fit what is left of the session's max_spend and of the key's
	// credit cap in its period: its output bound is lowered to fit the smaller.
	ceiling, bound := row.MaxSpendMicros-row.SpentMicros, ReasonMaxSpend
	room, err := s.keyRoom(ctx, p)
	if err != nil {
		return err
	}
	if room >= 0 && room < ceiling {
		ceiling, bound = room, ReasonKeyLimit
	}
	if ceiling <= 0 {
		return s.finishStep(ctx, job, func(st *sessionTx) error { return st.end(StateStopped, bound) })
	}
	// The call goes straight into the exchange: no HTTP request, no request context.
	ans, err := s.exchange.Call(ctx, exchange.Call{Principal: p, RequestID: RequestID(row.ID, turn), SessionID: row.ID, Request: req,
		CeilingMicros: ceiling})
	if err != nil {
		return s.callFailed(ctx, job, bound, err)
	}
	// The answer comes back in the neutral form: its text (or the model's refusal, which an
	// OpenAI upstream says apart) and its tool calls.
	text := ans.Response.Text + ans.Response.Refusal
	calls := make([]toolCall, len(ans.Response.ToolCalls))
	for i, c := range ans.Response.ToolCalls {
		calls[i] = toolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		tctx, span := startToolSpan(ctx, row, &calls[i], req.Tools)
		endToolSpan(span, &calls[i], s.runTool(tctx, p, row, env, &calls[i]))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	err = s.finishStep(ctx, job, func(st *sessionTx) error {
		r := &st.row
		ids := make([]uuid.UUID, len(queued))
		for i, m := range queued {
			ids[i] = m.ID
		}
		if len(ids) > 0 {
			n, err := st.tx.TakeAgentMessages(ctx, int32(turn), ids)
			if err != nil {
				return err
			}
			if int(n) != len(ids) {
				return fmt.Errorf("agent: session %s: %d of %d messages were still queued", r.ID, n, len(ids))
			}
		}
		for _, m := range queued {
			if err := st.event("message_in", map[string]any{"message_id": m.ID, "text": m.Text}); err != nil {
				return err
			}
		}
		// A step retried after its process was lost called the model again under the same
		// request id, which the ledger bills once: when an earlier attempt's usage was billed
		// already, the session counts what was billed, not this attempt's cost (trial h13 D4:
		// the spend and the event disagreed with the bill, and a cheaper retry let the session
		// pass max_spend).
		cost := ans.CostMicros
		billedBefore := false
		// (A step run again is not always a later attempt of its job: a stopped process's
		// jobs are taken over as they were. The ledger is asked every time: one indexed read a
		// model call.)
		amount, err := st.tx.LedgerAmountByKey(ctx, r.AccountID, store.UsageLedgerKey(RequestID(r.ID, turn)))
		switch {
		case err == nil && -amount != ans.CostMicros:
			cost, billedBefore = -amount, true
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		call := map[string]any{"turn": turn, "model": r.Model, "expert": ans.Expert, "input_tokens": ans.InputTokens,
			"output_tokens": ans.OutputTokens, "cost_micros": cost, "request_id": RequestID(r.ID, turn)}
		if billedBefore {
			// The counts are this attempt's; the cost is what the earlier attempt was billed.
			call["billed_by_earlier_attempt"] = true
		}
		if ans.CacheReadTokens > 0 || ans.CacheWriteTokens > 0 {
			call["cache_read_tokens"], call["cache_write_tokens"] = ans.CacheReadTokens, ans.CacheWriteTokens
		}
		if text != "" && len(calls) > 0 {
			call["text"] = text
		}
		if err := st.event("model_call", call); err != nil {
			return err
		}
		r.Turns = int32(turn)
		if r.SpentMicros+cost > r.MaxSpendMicros {
			// The reservation fitted the ceiling, so this cannot happen; the bound holds anyway.
			s.log.Error("agent: a model call cost more than its ceiling", "session", r.ID, "cost", cost)
			r.SpentMicros = r.MaxSpendMicros
		} else {
			r.SpentMicros += cost
		}
		for _, c := range calls {
			if err := st.event("tool_call", map[string]any{"turn": turn, "call_id": c.ID, "name": c.Name, "arguments": c.Arguments}); err != nil {
				return err
			}
		}
		for _, c := range calls {
			if c.ticket != nil {
				if _, err := st.tx.InsertAgentTicket(ctx, *c.ticket); err != nil {
					return err
				}
				if err := st.tx.RecordAudit(ctx, ticketOpenedEntry(*c.ticket)); err != nil {
					return err
				}
			}
			if err := st.event("tool_result", map[string]any{"turn": turn, "call_id": c.ID, "name": c.Name, "text": c.Result,
				"truncated": c.Truncated, "is_error": c.IsError}); err != nil {
				return err
			}
		}
		if len(calls) == 0 {
			if err := st.event("message_out", map[string]any{"turn": turn, "text": text}); err != nil {
				return err
			}
		}
		switch {
		case r.State == StateStopping:
			return st.end(StateStopped, "")
		case r.Turns >= r.MaxTurns:
			return st.end(StateStopped, ReasonMaxTurns)
		case r.SpentMicros >= r.MaxSpendMicros:
			return st.end(StateStopped, ReasonMaxSpend)
		case len(calls) > 0:
			return s.enqueueStep(st)
		}
		more, err := st.tx.ListQueuedAgentMessages(ctx, r.ID)
		if err != nil {
			return err
		}
		if len(more) > 0 {
			return s.enqueueStep(st) // messages that came during the turn: the next turn takes them
		}
		return st.move(StateReady, "")
	})
	if store.RefusedData(err) {
		// The model call is billed under the turn's request id. Run again, the step would make
		// it again, unbilled (a retry keeps the id), and be refused the same way: the session
		// fails now instead.
		s.log.Error("agent: the database refused a step's results; the session fails without another attempt",
			"session", job.Args.SessionID, "step", job.Args.Step, "attempt", job.Attempt, "err", err)
		return s.failSession(ctx, job, err)
	}
	return err
}

// principal is the caller a step acts for: the key that started the session (its spawn, or
// the approved agent_spawn's request), read again at every step through the gateway's own
// lookup (Options.KeyPrincipal), with the limits the metering and the routes apply to it; a
// session without a key acts for its account alone. A reason instead ends the session:
// access_revoked when the connected app whose approved agent_spawn started it lost its OAuth
// grant (revoked, past its lifetime, or its member removed or their role lowered),
// member_removed when the member who started it on the console left the account (starterGone),
// key_revoked when the key was revoked, key_disabled when it is disabled, key_expired when it
// has expired, key_limit when its model subset no longer holds the session's model. Its errors are dependency failures.
func (s *Service) principal(ctx context.Context, row store.AgentSession) (auth.Principal, string, error) {
	if grant := fromPG(row.OauthGrantID); grant != uuid.Nil {
		gone, err := grantGone(ctx, s.q, grant)
		if err != nil {
			return auth.Principal{}, "", err
		}
		if gone {
			return auth.Principal{}, ReasonAccessRevoked, nil
		}
	}
	gone, err := s.starterGone(ctx, row)
	if err != nil {
		return auth.Principal{}, "", err
	}
	if gone {
		return auth.Principal{}, ReasonMemberRemoved, nil
	}
	id := fromPG(row.KeyID)
	if id == uuid.Nil {
		return auth.Principal{AccountID: row.AccountID}, "", nil
	}
	p, err := s.key(ctx, row.AccountID, id)
	switch {
	case errors.Is(err, auth.ErrUnknown):
		return auth.Principal{}, ReasonKeyRevoked, nil
	case errors.Is(err, auth.ErrDisabled):
		return auth.Principal{}, ReasonKeyDisabled, nil
	case errors.As(err, new(*auth.ExpiredError)):
		return auth.Principal{}, ReasonKeyExpired, nil
	case err != nil:
		return auth.Principal{}, "", err
	}
	if p.AccountID != row.AccountID {
		// Keys never change accounts; a session acts for its own account or not at all.
		return auth.Principal{}, "", fmt.Errorf("agent: session %s: key %s belongs to another account", row.ID, id)
	}
	if !p.AllowsModel(row.Model) {
		return auth.Principal{}, ReasonKeyLimit, nil
	}
	return p, "", nil
}

// starterGone reports whether the member who started the session on the console is no longer
// in its account (false for a session a key or a connected app started, and for the console's
// sessions started before migration 0029 recorded the member, which run as before). Starting a
// session on the console needs only a membership, whatever its role, so a member whose role is
// lowered keeps their session; a removed one's ends before any further model call, and stays
// ended when they are added back (their new membership began after the session did).
func (s *Service) starterGone(ctx context.Context, row store.AgentSession) (bool, error) {
	user := fromPG(row.StartedByUser)
	if user == uuid.Nil {
		return false, nil
	}
	role, err := s.q.StarterRole(ctx, row.AccountID, user, row.CreatedAt)
	return role == "", err
}

// keyRoom is what is left of the credit cap of the principal's key in the current period (its
// spend and the reservations of its requests in flight taken off), or -1 when the key has no
// cap. It only sets a call's ceiling: the call's reservation against the key's budget
// (billing.Meter.ReserveForKey, as on the HTTP routes) is what keeps the key within its cap.
func (s *Service) keyRoom(ctx context.Context, p auth.Principal) (int64, error) {
	if p.Limits == nil || !p.Limits.HasCap {
		return -1, nil
	}
	b, err := s.q.GetKeyBudget(ctx, p.KeyID, p.Limits.CapPeriod.Start(time.Now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return p.Limits.CapMicros, nil
	}
	if err != nil {
		return 0, err
	}
	return max(p.Limits.CapMicros-b.SpentMicros-b.ReservedMicros, 0), nil
}

// finishStep runs fn on the step's session, locked, unless another run of the step has
// finished it, then saves the session and completes the job, in one transaction.
func (s *Service) finishStep(ctx context.Context, job *river.Job[stepArgs], fn func(st *sessionTx) error) error {
	return withSession(ctx, s, job, job.Args.SessionID, func(st *sessionTx) error {
		if st.row.Step != job.Args.Step || (st.row.State != StateBusy && st.row.State != StateStopping) {
			return nil
		}
		return fn(st)
	})
}

// callFailed decides what a failed model call does: a call that does not fit its ceiling stops
// the session with the bound that set it (max_spend, or key_limit for the key's credit cap),
// and one that the key's credit cap refuses (its 402: requests of the key elsewhere took the
// rest) with key_limit; a passing failure (the process stopping, an upstream outage, the
// database away) runs the step again, up to the job's attempts (config agents.step_attempts);
// anything else (insufficient credit, a refused request) fails the session.
func (s *Service) callFailed(ctx context.Context, job *river.Job[stepArgs], bound string, err error) error {
	if errors.Is(err, ErrSpendCeiling) {
		return s.finishStep(ctx, job, func(st *sessionTx) error { return st.end(StateStopped, bound) })
	}
	if errors.As(err, new(*billing.KeyCapError)) {
		return s.finishStep(ctx, job, func(st *sessionTx) error { return st.end(StateStopped, ReasonKeyLimit) })
	}
	if ctx.Err() != nil {
		return err
	}
	retry := true
	if ae := apierror.As(err); ae != nil {
		switch ae.Kind {
		case apierror.KindUpstream, apierror.KindGatewayTimeout, apierror.KindOverloaded, apierror.KindRateLimited, apierror.KindUnavailable, apierror.KindInternal:
		default:
			retry = false
		}
	}
	if retry && job.Attempt < job.MaxAttempts {
		return err
	}
	s.log.Warn("agent: a session's model call failed; the session fails", "session", job.Args.SessionID, "err", err)
	return s.finishStep(ctx, job, func(st *sessionTx) error { return fail(st, publicText(err)) })
}

// environment is the set of tools an environment names (the default one's when it is not
// configured any more).
func (s *Service) environment(name string) []string {
	env, ok := s.cfg.Environments[name]
	if !ok {
		env = s.cfg.Environments[s.cfg.DefaultEnvironment]
	}
	var out []string
	for _, t := range env.Tools {
		if _, ok := s.tools[t]; ok || t == ToolOpenTicket {
			out = append(out, t)
		}
	}
	return out
}

// modelRequest is the model request of a step, in the neutral form the exchange takes: the system
// prompt, the conversation rebuilt from the session's events, the queued messages, and the
// environment's tools as functions. It is the neutral form of the chat-completions request a
// step sent before the exchange took neutral requests (step_internal_test.go holds that
// request and checks that the two agree), so the upstreams are asked the same.
func (s *Service) modelRequest(row store.AgentSession, events []store.AgentEvent, queued []store.AgentMessage, env []string) (*llm.Request, error) {
	name := row.AgentName
	if name == "" {
		name = "an agent"
	}
	req := &llm.Request{Source: llm.FormatChat, Model: row.Model, System: fmt.Sprintf("You are %s, running inside tollgate for one account. Your purpose: %s. "+
		"Use the tools to read the account's datasets; open a ticket with open_ticket when a person must act. "+
		"When you are done, answer in plain text.", name, row.Purpose)}
	// turnOf is the turn of each assistant message that a model call made (0 for an answer in
	// plain text), so that a turn's tool calls join its message.
	var turnOf []int
	add := func(m llm.Message, turn int) {
		req.Messages = append(req.Messages, m)
		turnOf = append(turnOf, turn)
	}
	for _, e := range events {
		var d struct {
			Text      string `json:"text"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Turn      int    `json:"turn"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return nil, err
		}
		switch e.Kind {
		case "message_in":
			add(llm.Message{Role: llm.RoleUser, Parts: textParts(d.Text, true)}, 0)
		case "model_call":
			if d.Text != "" {
				add(llm.Message{Role: llm.RoleAssistant, Parts: textParts(d.Text, false)}, d.Turn)
			}
		case "tool_call":
			call := llm.ToolCall{ID: d.CallID, Name: d.Name, Arguments: d.Arguments}
			if last := len(req.Messages) - 1; last >= 0 && req.Messages[last].Role == llm.RoleAssistant && turnOf[last] == d.Turn {
				req.Messages[last].ToolCalls = append(req.Messages[last].ToolCalls, call)
			} else {
				add(llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}, d.Turn)
			}
		case "tool_result":
			add(llm.Message{Role: llm.RoleTool, ToolCallID: d.CallID, Parts: textParts(d.Text, true)}, 0)
		case "message_out":
			add(llm.Message{Role: llm.RoleAssistant, Parts: textParts(d.Text, false)}, 0)
		}
	}
	for _, m := range queued {
		add(llm.Message{Role: llm.RoleUser, Parts: textParts(m.Text, true)}, 0)
	}
	for _, name := range env {
		if name == ToolOpenTicket {
			req.Tools = append(req.Tools, llm.Tool{Name: ToolOpenTicket,
				Description: "Open a ticket of the account for a person to look at: a title and the details.",
				Parameters:  json.RawMessage(openTicketSchema)})
			continue
		}
		t := s.tools[name]
		req.Tools = append(req.Tools, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return req, nil
}

// textParts is a message's content of text: one part, or none for an assistant's empty text
// (as a chat request's empty assistant content reads: "tool calls only"). keepEmpty keeps an
// empty text of a user or a tool as one empty part.
func textParts(text string, keepEmpty bool) []llm.Part {
	if text == "" && !keepEmpty {
		return nil
	}
	return []llm.Part{{Kind: llm.PartText, Text: text}}
}

// runTool runs one tool call of the model for the session's account, and bounds its result.
// An open_ticket call is only prepared: its ticket is inserted with the step's events. It
// returns toolErrorInternal for a tool that failed on a fault of ours (its span's error.type).
func (s *Service) runTool(ctx context.Context, p auth.Principal, row store.AgentSession, env []string, c *toolCall) (errType string) {
	fail := func(format string, args ...any) {
		c.Result, c.IsError = "Error: "+fmt.Sprintf(format, args...), true
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("agent: a tool panicked", "tool", c.Name, "panic", v)
			fail("the tool failed (internal error)")
			errType = toolErrorInternal
		}
		c.Result, c.Truncated = bound(c.Result, MaxToolResult)
	}()
	if !slices.Contains(env, c.Name) {
		fail("tool '%s' is not available to this agent", c.Name)
		return
	}
	args := []byte(c.Arguments)
	if strings.TrimSpace(c.Arguments) == "" {
		args = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		fail("the arguments of tool '%s' are not a JSON object", c.Name)
		return
	}
	// The handler runs only with arguments its schema accepts (tool.Handler's contract), and
	// the model is told what is wrong as an MCP client is; open_ticket's are checked against
	// the schema the model was given, as every other tool's are.
	called := s.tools[c.Name]
	schema := called.schema
	if c.Name == ToolOpenTicket {
		schema = openTicketArgs()
	}
	if err := schema.Check(args); err != nil {
		fail("invalid arguments for tool '%s': %v", c.Name, err)
		return
	}
	if c.Name == ToolOpenTicket {
		var t struct {
			Title string `json:"title"`
			Body  string `json:"body"`
		}
		_ = json.Unmarshal(args, &t)
		t.Title = strings.TrimSpace(t.Title)
		if t.Title == "" {
			fail("open_ticket needs a title")
			return
		}
		id := uuid.New()
		c.ticket = &store.NewAgentTicket{ID: id, AccountID: row.AccountID, SessionID: pgUUID(row.ID),
			Title: truncate(store.CleanText(t.Title), 200), Body: truncate(store.CleanText(t.Body), 8000), OpenedBy: "agent:" + row.ID.String()}
		c.Result = fmt.Sprintf("ticket %s opened", id)
		return
	}
	res, err := called.Handler(ctx, p, args)
	if err != nil {
		var pe *tool.PublicError
		if errors.As(err, &pe) {
			fail("%s", pe.Message)
			return
		}
		s.log.Error("agent: a tool failed", "tool", c.Name, "session", row.ID, "err", err)
		fail("the tool failed (internal error)")
		return toolErrorInternal
	}
	c.Result, c.IsError = res.Text, res.IsError
	return ""
}

// auditTicketOpened is the audit log's action for a ticket opened (audit.ActionTicketOpened of
// impl/web/audit, which owns what the entries mean and is an edge's package; the tests check
// that the two agree).
const auditTicketOpened = "ticket.opened"

// ticketOpenedEntry is the audit log's entry for a ticket an agent opened: its actor the agent
// as the ticket's opened_by names it ("agent:" and the session's id), its target the ticket, and
// after it what the operator's opening records (title, state and session, not the text).
func ticketOpenedEntry(t store.NewAgentTicket) store.AuditEntry {
	after, _ := json.Marshal(map[string]string{"title": t.Title, "state": "open", "session": idText(t.SessionID)})
	return store.AuditEntry{AccountID: t.AccountID, Actor: t.OpenedBy, Action: auditTicketOpened, Target: "ticket " + t.ID.String(), After: after}
}

// bound cuts text to at most n bytes on a character boundary, and says whether it did.
func bound(text string, n int) (string, bool) {
	if len(text) <= n {
		return text, false
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut], true
}

func truncate(text string, n int) string {
	t, _ := bound(text, n)
	return t
}
