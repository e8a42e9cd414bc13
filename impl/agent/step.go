package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/tollgate/tollgate/gen/db"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/billing"
	"github.com/tollgate/tollgate/impl/mcp"
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
	ticket              *db.InsertAgentTicketParams
}

// chatAnswer is what a step reads of a chat completion.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
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
	body, err := s.requestBody(row, events, queued, env)
	if err != nil {
		return err
	}
	turn := int(row.Turns) + 1
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
	ans, err := s.call(ctx, ModelCall{Principal: p, RequestID: RequestID(row.ID, turn), SessionID: row.ID, Body: body,
		CeilingMicros: ceiling})
	if err != nil {
		return s.callFailed(ctx, job, bound, err)
	}
	var answer chatAnswer
	if err := json.Unmarshal(ans.Body, &answer); err != nil || len(answer.Choices) == 0 {
		// The gateway made the answer; this is a fault of ours, not of the model.
		return fmt.Errorf("agent: unreadable answer to %s: %v", RequestID(row.ID, turn), err)
	}
	msg := answer.Choices[0].Message
	text := ""
	if msg.Content != nil {
		text = *msg.Content
	}
	calls := make([]toolCall, len(msg.ToolCalls))
	for i, c := range msg.ToolCalls {
		calls[i] = toolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
		s.runTool(ctx, p, row, env, &calls[i])
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	return s.finishStep(ctx, job, func(st *sessionTx) error {
		r := &st.row
		ids := make([]uuid.UUID, len(queued))
		for i, m := range queued {
			ids[i] = m.ID
		}
		if len(ids) > 0 {
			n, err := st.q.TakeAgentMessages(ctx, db.TakeAgentMessagesParams{Turn: int32(turn), Ids: ids})
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
		call := map[string]any{"turn": turn, "model": r.Model, "expert": ans.Expert, "input_tokens": ans.InputTokens,
			"output_tokens": ans.OutputTokens, "cost_micros": ans.CostMicros, "request_id": RequestID(r.ID, turn)}
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
		if r.SpentMicros+ans.CostMicros > r.MaxSpendMicros {
			// The reservation fitted the ceiling, so this cannot happen; the bound holds anyway.
			s.log.Error("agent: a model call cost more than its ceiling", "session", r.ID, "cost", ans.CostMicros)
			r.SpentMicros = r.MaxSpendMicros
		} else {
			r.SpentMicros += ans.CostMicros
		}
		for _, c := range calls {
			if err := st.event("tool_call", map[string]any{"turn": turn, "call_id": c.ID, "name": c.Name, "arguments": c.Arguments}); err != nil {
				return err
			}
		}
		for _, c := range calls {
			if c.ticket != nil {
				if _, err := st.q.InsertAgentTicket(ctx, *c.ticket); err != nil {
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
		more, err := st.q.ListQueuedAgentMessages(ctx, r.ID)
		if err != nil {
			return err
		}
		if len(more) > 0 {
			return s.enqueueStep(st) // messages that came during the turn: the next turn takes them
		}
		return st.move(StateReady, "")
	})
}

// principal is the caller a step acts for: the key that started the session (its spawn, or
// the approved agent_spawn's request), read again at every step through the gateway's own
// lookup (Options.KeyPrincipal), with the limits the metering and the routes apply to it; a
// session without a key acts for its account alone. A reason instead ends the session:
// key_revoked when the key was revoked, disabled or has expired, key_limit when its model
// subset no longer holds the session's model. Its errors are dependency failures.
func (s *Service) principal(ctx context.Context, row db.AgentSession) (auth.Principal, string, error) {
	id := fromPG(row.KeyID)
	if id == uuid.Nil {
		return auth.Principal{AccountID: row.AccountID}, "", nil
	}
	p, err := s.key(ctx, id)
	if errors.Is(err, auth.ErrUnknown) || errors.Is(err, auth.ErrDisabled) || errors.As(err, new(*auth.ExpiredError)) {
		return auth.Principal{}, ReasonKeyRevoked, nil
	}
	if err != nil {
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

// keyRoom is what is left of the credit cap of the principal's key in the current period (its
// spend and the reservations of its requests in flight taken off), or -1 when the key has no
// cap. It only sets a call's ceiling: the call's reservation against the key's budget
// (billing.Meter.ReserveForKey, as on the HTTP routes) is what keeps the key within its cap.
func (s *Service) keyRoom(ctx context.Context, p auth.Principal) (int64, error) {
	if p.Limits == nil || !p.Limits.HasCap {
		return -1, nil
	}
	b, err := s.q.GetKeyBudget(ctx, db.GetKeyBudgetParams{KeyID: p.KeyID, PeriodStart: p.Limits.CapPeriod.Start(time.Now())})
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
		case apierror.KindUpstream, apierror.KindOverloaded, apierror.KindRateLimited, apierror.KindUnavailable, apierror.KindInternal:
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

// requestBody is the chat-completions request of a step: the system prompt, the conversation
// rebuilt from the session's events, the queued messages, and the environment's tools.
func (s *Service) requestBody(row db.AgentSession, events []db.AgentEvent, queued []db.AgentMessage, env []string) ([]byte, error) {
	name := row.AgentName
	if name == "" {
		name = "an agent"
	}
	system := fmt.Sprintf("You are %s, running inside tollgate for one account. Your purpose: %s. "+
		"Use the tools to read the account's datasets; open a ticket with open_ticket when a person must act. "+
		"When you are done, answer in plain text.", name, row.Purpose)
	msgs := []map[string]any{{"role": "system", "content": system}}
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
			msgs = append(msgs, map[string]any{"role": "user", "content": d.Text})
		case "model_call":
			if d.Text != "" {
				msgs = append(msgs, map[string]any{"role": "assistant", "content": d.Text, "tool_calls": []any{}, "turn": d.Turn})
			}
		case "tool_call":
			call := map[string]any{"id": d.CallID, "type": "function", "function": map[string]any{"name": d.Name, "arguments": d.Arguments}}
			last := msgs[len(msgs)-1]
			if last["role"] == "assistant" && last["turn"] == d.Turn {
				last["tool_calls"] = append(last["tool_calls"].([]any), call)
			} else {
				msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}, "turn": d.Turn})
			}
		case "tool_result":
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": d.CallID, "content": d.Text})
		case "message_out":
			msgs = append(msgs, map[string]any{"role": "assistant", "content": d.Text})
		}
	}
	for _, m := range queued {
		msgs = append(msgs, map[string]any{"role": "user", "content": m.Text})
	}
	for _, m := range msgs {
		delete(m, "turn")
		if tc, ok := m["tool_calls"].([]any); ok && len(tc) == 0 {
			delete(m, "tool_calls")
		}
	}
	req := map[string]any{"model": row.Model, "messages": msgs}
	var tools []any
	for _, name := range env {
		if name == ToolOpenTicket {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": ToolOpenTicket,
				"description": "Open a ticket of the account for a person to look at: a title and the details.",
				"parameters":  json.RawMessage(openTicketSchema)}})
			continue
		}
		t := s.tools[name]
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": t.Name,
			"description": t.Description, "parameters": t.InputSchema}})
	}
	if len(tools) > 0 {
		req["tools"] = tools
	}
	return json.Marshal(req)
}

// runTool runs one tool call of the model for the session's account, and bounds its result.
// An open_ticket call is only prepared: its ticket is inserted with the step's events.
func (s *Service) runTool(ctx context.Context, p auth.Principal, row db.AgentSession, env []string, c *toolCall) {
	fail := func(format string, args ...any) {
		c.Result, c.IsError = "Error: "+fmt.Sprintf(format, args...), true
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("agent: a tool panicked", "tool", c.Name, "panic", v)
			fail("the tool failed (internal error)")
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
		c.ticket = &db.InsertAgentTicketParams{ID: id, AccountID: row.AccountID, SessionID: pgUUID(row.ID),
			Title: truncate(t.Title, 200), Body: truncate(t.Body, 8000), OpenedBy: "agent:" + row.ID.String()}
		c.Result = fmt.Sprintf("ticket %s opened", id)
		return
	}
	res, err := s.tools[c.Name].Handler(ctx, p, args)
	if err != nil {
		var pe *mcp.PublicError
		if errors.As(err, &pe) {
			fail("%s", pe.Message)
			return
		}
		s.log.Error("agent: a tool failed", "tool", c.Name, "session", row.ID, "err", err)
		fail("the tool failed (internal error)")
		return
	}
	c.Result, c.IsError = res.Text, res.IsError
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
