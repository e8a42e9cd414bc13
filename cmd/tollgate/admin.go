package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/accounts"
	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/plaintext"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/audit"
)

const adminUsage = `tollgate admin: the operator's CLI. It works on the database directly (DATABASE_URL, or the
local development cluster when unset); it needs no API key.

  account create NAME [-plan PLAN]          create an account (grants the plan's models and credit)
  account list                              list accounts with their balances
  account end-user ID [-value V]            the account a provider's end-user identifier (tg_...: a
                                            safety_identifier or metadata.user_id in an abuse report)
                                            was sent for; -value: check that it stands for the end-user
                                            value V the account's client sent
  key create ACCOUNT [-name N] [-rpm N] [-expires 30d|2027-01-01] [-credit-cap MICROS
             [-cap-period none|daily|monthly]] [-models a,b] [-quiet]
                                            mint a key; it is printed once (-rpm -1: the plan's default,
                                            at most the plan's max_rpm; -credit-cap: the most the key may
                                            spend a period, UTC days or months; -models: a subset of the
                                            account's models, the others answer as unknown)
  key list ACCOUNT                          list the account's keys (never the keys themselves): status,
                                            caps, expiry, spend this cap period, last use
  key revoke KEY_ID [-yes]                  revoke a key for ever (every gateway refuses it within a second)
                                            and end the agent sessions started with it (asks first; -yes:
                                            without asking, as it must be when stdin is not a terminal)
  key revoke-all ACCOUNT [-yes]             revoke every key of the account, ending their agent sessions
                                            (asks first; -yes: without asking, as it must be when stdin
                                            is not a terminal)
  key disable KEY_ID                        refuse a key until it is enabled again (within a second)
  key enable KEY_ID                         let a disabled key work again
  key set-rpm KEY_ID N                      set a key's requests-per-minute cap (0: no cap)
  key set-cap KEY_ID MICROS [-cap-period none|daily|monthly]
                                            set a key's credit cap (-1: no cap; the period defaults to the
                                            key's current one)
  credit grant ACCOUNT MICROS [-note T] [-idempotency-key K]
                                            add credit as a ledger entry (1 USD = 1000000 micros)
  credit show ACCOUNT [-n N]                balance and the newest ledger entries
  usage list ACCOUNT [-n N]                 the newest usage records: model, upstream, tokens by kind, hosted
                                            tool calls, cost, status (on credit: served in an outage)
` + usageExportUsage + usageImportSpillUsage + `  model grant ACCOUNT MODEL                 let the account use a configured model
  model revoke ACCOUNT MODEL                withdraw a model from the account
  model list ACCOUNT                        the account's models
` + providerKeyAdminUsage + datasetUsage + agentAdminUsage + memberAdminUsage + auditAdminUsage + `
ACCOUNT is an account id or name. Global flag: -config FILE (models and plans). Each list or show
command takes -json: one JSON document of snake_case fields instead of the table, for scripts.
A noun with -h lists its commands alone (tollgate admin key -h), a command with -h its flags.

` + datasetStorageNote

// runAdmin runs one admin command, writing its output to out and what the operator should know
// beside it (the usage, when no command is given; notes; questions) to stderr; it asks its
// questions on stdin, and only when stdin is a terminal.
func runAdmin(ctx context.Context, args []string, out io.Writer) error {
	return runAdminWith(ctx, args, adminIO{out: out, notes: os.Stderr, in: os.Stdin, interactive: stdinIsTerminal()})
}

// runAdminWith runs one admin command, talking to the operator through streams.
func runAdminWith(ctx context.Context, args []string, streams adminIO) error {
	global := flag.NewFlagSet("admin", flag.ContinueOnError)
	configPath := global.String("config", "", "config file")
	// The usage is printed when asked for, never before a mistake (errorReport names -h).
	global.SetOutput(io.Discard)
	if err := global.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(streams.out, adminUsage)
		return nil
	} else if err != nil {
		return withHelp(usageError("admin: "+err.Error()), "tollgate admin -h", "its commands and flags")
	}
	args = global.Args()
	if len(args) == 1 && args[0] == "help" {
		fmt.Fprint(streams.out, adminUsage)
		return nil
	}
	if len(args) == 0 {
		// `tollgate admin` alone lists the commands, as `tollgate` alone does.
		fmt.Fprint(streams.notes, adminUsage)
		return commandLineError(args)
	}
	if len(args) >= 2 && isHelpFlag(args[1]) {
		// `tollgate admin key -h`: the noun's commands, before the database too.
		if len(commandsOf(args[0])) == 0 {
			return withHelp(commandLineError(args[:1]), "tollgate admin -h", "the commands")
		}
		fmt.Fprint(streams.out, nounUsage(args[0]))
		return nil
	}
	if len(args) < 2 || adminCommands[args[0]+" "+args[1]] == nil {
		// Before the database: a mistyped command needs none to be told so.
		return withHelp(commandLineError(args), "tollgate admin -h", "the commands")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	// The command checks its command line before it opens the database (useDatabase): a
	// mistake in it, or its -h, needs none.
	a := &admin{svc: &accounts.Service{Config: cfg}, adminIO: streams}
	defer a.closeDatabase()
	return a.run(ctx, args[0], args[1], args[2:])
}

// useDatabase opens the database for the command, once its command line is checked: each
// command calls it after its flags and arguments parsed and every check of them that needs no
// database passed, before its first use of a.svc.Store (or of a service made from it), so that
// a mistake in the command line is told as one (exit status 2) where there is no database to
// be had. It connects to DATABASE_URL or the local cluster (requireLocalCluster), refuses a
// database whose schema is older than the binary (requireMigrated) and warns of one newer; it
// does nothing when the database is open already.
func (a *admin) useDatabase(ctx context.Context) error {
	if a.svc.Store != nil {
		return nil
	}
	if err := requireLocalCluster(); err != nil {
		return err
	}
	d, err := connectDatabase(ctx, true, newLogger("text"))
	if err != nil {
		return err
	}
	a.db = d
	unknown, err := requireMigrated(ctx, d.Store)
	if err != nil {
		return err
	}
	if len(unknown) > 0 {
		fmt.Fprintln(a.notes, newerSchemaWarning(unknown, "this admin command runs on"))
	}
	a.svc.Store = d.Store
	return nil
}

// closeDatabase closes the database useDatabase opened, if it did.
func (a *admin) closeDatabase() {
	if a.db != nil {
		a.db.Close()
	}
}

// requireMigrated refuses an admin command against a database that lacks migrations this
// binary has: the operator's CLI never changes the schema, which an admin binary newer than the
// running gateways would otherwise upgrade under them; `tollgate migrate` (or serve, or dev)
// applies them, once the gateways are ready for it. It returns the migrations the database
// has that the binary lacks (store.MigrationStatus), of which the command warns.
func requireMigrated(ctx context.Context, st *store.Store) (unknown []string, err error) {
	pending, unknown, err := st.MigrationStatus(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the database's schema version: %w", err)
	}
	if len(pending) == 0 {
		return unknown, nil
	}
	return nil, fmt.Errorf("the database lacks %d schema migration(s) this tollgate has (%s): the admin commands do not change the schema; "+
		"run `tollgate migrate` with this binary first (it upgrades the schema under the running gateways: upgrade them with it)",
		len(pending), versionSpan(pending))
}

// newerSchemaWarning is what a binary says when the database records migrations it does not
// have (store.UnknownMigrations): the schema is newer than the binary, whose writes the newer
// schema may refuse or read otherwise. It runs on, said what: a rolling upgrade leaves the older
// gateways serving on the new schema for a while, and refusing would stop them; the operator
// is told to finish the upgrade (or the rollback's restore).
func newerSchemaWarning(unknown []string, what string) string {
	return fmt.Sprintf("warning: the database's schema is newer than this tollgate: it has %d migration(s) this binary does not know (%s), "+
		"applied by a newer tollgate; %s, but rows it writes may be refused or read otherwise: "+
		"run the tollgate version that applied them (upgrade this binary), or restore the database from before them to roll back",
		len(unknown), versionSpan(unknown), what)
}

// versionSpan names migration versions: all of them when they are few, else the first and the
// last.
func versionSpan(versions []string) string {
	if len(versions) <= 3 {
		return strings.Join(versions, ", ")
	}
	return versions[0] + " … " + versions[len(versions)-1]
}

// adminIO is where an admin command talks to the operator.
type adminIO struct {
	// out receives the command's output (stdout): what a script reads.
	out io.Writer
	// notes receives what the operator should know beside a command's output (stderr).
	notes io.Writer
	// in is where the operator answers a question (stdin), asked only when interactive.
	in io.Reader
	// interactive reports whether in is a terminal, with a person at it to answer.
	interactive bool
}

type admin struct {
	// svc holds the configuration, and the store once the command opened the database
	// (useDatabase).
	svc *accounts.Service
	adminIO
	// db is the database useDatabase opened, which runAdminWith closes.
	db *database
}

// adminHandler runs one admin command with its arguments.
type adminHandler func(a *admin, ctx context.Context, args []string) error

// adminCommands are the admin commands by "noun verb". Each has its lines in adminUsage, which
// its -h prints (TestAdminCommandConventions checks every one of them), and checks its command
// line before it opens the database (useDatabase; TestAdminMistakesNeedNoDatabase).
var adminCommands = map[string]adminHandler{
	"account create":      (*admin).accountCreate,
	"account list":        (*admin).accountList,
	"account end-user":    (*admin).accountEndUser,
	"key create":          (*admin).keyCreate,
	"key list":            (*admin).keyList,
	"key revoke":          (*admin).keyRevoke,
	"key revoke-all":      (*admin).keyRevokeAll,
	"key disable":         func(a *admin, ctx context.Context, args []string) error { return a.keyDisable(ctx, true, args) },
	"key enable":          func(a *admin, ctx context.Context, args []string) error { return a.keyDisable(ctx, false, args) },
	"key set-rpm":         (*admin).keySetRPM,
	"key set-cap":         (*admin).keySetCap,
	"credit grant":        (*admin).creditGrant,
	"credit show":         (*admin).creditShow,
	"usage list":          (*admin).usageList,
	"usage export":        (*admin).usageExport,
	"usage import-spill":  (*admin).usageImportSpill,
	"model grant":         verbCommand((*admin).model, "grant"),
	"model revoke":        verbCommand((*admin).model, "revoke"),
	"model list":          verbCommand((*admin).model, "list"),
	"provider-key set":    verbCommand((*admin).providerKeyAdmin, "set"),
	"provider-key list":   verbCommand((*admin).providerKeyAdmin, "list"),
	"provider-key remove": verbCommand((*admin).providerKeyAdmin, "remove"),
	"dataset put":         verbCommand((*admin).dataset, "put"),
	"dataset list":        verbCommand((*admin).dataset, "list"),
	"dataset delete":      verbCommand((*admin).dataset, "delete"),
	"slot assign":         agentCommand("slot", "assign"),
	"slot unassign":       agentCommand("slot", "unassign"),
	"slot list":           agentCommand("slot", "list"),
	"ticket open":         agentCommand("ticket", "open"),
	"ticket close":        agentCommand("ticket", "close"),
	"ticket list":         agentCommand("ticket", "list"),
	"approval list":       agentCommand("approval", "list"),
	"approval approve":    agentCommand("approval", "approve"),
	"approval deny":       agentCommand("approval", "deny"),
	"member add":          verbCommand((*admin).memberAdmin, "add"),
	"member list":         verbCommand((*admin).memberAdmin, "list"),
	"member remove":       verbCommand((*admin).memberAdmin, "remove"),
	"audit list":          (*admin).auditList,
}

// usageCommandLine matches a command's first line in adminUsage: "  noun verb ...".
var usageCommandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*) ([a-z-]+)\b`)

// commandsOf are the admin commands of noun ("key create", "key list", …) in adminUsage's
// order, or none when no command begins with noun.
func commandsOf(noun string) []string {
	var names []string
	for _, m := range usageCommandLine.FindAllStringSubmatch(adminUsage, -1) {
		if name := m[1] + " " + m[2]; m[1] == noun && adminCommands[name] != nil {
			names = append(names, name)
		}
	}
	return names
}

// commandLineError is the usage error of an admin command line whose first words name no
// command: no words at all, a noun that begins no command (the error names those that do), or
// a noun without a verb or with one it lacks (the error names its commands).
func commandLineError(args []string) error {
	if len(args) == 0 {
		return usageError("admin needs a command")
	}
	noun, given := args[0], strings.Join(args[:min(2, len(args))], " ")
	commands := commandsOf(noun)
	if len(commands) == 0 {
		var nouns []string
		for name := range adminCommands {
			nouns = append(nouns, strings.Fields(name)[0])
		}
		slices.Sort(nouns)
		return usageError(fmt.Sprintf("unknown admin command %q: the commands begin with %s", given, orList(slices.Compact(nouns))))
	}
	if len(args) == 1 {
		return usageError(fmt.Sprintf("admin %s needs a command: %s", noun, orList(commands)))
	}
	return usageError(fmt.Sprintf("unknown admin command %q: admin %s has %s", given, noun, orList(commands)))
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// verbCommand is the command of a noun's handler that takes the verb.
func verbCommand(run func(a *admin, ctx context.Context, verb string, args []string) error, verb string) adminHandler {
	return func(a *admin, ctx context.Context, args []string) error { return run(a, ctx, verb, args) }
}

// agentCommand is a slot, ticket or approval command.
func agentCommand(noun, verb string) adminHandler {
	return func(a *admin, ctx context.Context, args []string) error { return a.agentAdmin(ctx, noun, verb, args) }
}

// run runs the command noun verb. Asked for its help (-h), it prints its lines of adminUsage and
// its flags on out and ends as flag.ErrHelp (exit status 0); a mistake in its command line is a
// usageError (exit status 2) with the hint of the command's -h (withHelp), printed on stderr by
// main with the other failures (exit status 1).
func (a *admin) run(ctx context.Context, noun, verb string, args []string) error {
	cmd, ok := adminCommands[noun+" "+verb]
	if !ok {
		return withHelp(commandLineError([]string{noun, verb}), "tollgate admin -h", "the commands")
	}
	err := cmd(a, ctx, args)
	if h, ok := errors.AsType[*helpRequest](err); ok {
		a.printHelp(h.flags)
		return flag.ErrHelp
	}
	return withHelp(err, "tollgate admin "+noun+" "+verb+" -h", "its arguments and flags")
}

// helpRequest is a command's -h, found by parse: run prints the help of the flag set's command.
type helpRequest struct{ flags *flag.FlagSet }

func (h *helpRequest) Error() string { return flag.ErrHelp.Error() }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

// printHelp prints the help of the command whose flag set fs is: its lines of adminUsage, then
// its flags, if it has any.
func (a *admin) printHelp(fs *flag.FlagSet) {
	fmt.Fprint(a.out, commandUsage(fs.Name()))
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if !hasFlags {
		return
	}
	fmt.Fprintf(a.out, "\nFlags of %s:\n", fs.Name())
	fs.SetOutput(a.out)
	fs.PrintDefaults()
}

// commandUsage is the lines of adminUsage that document command (such as "key create") after
// "tollgate admin" (commandLines); a command without them gets a line that says so.
func commandUsage(command string) string {
	lines := commandLines(command)
	if lines == "" {
		return "tollgate admin " + command + "\n"
	}
	return "tollgate admin" + strings.TrimPrefix(lines, " ")
}

// commandLines is the lines of adminUsage that document command (such as "key create"), as
// `tollgate admin -h` prints them: the line that starts with it and the indented lines after
// it.
func commandLines(command string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(adminUsage) {
		switch {
		case strings.HasPrefix(line, "  "+command+" "), strings.TrimSpace(line) == command:
			in = true
		case in && !strings.HasPrefix(line, "     "):
			in = false
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// nounUsage is `tollgate admin NOUN -h`: the lines of adminUsage of noun's commands
// (commandLines), under a line naming the noun and over one naming each command's -h.
func nounUsage(noun string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tollgate admin %s: the %s commands ('tollgate admin -h' lists every command).\n\n", noun, noun)
	for _, command := range commandsOf(noun) {
		b.WriteString(commandLines(command))
	}
	fmt.Fprintf(&b, "\nRun 'tollgate admin %s VERB -h' for a command's arguments and flags.\n", noun)
	return b.String()
}

// isHelpFlag reports whether arg asks for help as the flag package reads it: -h, -help, --h or
// --help.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--h" || arg == "--help"
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
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, &helpRequest{flags: fs}
		} else if err != nil {
			return nil, usageError(fmt.Sprintf("%s: %v", fs.Name(), err))
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
	// A name or a plan the operator mistyped is a mistake in the command line; a name taken is
	// the database's answer.
	if err := accounts.CheckAccountName(pos[0]); err != nil {
		return usageError(err.Error())
	}
	if _, ok := a.svc.Config.Plan(*plan); !ok {
		return usageError(fmt.Sprintf("-plan %q: no such plan in the configuration (%s)", *plan, strings.Join(a.planNames(), ", ")))
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	// A name taken (exactly, or but for letter case) is an *accounts.NameTakenError, whose
	// message names the account that has it.
	acct, err := a.svc.CreateAccount(ctx, pos[0], *plan)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "account %s created: id %s, plan %s, balance %d micros (%s)\n",
		acct.Name, acct.ID, acct.Plan, acct.BalanceMicros, apierror.USD(acct.BalanceMicros))
	return nil
}

func (a *admin) accountList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("account list", flag.ContinueOnError)
	asJSON := jsonFlag(fs)
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	accts, err := a.svc.Store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		list := make([]accountJSON, 0, len(accts))
		for _, ac := range accts {
			list = append(list, accountJSON{ID: ac.ID.String(), Name: ac.Name, Plan: ac.Plan, BalanceMicros: ac.BalanceMicros,
				BalanceUSD: balanceUSD(ac.BalanceMicros), CreatedAt: utc(ac.CreatedAt)})
		}
		return a.writeJSON(list)
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
	expires := fs.String("expires", "", "when the key stops working: a duration (30d, 12h) or a date (2027-01-01, RFC 3339)")
	creditCap := new(microsValue)
	*creditCap = -1
	fs.Var(creditCap, "credit-cap", "the most the key may spend a cap period, in micro-units (1 USD = 1000000; -1: no cap)")
	capPeriod := fs.String("cap-period", "none", "how often the credit cap starts again: none, daily or monthly (UTC)")
	models := fs.String("models", "", "comma-separated models the key may use (default: every model of the account)")
	quiet := fs.Bool("quiet", false, "print only the key")
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if *rpm < -1 {
		return usageError("-rpm: the cap must be a non-negative integer, or -1 for the plan's default")
	}
	if *creditCap < -1 {
		return usageError("-credit-cap: the cap must be a non-negative number of micro-units, or -1 for none")
	}
	period, err := capPeriodFlag(*capPeriod)
	if err != nil {
		return err
	}
	o := accounts.KeyOptions{Name: *name, RPM: *rpm, CapPeriod: period, CreatedBy: "operator"}
	if *expires != "" {
		at, err := parseExpiry(*expires, time.Now())
		if err != nil {
			return err
		}
		o.ExpiresAt = &at
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	if *creditCap >= 0 {
		micros := int64(*creditCap)
		o.CreditCapMicros = &micros
	}
	if *models != "" {
		o.Models = strings.Split(*models, ",")
	}
	k, err := a.svc.CreateKeyWith(ctx, acct.ID, o)
	if err != nil {
		return keyError(err)
	}
	if err := a.auditKey(ctx, audit.ActionKeyCreated, "", nil, &k.Key); err != nil {
		return err
	}
	if err := a.noteNamesakes(ctx, acct.Name, k.Key); err != nil {
		return err
	}
	if *quiet {
		fmt.Fprintln(a.out, k.Plain)
		return nil
	}
	fmt.Fprintf(a.out, "key %s created for account %s (%s). It is shown once; only its hash is stored:\n\n%s\n",
		k.Key.ID, acct.Name, describeLimits(k.Key), k.Plain)
	return nil
}

// noteNamesakes says on stderr which other keys of the account that are not revoked have the
// new key's name (accounts.Service.Namesakes), which a rotation makes for a while (the new key
// beside the old, both named ci): the keys are then told apart by their ids and last four
// only, which it names. The console's key-created page says the same (impl/web).
func (a *admin) noteNamesakes(ctx context.Context, account string, k store.APIKey) error {
	namesakes, err := a.svc.Namesakes(ctx, k)
	if err != nil {
		return err
	}
	var others []string
	for _, o := range namesakes {
		others = append(others, fmt.Sprintf("%s (%s…%s)", o.ID, o.DisplayPrefix, o.DisplaySuffix))
	}
	if len(others) > 0 {
		fmt.Fprintf(a.notes, "note: account %s has %d other key(s) named %q that are not revoked: %s; the new key %s ends %s\n",
			account, len(others), plaintext.Visible(k.Name, false), strings.Join(others, ", "), k.ID, k.DisplaySuffix)
	}
	return nil
}

// keyError turns an invalid key option into a usage error naming the flag; the plan's key quota
// (no flag) is an error naming max_keys.
func keyError(err error) error {
	var inv *accounts.InvalidError
	if errors.As(err, &inv) && inv.Field == "max_keys" {
		return fmt.Errorf("max_keys: %s", inv.Message)
	}
	if errors.As(err, &inv) {
		flagName := strings.ReplaceAll(inv.Field, "_", "-")
		return usageError(fmt.Sprintf("-%s: %s", flagName, inv.Message))
	}
	return err
}

// capPeriodFlag reads -cap-period: none, daily or monthly ("" is none).
func capPeriodFlag(s string) (store.CapPeriod, error) {
	p, err := store.ParseCapPeriod(s)
	if err != nil {
		return "", usageError(fmt.Sprintf("-cap-period: the cap period %q is not none, daily or monthly", s))
	}
	return p, nil
}

// parseExpiry reads -expires: a duration from now (30d, 12h, 90m) or a time (2027-01-01, taken
// as the start of that UTC day, or RFC 3339).
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return now.Add(time.Duration(days) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError(fmt.Sprintf("-expires %q: want a duration (30d, 12h) or a date (2027-01-01, or RFC 3339)", s))
}

// describeLimits says a key's limits in a few words.
func describeLimits(k store.APIKey) string {
	parts := []string{fmt.Sprintf("rpm cap %d", k.RPMLimit)}
	if k.ExpiresAt != nil {
		parts = append(parts, "expires "+k.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if k.CreditCapMicros != nil {
		parts = append(parts, fmt.Sprintf("credit cap %d micros %s", *k.CreditCapMicros, capPeriodText(k.CapPeriod)))
	}
	if k.Models != nil {
		parts = append(parts, "models "+strings.Join(k.Models, ","))
	}
	return strings.Join(parts, ", ")
}

func capPeriodText(p store.CapPeriod) string {
	switch p {
	case store.CapPeriodDaily:
		return "a day"
	case store.CapPeriodMonthly:
		return "a month"
	}
	return "in all"
}

func (a *admin) keyList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("key list", flag.ContinueOnError)
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
	keys, err := a.svc.ListKeys(ctx, acct.ID)
	if err != nil {
		return err
	}
	held, quota := heldKeys(keys), a.svc.KeyQuota(acct.Plan)
	if *asJSON {
		list := keyListJSON{AccountID: acct.ID.String(), Account: acct.Name, Plan: acct.Plan, KeysHeld: held, Keys: keysJSON(keys)}
		if quota > 0 {
			list.MaxKeys = &quota
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX…LAST4\tNAME\tSTATUS\tRPM\tEXPIRES\tCREDIT_CAP\tPERIOD\tSPENT_THIS_PERIOD\tMODELS\tCREATED_BY\tCREATED\tLAST_USED")
	stamp := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, k := range keys {
		capText, models := "-", "all"
		if k.CreditCapMicros != nil {
			capText = strconv.FormatInt(*k.CreditCapMicros, 10)
		}
		if k.Models != nil {
			models = strings.Join(k.Models, ",")
		}
		fmt.Fprintf(tw, "%s\t%s…%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", k.ID, k.DisplayPrefix, k.DisplaySuffix, plaintext.Visible(k.Name, false), k.Status,
			k.RPMLimit, stamp(k.ExpiresAt), capText, k.CapPeriod, k.PeriodSpentMicros, models, plaintext.Visible(k.CreatedBy, false),
			k.CreatedAt.UTC().Format(time.RFC3339), stamp(lastUse(k)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if quota > 0 {
		_, err = fmt.Fprintf(a.out, "\nkeys: %d of %d (max_keys of plan %s; revoked keys do not count)\n", held, quota, acct.Plan)
	} else {
		_, err = fmt.Fprintf(a.out, "\nkeys: %d (plan %s has no key quota)\n", held, acct.Plan)
	}
	return err
}

// heldKeys is how many of keys count against the plan's max_keys: those not revoked.
func heldKeys(keys []accounts.KeyInfo) int {
	held := 0
	for _, k := range keys {
		if k.Status != "revoked" {
			held++
		}
	}
	return held
}

// lastUse is when the key was last used: its last request or, if later, its last use
// otherwise recorded; nil when never.
func lastUse(k accounts.KeyInfo) *time.Time {
	last := k.LastRequestAt
	if last == nil || (k.LastUsedAt != nil && k.LastUsedAt.After(*last)) {
		last = k.LastUsedAt
	}
	return last
}

// keysJSON is key list's -json: what its table shows of each key.
func keysJSON(keys []accounts.KeyInfo) []keyJSON {
	list := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		j := keyJSON{ID: k.ID.String(), Name: k.Name, Prefix: k.DisplayPrefix, LastFour: k.DisplaySuffix, Status: k.Status,
			RPMLimit: k.RPMLimit, ExpiresAt: utcOrNil(k.ExpiresAt), Models: k.Models, CreatedBy: k.CreatedBy,
			CreatedAt: utc(k.CreatedAt), LastUsedAt: utcOrNil(lastUse(k))}
		if k.CreditCapMicros != nil {
			j.CreditCap = &keyCapJSON{CapMicros: *k.CreditCapMicros, Period: string(k.CapPeriod), SpentMicros: k.PeriodSpentMicros}
		}
		list = append(list, j)
	}
	return list
}

// auditKey records a key change the operator made in the key's account's audit log, as the
// web application's Keys page records its own: actor operator, the key as it was (before; nil
// for a new key) and as it is (after), described as the page describes it. The change is made
// already, so a failure to record it is reported, not undone.
func (a *admin) auditKey(ctx context.Context, action, note string, before, after *store.APIKey) error {
	e := audit.Entry{AccountID: after.AccountID, Actor: "operator", Action: action, Target: "key " + after.ID.String() + note,
		After: accounts.AuditState(*after, time.Now())}
	if before != nil {
		e.Before = accounts.AuditState(*before, time.Now())
	}
	if err := (&audit.Log{Store: a.svc.Store}).Record(ctx, e); err != nil {
		return fmt.Errorf("key %s: the change is made, but recording it in the audit log failed: %w", after.ID, err)
	}
	return nil
}

func keyID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return id, usageError(fmt.Sprintf("%q is not a key id (see 'admin key list')", s))
	}
	return id, nil
}

// key opens the database (useDatabase) and reads the key of a KEY_ID argument (keyID) with
// its account, for the account-scoped operations of accounts.Service (the operator may act on
// any account).
func (a *admin) key(ctx context.Context, id uuid.UUID) (store.APIKey, error) {
	if err := a.useDatabase(ctx); err != nil {
		return store.APIKey{}, err
	}
	k, err := a.svc.Store.GetAPIKey(ctx, id)
	if err != nil {
		return store.APIKey{}, fmt.Errorf("key %s: %w", id, err)
	}
	return k, nil
}

func (a *admin) keyRevoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("key revoke", flag.ContinueOnError)
	yes := yesFlag(fs)
	pos, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	id, err := keyID(pos[0])
	if err != nil {
		return err
	}
	k, err := a.key(ctx, id)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		// A revoked key is refused (and adds nothing to the audit log), saying so rather than
		// "not found": the operator sees the key is stopped, and since when.
		return fmt.Errorf("key %s (%s…%s) was revoked already, at %s: nothing changed", k.ID, k.DisplayPrefix, k.DisplaySuffix, k.RevokedAt.Format(time.RFC3339))
	}
	// A revoked key cannot be made to work again: it is asked for as revoke-all is.
	what, err := a.revokeWhat(ctx, k)
	if err != nil {
		return err
	}
	if err := a.confirm(*yes, "key revoke", what); err != nil {
		return err
	}
	// The agent sessions started with the key end with it (key_revoked), as on the console.
	if a.svc.Agents, err = a.agents(); err != nil {
		return err
	}
	before := k
	k, err = a.svc.Revoke(ctx, k.AccountID, k.ID)
	if err != nil {
		return fmt.Errorf("revoke key %s: %w", pos[0], err)
	}
	if err := a.auditKey(ctx, audit.ActionKeyRevoked, "", &before, &k); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "key %s (%s…%s) revoked at %s\n", k.ID, k.DisplayPrefix, k.DisplaySuffix, k.RevokedAt.Format(time.RFC3339))
	return nil
}

func (a *admin) keyRevokeAll(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("key revoke-all", flag.ContinueOnError)
	yes := yesFlag(fs)
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
	what, err := a.revokeAllWhat(ctx, acct)
	if err != nil {
		return err
	}
	if err := a.confirm(*yes, "key revoke-all", what); err != nil {
		return err
	}
	if a.svc.Agents, err = a.agents(); err != nil {
		return err
	}
	keys, err := a.svc.RevokeAll(ctx, acct.ID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		before := k
		before.RevokedAt = nil
		if err := a.auditKey(ctx, audit.ActionKeyRevoked, " (revoke all)", &before, &k); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.out, "%d key(s) of account %s revoked\n", len(keys), acct.Name)
	return nil
}

func (a *admin) keyDisable(ctx context.Context, disable bool, args []string) error {
	verb := map[bool]string{true: "disable", false: "enable"}[disable]
	pos, err := parse(flag.NewFlagSet("key "+verb, flag.ContinueOnError), args, 1)
	if err != nil {
		return err
	}
	id, err := keyID(pos[0])
	if err != nil {
		return err
	}
	k, err := a.key(ctx, id)
	if err != nil {
		return err
	}
	before := k
	if disable {
		// The agent sessions started with the key end with it (key_disabled), as on the console.
		if a.svc.Agents, err = a.agents(); err != nil {
			return err
		}
		k, err = a.svc.Disable(ctx, k.AccountID, k.ID)
	} else {
		k, err = a.svc.Enable(ctx, k.AccountID, k.ID)
	}
	if err != nil {
		return fmt.Errorf("%s key %s: %w (revoked keys cannot be changed)", verb, pos[0], err)
	}
	if err := a.auditKey(ctx, audit.ActionKeyChanged, "", &before, &k); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "key %s (%s…%s) %sd\n", k.ID, k.DisplayPrefix, k.DisplaySuffix, verb)
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
	k, err := a.key(ctx, id)
	if err != nil {
		return err
	}
	l := accounts.LimitsOf(k)
	l.RPMLimit = n
	before := k
	k, err = a.svc.SetLimits(ctx, k.AccountID, k.ID, l)
	if err != nil {
		return keyError(fmt.Errorf("key %s: %w", pos[0], err))
	}
	if err := a.auditKey(ctx, audit.ActionLimitChanged, "", &before, &k); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "key %s: requests-per-minute cap %d\n", k.ID, k.RPMLimit)
	return nil
}

func (a *admin) keySetCap(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("key set-cap", flag.ContinueOnError)
	capPeriod := fs.String("cap-period", "", "none, daily or monthly (default: the key's current period)")
	pos, err := parse(fs, args, 2)
	if err != nil {
		return err
	}
	id, err := keyID(pos[0])
	if err != nil {
		return err
	}
	micros, err := strconv.ParseInt(strings.ReplaceAll(pos[1], "_", ""), 10, 64)
	if err != nil || micros < -1 {
		return usageError("the cap must be a non-negative number of micro-units, or -1 for none")
	}
	newPeriod, err := capPeriodFlag(*capPeriod)
	if err != nil {
		return err
	}
	k, err := a.key(ctx, id)
	if err != nil {
		return err
	}
	period := k.CapPeriod
	if *capPeriod != "" {
		period = newPeriod
	}
	var capMicros *int64
	if micros >= 0 {
		capMicros = &micros
	}
	before := k
	k, err = a.svc.SetCreditCap(ctx, k.AccountID, k.ID, capMicros, period)
	if err != nil {
		return keyError(fmt.Errorf("key %s: %w", pos[0], err))
	}
	if err := a.auditKey(ctx, audit.ActionLimitChanged, "", &before, &k); err != nil {
		return err
	}
	if k.CreditCapMicros == nil {
		fmt.Fprintf(a.out, "key %s: no credit cap\n", k.ID)
		return nil
	}
	fmt.Fprintf(a.out, "key %s: credit cap %d micros %s\n", k.ID, *k.CreditCapMicros, capPeriodText(k.CapPeriod))
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
	micros, err := strconv.ParseInt(strings.ReplaceAll(pos[1], "_", ""), 10, 64)
	if err != nil || micros <= 0 {
		return usageError("MICROS must be a positive integer (1 USD = 1000000)")
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	e, created, err := a.svc.GrantCredit(ctx, acct.ID, micros, *idem, *note)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(a.out, "idempotency key %q was used already by ledger entry %d (+%d micros); nothing granted\n", e.IdempotencyKey, e.ID, e.AmountMicros)
		return nil
	}
	if err := a.audit(ctx, acct.ID, audit.ActionCreditGranted, fmt.Sprintf("ledger entry %d", e.ID), nil,
		map[string]any{"amount_micros": e.AmountMicros, "balance_after_micros": e.BalanceAfterMicros, "note": e.Note,
			"idempotency_key": e.IdempotencyKey}); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "ledger entry %d: +%d micros to %s; balance %d micros (%s)\n", e.ID, e.AmountMicros, acct.Name, e.BalanceAfterMicros, apierror.USD(e.BalanceAfterMicros))
	return nil
}

// hasModel reports whether the account is granted the model.
func (a *admin) hasModel(ctx context.Context, account uuid.UUID, model string) (bool, error) {
	grants, err := a.svc.Store.AccountModels(ctx, account)
	if err != nil {
		return false, err
	}
	for _, g := range grants {
		if g.ModelID == model {
			return true, nil
		}
	}
	return false, nil
}

// audit records a change the operator made to the account in its audit log, as the web
// console's changes are: actor operator, the target, and its state before and after (nil: none).
func (a *admin) audit(ctx context.Context, account uuid.UUID, action, target string, before, after any) error {
	e := audit.Entry{AccountID: account, Actor: "operator", Action: action, Target: target, Before: before, After: after}
	if err := (&audit.Log{Store: a.svc.Store}).Record(ctx, e); err != nil {
		return fmt.Errorf("%s: the change is made, but recording it in the audit log failed: %w", target, err)
	}
	return nil
}

// accountAndCount reads the arguments of a command that lists an account's newest rows of
// what: ACCOUNT [-n N] [-json]; asJSON tells whether -json was given.
func (a *admin) accountAndCount(ctx context.Context, command, what string, args []string) (acct store.Account, n int, asJSON bool, err error) {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	count := fs.Int("n", 20, "how many "+what)
	jsonOut := jsonFlag(fs)
	pos, err := parse(fs, args, 1)
	if err != nil {
		return store.Account{}, 0, false, err
	}
	if *count < 1 {
		return store.Account{}, 0, false, usageError("-n must be at least 1")
	}
	if err := a.useDatabase(ctx); err != nil {
		return store.Account{}, 0, false, err
	}
	acct, err = a.account(ctx, pos[0])
	return acct, *count, *jsonOut, err
}

func (a *admin) creditShow(ctx context.Context, args []string) error {
	acct, n, asJSON, err := a.accountAndCount(ctx, "credit show", "ledger entries", args)
	if err != nil {
		return err
	}
	entries, err := a.svc.Store.LedgerEntries(ctx, acct.ID, n)
	if err != nil {
		return err
	}
	if asJSON {
		c := creditJSON{AccountID: acct.ID.String(), Account: acct.Name, BalanceMicros: acct.BalanceMicros,
			BalanceUSD: balanceUSD(acct.BalanceMicros), Entries: make([]ledgerEntryJSON, 0, len(entries))}
		for _, e := range entries {
			c.Entries = append(c.Entries, ledgerEntryJSON{ID: e.ID, CreatedAt: utc(e.CreatedAt), Reason: e.Reason, AmountMicros: e.AmountMicros,
				BalanceAfterMicros: e.BalanceAfterMicros, IdempotencyKey: e.IdempotencyKey, Note: e.Note})
		}
		return a.writeJSON(c)
	}
	fmt.Fprintf(a.out, "account %s: balance %d micros (%s)\n\n", acct.Name, acct.BalanceMicros, apierror.USD(acct.BalanceMicros))
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAT\tREASON\tAMOUNT_MICROS\tBALANCE_AFTER\tIDEMPOTENCY_KEY\tNOTE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%+d\t%d\t%s\t%s\n", e.ID, e.CreatedAt.Format(time.RFC3339), e.Reason, e.AmountMicros, e.BalanceAfterMicros, e.IdempotencyKey, e.Note)
	}
	return tw.Flush()
}

// usageList prints the account's newest usage records: what each request used and cost.
func (a *admin) usageList(ctx context.Context, args []string) error {
	acct, n, asJSON, err := a.accountAndCount(ctx, "usage list", "usage records", args)
	if err != nil {
		return err
	}
	records, err := a.svc.Store.UsageRecords(ctx, acct.ID, n)
	if err != nil {
		return err
	}
	if asJSON {
		list := make([]usageJSON, 0, len(records))
		for _, r := range records {
			var trace *string
			if r.TraceID != ([16]byte{}) {
				trace = nilIfEmpty(hex.EncodeToString(r.TraceID[:]))
			}
			list = append(list, usageJSON{FinishedAt: utc(r.FinishedAt), RequestID: r.RequestID, Model: r.Model, Route: r.Route,
				APIKeyID: idOrNull(r.APIKeyID), AgentSessionID: idOrNull(r.AgentSessionID), Provider: r.Provider,
				UpstreamModel: r.UpstreamModel, InputTokens: r.InputTokens, CacheReadTokens: r.CacheReadTokens,
				CacheWrite5mTokens: r.CacheWrite5mTokens, CacheWrite1hTokens: r.CacheWrite1hTokens, OutputTokens: r.OutputTokens,
				HostedToolCalls: r.HostedCalls, HostedToolMicros: r.HostedMicros, CostMicros: r.CostMicros, Status: r.Status,
				OnCredit: r.OnCredit, TraceID: trace})
		}
		return a.writeJSON(list)
	}
	tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
	// IN is every input token; CACHE_READ, WRITE_5M and WRITE_1H are the parts of it read from
	// and written to the provider's prompt cache, each billed at its own rate (docs/billing.md).
	// TRACE is the request's trace id, which the tracing backend finds it by ("-": not traced).
	// ROUTE is the API route that served the request, "agent" for an agent session's model
	// call (-json has the key's and the session's ids).
	fmt.Fprintln(tw, "FINISHED	REQUEST	MODEL	ROUTE	UPSTREAM	IN	CACHE_READ	WRITE_5M	WRITE_1H	OUT	HOSTED_CALLS	COST_MICROS	STATUS	TRACE")
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
		trace := "-"
		if r.TraceID != ([16]byte{}) {
			trace = hex.EncodeToString(r.TraceID[:])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s/%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", r.FinishedAt.Format(time.RFC3339), r.RequestID, r.Model,
			orDash(r.Route), r.Provider, r.UpstreamModel, r.InputTokens, r.CacheReadTokens, r.CacheWrite5mTokens, r.CacheWrite1hTokens, r.OutputTokens,
			hosted, r.CostMicros, status, trace)
	}
	return tw.Flush()
}

func (a *admin) model(ctx context.Context, verb string, args []string) error {
	want := 2
	if verb == "list" {
		want = 1
	}
	fs := flag.NewFlagSet("model "+verb, flag.ContinueOnError)
	asJSON := new(bool)
	if verb == "list" {
		asJSON = jsonFlag(fs)
	}
	pos, err := parse(fs, args, want)
	if err != nil {
		return err
	}
	if verb == "grant" {
		if err := a.configuredModel(pos[1]); err != nil {
			return err
		}
	}
	if err := a.useDatabase(ctx); err != nil {
		return err
	}
	acct, err := a.account(ctx, pos[0])
	if err != nil {
		return err
	}
	if verb == "revoke" {
		if err := a.checkRevokedModel(ctx, acct, pos[1]); err != nil {
			return err
		}
	}
	switch verb {
	case "grant":
		had, err := a.hasModel(ctx, acct.ID, pos[1])
		if err != nil {
			return err
		}
		if err := a.svc.GrantModel(ctx, acct.ID, pos[1]); err != nil {
			return err
		}
		if !had {
			if err := a.audit(ctx, acct.ID, audit.ActionModelGranted, "model "+pos[1], nil, map[string]string{"model": pos[1]}); err != nil {
				return err
			}
		}
		fmt.Fprintf(a.out, "account %s may use %s\n", acct.Name, pos[1])
	case "revoke":
		if err := a.svc.RevokeModel(ctx, acct.ID, pos[1]); err != nil {
			return fmt.Errorf("model %s for %s: %w", pos[1], acct.Name, err)
		}
		if err := a.audit(ctx, acct.ID, audit.ActionModelRevoked, "model "+pos[1], map[string]string{"model": pos[1]}, nil); err != nil {
			return err
		}
		fmt.Fprintf(a.out, "account %s may no longer use %s\n", acct.Name, pos[1])
	default:
		grants, err := a.svc.Store.AccountModels(ctx, acct.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			list := make([]modelGrantJSON, 0, len(grants))
			for _, g := range grants {
				j := modelGrantJSON{ID: g.ModelID, GrantedAt: utc(g.GrantedAt)}
				if m, ok := a.svc.Config.Model(g.ModelID); ok {
					j.Family = &m.Family
				}
				list = append(list, j)
			}
			return a.writeJSON(list)
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

// checkRevokedModel refuses, as a mistake in the command line, a model to revoke that the
// configuration does not have, unless the account holds it (a model taken out of the
// configuration can still be withdrawn).
func (a *admin) checkRevokedModel(ctx context.Context, acct store.Account, model string) error {
	if _, ok := a.svc.Config.Model(model); ok {
		return nil
	}
	if had, err := a.hasModel(ctx, acct.ID, model); err != nil || had {
		return err
	}
	return a.configuredModel(model)
}

// configuredModel refuses, as a mistake in the command line, a model name the configuration
// does not have (a model to grant must be configured; checkRevokedModel).
func (a *admin) configuredModel(model string) error {
	if _, ok := a.svc.Config.Model(model); ok {
		return nil
	}
	ids := make([]string, 0, len(a.svc.Config.Models))
	for _, m := range a.svc.Config.Models {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return usageError(fmt.Sprintf("model %q is not in the configuration (it has %s)", model, strings.Join(ids, ", ")))
}

// planNames are the configuration's plans, sorted.
func (a *admin) planNames() []string {
	names := make([]string, 0, len(a.svc.Config.Plans))
	for _, p := range a.svc.Config.Plans {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}
