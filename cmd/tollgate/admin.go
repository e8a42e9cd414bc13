package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/store"
)

const adminUsage = `tollgate admin: the operator's CLI. It works on the database directly (DATABASE_URL, or the
local development cluster when unset); it needs no API key.

  account create NAME [-plan PLAN]          create an account (grants the plan's models and credit)
  account list                              list accounts with their balances
  key create ACCOUNT [-name N] [-rpm N] [-quiet]
                                            mint a key; it is printed once (-rpm -1: the plan's default)
  key list ACCOUNT                          list the account's keys (never the keys themselves)
  key revoke KEY_ID                         revoke a key (every gateway refuses it within a second)
  key set-rpm KEY_ID N                      set a key's requests-per-minute cap (0: no cap)
  credit grant ACCOUNT MICROS [-note T] [-idempotency-key K]
                                            add credit as a ledger entry (1 USD = 1000000 micros)
  credit show ACCOUNT [-n N]                balance and the newest ledger entries
  usage list ACCOUNT [-n N]                 the newest usage records: model, upstream, tokens, hosted
                                            tool calls, cost, status (on credit: served in an outage)
  model grant ACCOUNT MODEL                 let the account use a configured model
  model revoke ACCOUNT MODEL                withdraw a model from the account
  model list ACCOUNT                        the account's models
` + datasetUsage + agentAdminUsage + memberAdminUsage + `
ACCOUNT is an account id or name. Global flag: -config FILE (models and plans).
`

// runAdmin runs one admin command, writing its output to out.
func runAdmin(ctx context.Context, args []string, out io.Writer) error {
	global := flag.NewFlagSet("admin", flag.ContinueOnError)
	configPath := global.String("config", "", "config file")
	global.SetOutput(out)
	global.Usage = func() { fmt.Fprint(out, adminUsage) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError(err.Error())
	}
	args = global.Args()
	if len(args) < 2 {
		fmt.Fprint(out, adminUsage)
		return usageError("admin needs a command")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	log := newLogger("text")
	d, err := openDatabase(ctx, true, log)
	if err != nil {
		return err
	}
	defer d.Close()
	a := &admin{svc: &accounts.Service{Store: d.Store, Config: cfg}, out: out}
	return a.run(ctx, args[0], args[1], args[2:])
}

type admin struct {
	svc *accounts.Service
	out io.Writer
}

func (a *admin) run(ctx context.Context, noun, verb string, args []string) error {
	switch noun + " " + verb {
	case "account create":
		return a.accountCreate(ctx, args)
	case "account list":
		return a.accountList(ctx)
	case "key create":
		return a.keyCreate(ctx, args)
	case "key list":
		return a.keyList(ctx, args)
	case "key revoke":
		return a.keyRevoke(ctx, args)
	case "key set-rpm":
		return a.keySetRPM(ctx, args)
	case "credit grant":
		return a.creditGrant(ctx, args)
	case "credit show":
		return a.creditShow(ctx, args)
	case "usage list":
		return a.usageList(ctx, args)
	case "model grant", "model revoke", "model list":
		return a.model(ctx, verb, args)
	case "dataset put", "dataset list", "dataset delete":
		return a.dataset(ctx, verb, args)
	}
	switch noun {
	case "slot", "ticket", "approval":
		return a.agentAdmin(ctx, noun, verb, args)
	case "member":
		return a.memberAdmin(ctx, verb, args)
	}
	fmt.Fprint(a.out, adminUsage)
	return usageError(fmt.Sprintf("unknown admin command %q", noun+" "+verb))
}

// parse parses flags that may follow or precede the positional arguments, and checks their count.
// A negative number is a positional argument, not a flag.
func parse(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if _, err := strconv.ParseFloat(args[0], 64); err == nil && strings.HasPrefix(args[0], "-") {
			pos = append(pos, args[0])
			args = args[1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			return nil, usageError(err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != positional {
		return nil, usageError(fmt.Sprintf("%s takes %d argument(s), got %d", fs.Name(), positional, len(pos)))
	}
	return pos, nil
}

func (a *admin) account(ctx context.Context, ref string) (store.Account, error) {
	acct, err := a.svc.ResolveAccount(ctx, ref)
	if err != nil {
		return acct, fmt.Errorf("account %q: %w", ref, err)
	}
	return acct, nil
}

func (a *admin) accountCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("account create", flag.ContinueOnError)
	plan := fs.String("plan", "default", "plan name from the config")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	acct, err := a.svc.CreateAccount(ctx, pos[0], *plan)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("account %q already exists", pos[0])
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "account %s created: id %s, plan %s, balance %d micros (%s)\n",
		acct.Name, acct.ID, acct.Plan, acct.BalanceMicros, apierror.USD(acct.BalanceMicros))
	return nil
}

func (a *admin) accountList(ctx context.Context) error {
	accts, err := a.svc.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPLAN\tBALANCE_MICROS\tBALANCE_USD\tCREATED")
	for _, ac := range accts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", ac.ID, ac.Name, ac.Plan, ac.BalanceMicros, apierror.USD(ac.BalanceMicros), ac.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func (a *admin) keyCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("key create", flag.ContinueOnError)
	name := fs.String("name", "", "a name for the key")
	rpm := fs.Int("rpm", -1, "requests-per-minute cap (0: none, -1: the plan's default)")
	quiet := fs.Bool("quiet", false, "print only the key")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	k, err := a.svc.CreateKey(ctx, acct.ID, *name, *rpm)
	if err != nil {
		return err
	}
	if *quiet {
		fmt.Fprintln(a.out, k.Plain)
		return nil
	}
	fmt.Fprintf(a.out, "key %s created for account %s (rpm cap %d). It is shown once; only its hash is stored:\n\n%s\n",
		k.Key.ID, acct.Name, k.Key.RPMLimit, k.Plain)
	return nil
}

func (a *admin) keyList(ctx context.Context, args []string) error {
	pos, err := parse(flag.NewFlagSet("key list", flag.ContinueOnError), args, 1)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	keys, err := a.svc.Store.ListAPIKeys(ctx, acct.ID)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tRPM\tCREATED\tLAST_USED\tREVOKED")
	stamp := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339)
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s…\t%s\t%d\t%s\t%s\t%s\n", k.ID, k.DisplayPrefix, k.Name, k.RPMLimit, k.CreatedAt.Format(time.RFC3339), stamp(k.LastUsedAt), stamp(k.RevokedAt))
	}
	return tw.Flush()
}

func keyID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return id, usageError(fmt.Sprintf("%q is not a key id (see 'admin key list')", s))
	}
	return id, nil
}

func (a *admin) keyRevoke(ctx context.Context, args []string) error {
	pos, err := parse(flag.NewFlagSet("key revoke", flag.ContinueOnError), args, 1)
	if err != nil {
		return err
	}
	id, err := keyID(pos[0])
	if err != nil {
		return err
	}
	k, err := a.svc.Store.RevokeAPIKey(ctx, id)
	if err != nil {
		return fmt.Errorf("revoke key %s: %w (unknown or already revoked)", id, err)
	}
	fmt.Fprintf(a.out, "key %s (%s…) revoked at %s\n", k.ID, k.DisplayPrefix, k.RevokedAt.Format(time.RFC3339))
	return nil
}

func (a *admin) keySetRPM(ctx context.Context, args []string) error {
	pos, err := parse(flag.NewFlagSet("key set-rpm", flag.ContinueOnError), args, 2)
	if err != nil {
		return err
	}
	id, err := keyID(pos[0])
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 0 {
		return usageError("the cap must be a non-negative integer")
	}
	k, err := a.svc.Store.SetAPIKeyRPMLimit(ctx, id, n)
	if err != nil {
		return fmt.Errorf("key %s: %w", id, err)
	}
	fmt.Fprintf(a.out, "key %s: requests-per-minute cap %d\n", k.ID, k.RPMLimit)
	return nil
}

func (a *admin) creditGrant(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("credit grant", flag.ContinueOnError)
	note := fs.String("note", "", "why the credit is granted")
	idem := fs.String("idempotency-key", "", "grant at most once per key (default: a fresh key)")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	micros, err := strconv.ParseInt(strings.ReplaceAll(pos[1], "_", ""), 10, 64)
	if err != nil || micros <= 0 {
		return usageError("MICROS must be a positive integer (1 USD = 1000000)")
	}
	e, created, err := a.svc.GrantCredit(ctx, acct.ID, micros, *idem, *note)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(a.out, "idempotency key %q was used already by ledger entry %d (+%d micros); nothing granted\n", e.IdempotencyKey, e.ID, e.AmountMicros)
		return nil
	}
	fmt.Fprintf(a.out, "ledger entry %d: +%d micros to %s; balance %d micros (%s)\n", e.ID, e.AmountMicros, acct.Name, e.BalanceAfterMicros, apierror.USD(e.BalanceAfterMicros))
	return nil
}

// accountAndCount reads the arguments of a command that lists an account's newest rows of
// what: ACCOUNT [-n N].
func (a *admin) accountAndCount(ctx context.Context, command, what string, args []string) (store.Account, int, error) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	n := fs.Int("n", 20, "how many "+what)
	pos, err := parse(fs, args, 1)
	if err != nil {
		return store.Account{}, 0, err
	}
	acct, err := a.account(ctx, pos[0])
	return acct, *n, err
}

func (a *admin) creditShow(ctx context.Context, args []string) error {
	acct, n, err := a.accountAndCount(ctx, "credit show", "ledger entries", args)
	if err != nil {
		return err
	}
	entries, err := a.svc.Store.LedgerEntries(ctx, acct.ID, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "account %s: balance %d micros (%s)\n\n", acct.Name, acct.BalanceMicros, apierror.USD(acct.BalanceMicros))
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tREASON\tAMOUNT_MICROS\tBALANCE_AFTER\tKEY\tNOTE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%+d\t%d\t%s\t%s\n", e.ID, e.CreatedAt.Format(time.RFC3339), e.Reason, e.AmountMicros, e.BalanceAfterMicros, e.IdempotencyKey, e.Note)
	}
	return tw.Flush()
}

// usageList prints the account's newest usage records: what each request used and cost.
func (a *admin) usageList(ctx context.Context, args []string) error {
	acct, n, err := a.accountAndCount(ctx, "usage list", "usage records", args)
	if err != nil {
		return err
	}
	records, err := a.svc.Store.UsageRecords(ctx, acct.ID, n)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FINISHED	REQUEST	MODEL	UPSTREAM	IN	OUT	HOSTED_CALLS	COST_MICROS	STATUS")
	for _, r := range records {
		hosted := "-"
		if len(r.HostedCalls) > 0 {
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(r.HostedCalls)) {
				parts = append(parts, fmt.Sprintf("%s=%d", name, r.HostedCalls[name]))
			}
			hosted = fmt.Sprintf("%s (%d micros)", strings.Join(parts, ","), r.HostedMicros)
		}
		status := r.Status
		if r.OnCredit {
			status += " (on credit)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%d\t%d\t%s\t%d\t%s\n", r.FinishedAt.Format(time.RFC3339), r.RequestID, r.Model,
			r.Provider, r.UpstreamModel, r.InputTokens, r.OutputTokens, hosted, r.CostMicros, status)
	}
	return tw.Flush()
}

func (a *admin) model(ctx context.Context, verb string, args []string) error {
	want := 2
	if verb == "list" {
		want = 1
	}
	pos, err := parse(flag.NewFlagSet("model "+verb, flag.ContinueOnError), args, want)
	if err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	switch verb {
	case "grant":
		if err := a.svc.GrantModel(ctx, acct.ID, pos[1]); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "account %s may use %s\n", acct.Name, pos[1])
	case "revoke":
		if err := a.svc.RevokeModel(ctx, acct.ID, pos[1]); err != nil {
			return fmt.Errorf("model %s for %s: %w", pos[1], acct.Name, err)
		}
		fmt.Fprintf(a.out, "account %s may no longer use %s\n", acct.Name, pos[1])
	default:
		grants, err := a.svc.Store.AccountModels(ctx, acct.ID)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tFAMILY\tGRANTED")
		for _, g := range grants {
			family := "(not configured)"
			if m, ok := a.svc.Config.Model(g.ModelID); ok {
				family = m.Family
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.ModelID, family, g.GrantedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	}
	return nil
}
