package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// agentAdminUsage documents the operator's agent commands: slots, tickets and approvals.
const agentAdminUsage = `  slot assign ACCOUNT NAME                  give the account an agent slot called NAME (spawn never makes one)
  slot unassign ACCOUNT NAME [-yes]         take the slot away; a session running in it stops (slot_unassigned)
                                            (asks first; -yes: without asking)
  slot list [ACCOUNT]                       slots (of every account, or of ACCOUNT) with their live sessions
  ticket open ACCOUNT TITLE [-body B]       open a ticket for the account (quote a TITLE of several words)
  ticket close TICKET_ID                    close a ticket
  ticket list [ACCOUNT] [-state open|closed|all] [-n N]
                                            tickets, newest first (default: open ones)
  approval list [ACCOUNT] [-state pending|approved|denied|expired|cancelled|all] [-n N]
                                            approvals requested by agent_spawn and agent_prompt, with the
                                            exact action and its arguments (default: pending ones)
  approval approve APPROVAL_ID              approve: the action runs once, on a running gateway
  approval deny APPROVAL_ID                 deny: the action never runs
`

// agentAdmin runs the slot, ticket and approval commands.
func (a *admin) agentAdmin(ctx context.Context, noun, verb string, args []string) error {
	switch noun + " " + verb {
	case "slot assign", "slot unassign":
		return a.slotAssign(ctx, verb, args)
	case "slot list":
		return a.slotList(ctx, args)
	case "ticket open":
		return a.ticketOpen(ctx, args)
	case "ticket close":
		return a.ticketClose(ctx, args)
	case "ticket list":
		return a.ticketList(ctx, args)
	case "approval list":
		return a.approvalList(ctx, args)
	case "approval approve", "approval deny":
		return a.approvalResolve(ctx, verb, args)
	}
	return usageError(fmt.Sprintf("unknown admin command %q", noun+" "+verb))
}

// agentService opens the database (useDatabase), once the command's command line is checked,
// and returns the agent service of the slot, ticket and approval commands, which logs only its
// errors.
func (a *admin) agentService(ctx context.Context) (*agent.Service, error) {
	if err := a.useDatabase(ctx); err != nil {
		return nil, err
	}
	return agent.New(agent.Options{Store: a.svc.Store, Config: a.svc.Config,
		Logger: slog.New(slog.NewTextHandler(a.out, &slog.HandlerOptions{Level: slog.LevelError}))})
}

// listErr words an error of a list command for the operator: a -state the service does not
// know is a mistake in the command line (exit status 2), as a bad flag of any other command.
func listErr(what, state string, err error) error {
	if e, ok := errors.AsType[*apierror.Error](err); ok && e.Param == "state" {
		return usageError(fmt.Sprintf("-state %q: %s", state, e.Message))
	}
	return agentErr(what, err)
}

// agentID checks that s is the id of a ticket or an approval (what), as key ids are checked:
// anything else is a mistake in the command line, which names the command that lists them.
func agentID(what, s string) error {
	if _, err := uuid.Parse(s); err != nil {
		return usageError(fmt.Sprintf("%q is not an id (see 'admin %s list' for the %ss)", s, what, what))
	}
	return nil
}

// agentErr words an agent service error for the operator: a value the service refuses (a slot
// name, a ticket's title) is a mistake in the command line (exit status 2).
func agentErr(what string, err error) error {
	if e, ok := errors.AsType[*apierror.Error](err); ok && e.Kind == apierror.KindInvalidRequest {
		return usageError(fmt.Sprintf("%s: %s", what, e.Message))
	}
	if errors.Is(err, agent.ErrNotFound) {
		return fmt.Errorf("%s: not found", what)
	}
	if c, ok := errors.AsType[*agent.ConflictError](err); ok {
		return fmt.Errorf("%s: %s", what, c.Message)
	}
	if e, ok := errors.AsType[*apierror.Error](err); ok && e.Kind != apierror.KindInternal {
		return fmt.Errorf("%s: %s", what, e.Message)
	}
	return err
}

// parseOptional parses flags and at most max positional arguments, which may come in any order.
func parseOptional(fs *flag.FlagSet, args []string, max int) ([]string, error) {
	for n := 0; n <= max; n++ {
		probe := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
		probe.SetOutput(&bytes.Buffer{})
		fs.VisitAll(func(f *flag.Flag) { probe.Var(f.Value, f.Name, f.Usage) })
		if pos, err := parse(probe, args, n); err == nil {
			return pos, nil
		}
	}
	return parse(fs, args, max)
}

// optionalAccount resolves the account named by pos[0], if any: nil for every account.
func (a *admin) optionalAccount(ctx context.Context, pos []string) (*uuid.UUID, error) {
	if len(pos) == 0 {
		return nil, nil
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return nil, err
	}
	return &acct.ID, nil
}

// accountNames maps account ids to names for listings across accounts.
func (a *admin) accountNames(ctx context.Context) (map[uuid.UUID]string, error) {
	accts, err := a.svc.Store.ListAccounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]string, len(accts))
	for _, ac := range accts {
		out[ac.ID] = ac.Name
	}
	return out, nil
}

func (a *admin) slotAssign(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet("slot "+verb, flag.ContinueOnError)
	var yes *bool
	if verb == "unassign" {
		yes = yesFlag(fs)
	}
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	if verb == "unassign" && !*yes {
		what, err := a.slotUnassignWhat(ctx, svc, acct, pos[1])
		if err != nil {
			return err
		}
		if err := a.confirm(*yes, "slot unassign", what); err != nil {
			return err
		}
	}
	what := fmt.Sprintf("slot '%s' of %s", pos[1], acct.Name)
	if verb == "assign" {
		if err := svc.AssignSlot(ctx, acct.ID, pos[1]); err != nil {
			return agentErr(what, err)
		}
		if err := a.audit(ctx, acct.ID, audit.ActionSlotAssigned, "slot "+pos[1], nil, map[string]string{"slot": pos[1]}); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "account %s has agent slot '%s'\n", acct.Name, pos[1])
		return nil
	}
	if err := svc.UnassignSlot(ctx, acct.ID, pos[1]); err != nil {
		return agentErr(what, err)
	}
	if err := a.audit(ctx, acct.ID, audit.ActionSlotRemoved, "slot "+pos[1], map[string]string{"slot": pos[1]}, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "account %s no longer has agent slot '%s' (a session running in it stops: slot_unassigned)\n", acct.Name, pos[1])
	return nil
}

func (a *admin) slotList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("slot list", flag.ContinueOnError)
	asJSON := jsonFlag(fs)
	pos, err := parseOptional(fs, args, 1)
	if err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	acct, err := a.optionalAccount(ctx, pos)
	if err != nil {
		return err
	}
	slots, err := svc.ListSlots(ctx, acct)
	if err != nil {
		return err
	}
	if *asJSON {
		list := make([]slotJSON, 0, len(slots))
		for _, s := range slots {
			list = append(list, slotJSON{AccountID: s.AccountID.String(), Account: s.Account, Slot: s.Slot, Session: nilIfEmpty(s.SessionID),
				SessionState: nilIfEmpty(s.SessionState), AssignedAt: utc(s.CreatedAt)})
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tSLOT\tSESSION\tSTATE\tASSIGNED")
	for _, s := range slots {
		session, state := orDash(s.SessionID), orDash(s.SessionState)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Account, s.Slot, session, state, s.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func (a *admin) ticketOpen(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ticket open", flag.ContinueOnError)
	body := fs.String("body", "", "the ticket's text")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	t, err := svc.OpenTicket(ctx, acct.ID, nil, pos[1], *body, "operator")
	if err != nil {
		return agentErr("ticket", err)
	}
	if err := a.audit(ctx, acct.ID, audit.ActionTicketOpened, "ticket "+t.ID, nil, ticketState(t)); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "ticket %s opened for %s: %s\n", t.ID, acct.Name, plaintext.Visible(t.Title, false))
	return nil
}

func (a *admin) ticketClose(ctx context.Context, args []string) error {
	pos, err := parse(flag.NewFlagSet("ticket close", flag.ContinueOnError), args, 1)
	if err != nil {
		return err
	}
	if err := agentID("ticket", pos[0]); err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	t, err := svc.CloseTicket(ctx, nil, pos[0])
	if err != nil {
		return agentErr("ticket "+pos[0], err)
	}
	before := t
	before.State, before.ClosedAt = "open", nil
	if err := a.audit(ctx, t.AccountID, audit.ActionTicketClosed, "ticket "+t.ID, ticketState(before), ticketState(t)); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "ticket %s closed at %s\n", t.ID, timeOrDash(t.ClosedAt))
	return nil
}

// ticketState is what the audit log keeps of a ticket before and after an operator's change:
// its title, its state and the session it is about, if any (not its text, which may be long).
func ticketState(t agent.Ticket) map[string]string {
	st := map[string]string{"title": t.Title, "state": t.State}
	if t.SessionID != "" {
		st["session"] = t.SessionID
	}
	return st
}

func (a *admin) ticketList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ticket list", flag.ContinueOnError)
	state := fs.String("state", "open", "open, closed or all")
	n := fs.Int("n", 50, "how many tickets")
	asJSON := jsonFlag(fs)
	pos, err := parseOptional(fs, args, 1)
	if err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	acct, err := a.optionalAccount(ctx, pos)
	if err != nil {
		return err
	}
	tickets, err := svc.ListTickets(ctx, acct, *state, *n)
	if err != nil {
		return listErr("tickets", *state, err)
	}
	names, err := a.accountNames(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		list := make([]ticketJSON, 0, len(tickets))
		for _, t := range tickets {
			list = append(list, ticketJSON{ID: t.ID, AccountID: t.AccountID.String(), Account: names[t.AccountID], State: t.State,
				OpenedBy: t.OpenedBy, SessionID: nilIfEmpty(t.SessionID), CreatedAt: utc(t.CreatedAt), ClosedAt: utcOrNil(t.ClosedAt), Title: t.Title})
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tACCOUNT\tSTATE\tOPENED_BY\tSESSION\tOPENED\tCLOSED\tTITLE")
	for _, t := range tickets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, names[t.AccountID], t.State, t.OpenedBy, orDash(t.SessionID),
			t.CreatedAt.Format(time.RFC3339), timeOrDash(t.ClosedAt), plaintext.Visible(t.Title, false))
	}
	return tw.Flush()
}

// approvalList prints each approval as a block: what it is, then the exact action it is bound
// to, with its arguments indented and their hash.
func (a *admin) approvalList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("approval list", flag.ContinueOnError)
	state := fs.String("state", "pending", "pending, approved, denied, expired, cancelled or all")
	n := fs.Int("n", 50, "how many approvals")
	asJSON := jsonFlag(fs)
	pos, err := parseOptional(fs, args, 1)
	if err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	acct, err := a.optionalAccount(ctx, pos)
	if err != nil {
		return err
	}
	list, err := svc.ListApprovals(ctx, acct, *state, *n)
	if err != nil {
		return listErr("approvals", *state, err)
	}
	names, err := a.accountNames(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return a.writeJSON(approvalsJSON(list, names))
	}
	if len(list) == 0 {
		fmt.Fprintf(a.out, "no %s approvals\n", strings.TrimPrefix(*state, "all"))
		return nil
	}
	for i, ap := range list {
		if i > 0 {
			fmt.Fprintln(a.out)
		}
		fmt.Fprintf(a.out, "approval %s  account %s  %s\n", ap.ID, names[ap.AccountID], ap.State)
		fmt.Fprintf(a.out, "  action:    agent_%s\n", ap.Action)
		var args bytes.Buffer
		if err := json.Indent(&args, ap.Arguments, "    ", "  "); err != nil {
			args.Reset()
			args.Write(ap.Arguments)
		}
		fmt.Fprintf(a.out, "  arguments: %s\n", plaintext.Visible(args.String(), true))
		fmt.Fprintf(a.out, "  hash:      %s\n", ap.ArgumentsHash)
		fmt.Fprintf(a.out, "  key:       %s\n", orDash(ap.KeyID))
		fmt.Fprintf(a.out, "  requested: %s  expires: %s\n", ap.CreatedAt.Format(time.RFC3339), ap.ExpiresAt.Format(time.RFC3339))
		if ap.ResolvedAt != nil {
			fmt.Fprintf(a.out, "  resolved:  %s by %s\n", timeOrDash(ap.ResolvedAt), orDash(ap.ResolvedBy))
		}
		if ap.ActionStatus != "" {
			outcome := ap.ActionStatus
			switch {
			case ap.Action == "spawn" && ap.SessionID != "":
				outcome += ", session " + ap.SessionID
			case ap.MessageID != "":
				outcome += ", message " + ap.MessageID
			}
			if ap.Failure != "" {
				outcome += ": " + ap.Failure
			}
			fmt.Fprintf(a.out, "  outcome:   %s\n", outcome)
		}
	}
	return nil
}

// approvalsJSON is approval list's -json: what its blocks show of each approval.
func approvalsJSON(list []agent.Approval, names map[uuid.UUID]string) []approvalJSON {
	out := make([]approvalJSON, 0, len(list))
	for _, ap := range list {
		out = append(out, approvalJSON{ID: ap.ID, AccountID: ap.AccountID.String(), Account: names[ap.AccountID], State: ap.State,
			Action: ap.Action, Arguments: ap.Arguments, ArgumentsHash: ap.ArgumentsHash, KeyID: nilIfEmpty(ap.KeyID),
			RequestedBy: nilIfEmpty(ap.RequestedBy), CreatedAt: utc(ap.CreatedAt), ExpiresAt: utc(ap.ExpiresAt),
			ResolvedAt: utcOrNil(ap.ResolvedAt), ResolvedBy: nilIfEmpty(ap.ResolvedBy), ActionStatus: nilIfEmpty(ap.ActionStatus),
			SessionID: nilIfEmpty(ap.SessionID), MessageID: nilIfEmpty(ap.MessageID), Failure: nilIfEmpty(ap.Failure)})
	}
	return out
}

func (a *admin) approvalResolve(ctx context.Context, verb string, args []string) error {
	pos, err := parse(flag.NewFlagSet("approval "+verb, flag.ContinueOnError), args, 1)
	if err != nil {
		return err
	}
	if err := agentID("approval", pos[0]); err != nil {
		return err
	}
	svc, err := a.agentService(ctx)
	if err != nil {
		return err
	}
	ap, err := svc.Resolve(ctx, nil, pos[0], verb == "approve", "operator")
	if err != nil {
		return agentErr("approval "+pos[0], err)
	}
	// The decision goes into the account's audit log, as the web application's do: it is made
	// (the conditional update won), so a failure to record it is reported, not undone.
	after := map[string]any{"state": ap.State, "action": ap.Action, "arguments_hash": ap.ArgumentsHash, "resolved_by": ap.ResolvedBy}
	if ap.ActionStatus != "" {
		after["action_status"] = ap.ActionStatus
	}
	if err := (&audit.Log{Store: a.svc.Store}).Record(ctx, audit.Entry{AccountID: ap.AccountID, Actor: "operator",
		Action: audit.ActionApproval, Target: "approval " + ap.ID,
		Before: map[string]any{"state": agent.ApprovalPending, "action": ap.Action, "arguments_hash": ap.ArgumentsHash},
		After:  after}); err != nil {
		return fmt.Errorf("approval %s is %s, but recording it in the audit log failed: %w", ap.ID, ap.State, err)
	}
	if ap.State == agent.ApprovalApproved {
		fmt.Fprintf(a.out, "approval %s approved: agent_%s runs once, on a running gateway ('approval list -state approved' shows its outcome)\n", ap.ID, ap.Action)
		return nil
	}
	fmt.Fprintf(a.out, "approval %s %s: agent_%s will never run\n", ap.ID, ap.State, ap.Action)
	return nil
}
