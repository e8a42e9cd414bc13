package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/impl/agent"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
	"github.com/tollgate/tollgate/impl/web/members"
)

// memberAdminUsage documents the operator's membership commands (the web application's users).
const memberAdminUsage = `  member add ACCOUNT EMAIL [-role owner|member]
                                            let the person with EMAIL sign in to the account's web
                                            pages (default role member; the address must be the
                                            verified e-mail their OpenID provider reports)
  member list ACCOUNT                       the account's members, roles and last sign-in
  member remove ACCOUNT EMAIL [-keep-keys] [-yes]
                                            end a membership, its OAuth grants, the agent sessions
                                            the person started on the console there, and the keys the
                                            person made in the account on the console (-keep-keys
                                            leaves their keys working: the account's to revoke; asks
                                            first, -yes: without asking)
`

// memberAdmin runs the member commands.
func (a *admin) memberAdmin(ctx context.Context, verb string, args []string) error {
	// Each command opens the database (useDatabase) once its command line is checked; then
	// reader lists and checks members, people, with the agents, adds and removes them, and log
	// is the account's audit log.
	reader := func() *members.Service { return members.New(a.svc.Store, nil) }
	people := func() (*members.Service, error) {
		agents, err := a.agents()
		if err != nil {
			return nil, err
		}
		return members.New(a.svc.Store, agents), nil
	}
	log := func() *audit.Log { return &audit.Log{Store: a.svc.Store} }
	switch verb {
	case "add":
		fs := flag.NewFlagSet("member add", flag.ContinueOnError)
		role := fs.String("role", members.RoleMember, "owner or member")
		pos, err := parse(fs, args, 2)
		if err != nil {
			return err
		}
		if !members.ValidRole(*role) {
			return usageError(fmt.Sprintf("-role %q: want owner or member", *role))
		}
		if !strings.Contains(pos[1], "@") {
			return usageError(fmt.Sprintf("%q is not an e-mail address", pos[1]))
		}
		if err := a.useDatabase(ctx); err != nil {
			return err
		}
		acct, err := a.account(ctx, pos[0])
		if err != nil {
			return err
		}
		// A role lowered revokes the grants the person made with a higher one, and the
		// agent sessions their apps started end with them (access_revoked).
		svc, err := people()
		if err != nil {
			return err
		}
		u, err := svc.Add(ctx, acct.ID, pos[1], *role)
		if err != nil {
			return err
		}
		if err := log().Record(ctx, audit.Entry{AccountID: acct.ID, Actor: "operator", Action: "member.added",
			Target: "user " + u.Email, After: map[string]string{"email": u.Email, "role": *role}}); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "%s is a%s %s of account %s\n", u.Email, map[bool]string{true: "n", false: ""}[*role == members.RoleOwner], *role, acct.Name)
		return nil
	case "list":
		fs := flag.NewFlagSet("member list", flag.ContinueOnError)
		asJSON := jsonFlag(fs)
		pos, err := parse(fs, args, 1)
		if err != nil {
			return err
		}
		if err := a.useDatabase(ctx); err != nil {
			return err
		}
		acct, err := a.account(ctx, pos[0])
		if err != nil {
			return err
		}
		list, err := reader().List(ctx, acct.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]memberJSON, 0, len(list))
			for _, m := range list {
				out = append(out, memberJSON{Email: m.Email, Role: m.Role, AddedAt: utc(m.Added), LastSignInAt: utcOrNil(m.LastSignIn)})
			}
			return a.writeJSON(out)
		}
		tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tROLE\tADDED\tLAST_SIGN_IN")
		for _, m := range list {
			last := "never"
			if m.LastSignIn != nil {
				last = m.LastSignIn.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Email, m.Role, m.Added.Format(time.RFC3339), last)
		}
		return tw.Flush()
	case "remove":
		fs := flag.NewFlagSet("member remove", flag.ContinueOnError)
		keepKeys := fs.Bool("keep-keys", false, "leave the keys the person made in the account working")
		yes := yesFlag(fs)
		pos, err := parse(fs, args, 2)
		if err != nil {
			return err
		}
		if err := a.useDatabase(ctx); err != nil {
			return err
		}
		acct, err := a.account(ctx, pos[0])
		if err != nil {
			return err
		}
		if !*yes {
			m, err := a.member(ctx, reader(), acct, pos[1])
			if err != nil {
				return err
			}
			what, err := a.memberRemoveWhat(ctx, acct, m, *keepKeys)
			if err != nil {
				return err
			}
			if err := a.confirm(*yes, "member remove", what); err != nil {
				return err
			}
		}
		// The sessions the person started on the console in the account end with the
		// membership (member_removed), as on the web console.
		svc, err := people()
		if err != nil {
			return err
		}
		revoked, err := svc.Remove(ctx, acct.ID, pos[1], *keepKeys)
		if errors.Is(err, members.ErrNotFound) {
			return fmt.Errorf("%s is not a member of account %s", pos[1], acct.Name)
		} else if err != nil {
			return err
		}
		if err := log().Record(ctx, audit.Entry{AccountID: acct.ID, Actor: "operator", Action: "member.removed",
			Target: "user " + pos[1], Before: map[string]string{"email": pos[1]}}); err != nil {
			return err
		}
		for _, k := range revoked {
			before := k
			before.RevokedAt = nil
			if err := a.auditKey(ctx, audit.ActionKeyRevoked, " (its member removed)", &before, &k); err != nil {
				return err
			}
		}
		fmt.Fprintf(a.out, "%s is no longer a member of account %s\n", pos[1], acct.Name)
		for _, k := range revoked {
			fmt.Fprintf(a.out, "revoked their key %s %q (%s…%s)\n", k.ID, k.Name, k.DisplayPrefix, k.DisplaySuffix)
		}
		return nil
	}
	return usageError(fmt.Sprintf("unknown admin command %q", "member "+verb))
}

// agents is the agent service the commands that end sessions pass on (a member's removal, a
// key's revocation); it logs warnings and errors to the command's stderr, so that an operator
// whose revocation left its sessions' ending to the gateway's sweep of lapsed sessions
// (agent.Service.EndingsLeft) is told, while the command's output (-json too) stays its own.
func (a *admin) agents() (*agent.Service, error) {
	return agent.New(agent.Options{Store: a.svc.Store, Config: a.svc.Config,
		Logger: slog.New(slog.NewTextHandler(a.notes, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

// member is the account's member with email, found before asking to confirm a removal; an
// e-mail that is not a member of the account is refused, as the removal itself would refuse it.
func (a *admin) member(ctx context.Context, svc *members.Service, acct store.Account, email string) (members.Member, error) {
	list, err := svc.List(ctx, acct.ID)
	if err != nil {
		return members.Member{}, err
	}
	for _, m := range list {
		if strings.EqualFold(m.Email, email) {
			return m, nil
		}
	}
	return members.Member{}, fmt.Errorf("%s is not a member of account %s", email, acct.Name)
}
