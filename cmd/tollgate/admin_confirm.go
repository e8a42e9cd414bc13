package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// yesFlag adds -yes to the flag set of a command that destroys or revokes what cannot be had
// back (confirm).
func yesFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("yes", false, "do it without asking (needed when stdin is not a terminal)")
}

// errNotConfirmed is the operator's no (or no answer) to a confirmation: nothing was done.
var errNotConfirmed = errors.New("not confirmed: nothing changed")

// confirm asks the operator to confirm what a destructive command will do (what, such as
// "revoke 4 keys of account acme and end 2 agent sessions"), as the gh CLI does: -yes (yes)
// goes ahead without asking; at a terminal the question goes to stderr and the answer, y or
// yes, comes from stdin (anything else, or none, is errNotConfirmed, exit status 1); when stdin
// is not a terminal the command is refused as a usage error (exit status 2) saying to add -yes.
func (a *admin) confirm(yes bool, command, what string) error {
	if yes {
		return nil
	}
	if !a.interactive {
		return usageError(fmt.Sprintf("%s would %s; stdin is not a terminal to confirm it on: add -yes to do it without asking", command, what))
	}
	fmt.Fprintf(a.notes, "This will %s.\nContinue? [y/N] ", what)
	answer, _ := bufio.NewReader(a.in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

// plural is n and the noun, with an s when n is not 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// revokeAllWhat says what `key revoke-all` will do to the account: the keys it revokes and the
// agent sessions started with them that it ends.
func (a *admin) revokeAllWhat(ctx context.Context, acct store.Account) (string, error) {
	keys, err := a.svc.ListKeys(ctx, acct.ID)
	if err != nil {
		return "", err
	}
	var live []uuid.UUID
	for _, k := range keys {
		if k.Status != "revoked" {
			live = append(live, k.ID)
		}
	}
	sessions, err := a.svc.Store.Agents().KeysLiveSessionIDs(ctx, acct.ID, live)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("revoke %s of account %s and end %s", plural(len(live), "key"), acct.Name, plural(len(sessions), "agent session")), nil
}

// revokeWhat says what `key revoke` will do to the key k: revoke it for ever and end the agent
// sessions started with it.
func (a *admin) revokeWhat(ctx context.Context, k store.APIKey) (string, error) {
	acct, err := a.svc.Store.GetAccount(ctx, k.AccountID)
	if err != nil {
		return "", err
	}
	sessions, err := a.svc.Store.Agents().KeysLiveSessionIDs(ctx, acct.ID, []uuid.UUID{k.ID})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("revoke key %s (%s…%s, %q) of account %s for ever and end %s", k.ID, k.DisplayPrefix, k.DisplaySuffix,
		k.Name, acct.Name, plural(len(sessions), "agent session")), nil
}

// memberRemoveWhat says what `member remove` will do: end the membership and what hangs on it,
// and revoke the keys the person made in the account on the console unless keepKeys. Their keys
// are those the removal revokes (store.RevokeMemberAPIKeys): made by their user, whatever
// e-mail address the key recorded then (an address changes at a sign-in; another user may
// have had it before).
func (a *admin) memberRemoveWhat(ctx context.Context, acct store.Account, m members.Member, keepKeys bool) (string, error) {
	what := fmt.Sprintf("remove %s from account %s, ending their OAuth grants and the agent sessions they started on the console", m.Email, acct.Name)
	if keepKeys {
		return what + ", and leave their keys working", nil
	}
	keys, err := a.svc.ListKeys(ctx, acct.ID)
	if err != nil {
		return "", err
	}
	n := 0
	for _, k := range keys {
		if k.RevokedAt == nil && k.CreatedByUser == m.ID {
			n++
		}
	}
	return what + fmt.Sprintf(", and revoke the %s they made there", plural(n, "key")), nil
}

// slotUnassignWhat says what `slot unassign` will do: take the slot away and stop the session
// running in it, if one is.
func (a *admin) slotUnassignWhat(ctx context.Context, svc *agent.Service, acct store.Account, slot string) (string, error) {
	slots, err := svc.ListSlots(ctx, &acct.ID)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("take agent slot '%s' away from account %s", slot, acct.Name)
	for _, s := range slots {
		if s.Slot == slot && s.SessionID != "" {
			return what + fmt.Sprintf(" and stop its %s session %s", s.SessionState, s.SessionID), nil
		}
	}
	return what, nil
}
