// Command tollgate is the gateway's binary: serve, migrate, admin (the operator's CLI), connect,
// prices and sim. Built with -tags dev it also has the development commands: dev (what `make
// run` starts), bench, relay, chaos and hostile (devtools.go). Configuration is read here, once: flags, the
// environment and the config file; nothing under impl/ reads the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/logsink"
	"github.com/tollgate/tollgate/impl/pgcluster"
	"github.com/tollgate/tollgate/impl/store"
)

// usage is `tollgate help`; a build with -tags dev adds its commands (devtools.go).
var usage = `tollgate: a metered multi-tenant gateway to hosted language models.

Usage:
  tollgate serve   [-config FILE]   serve the API (needs DATABASE_URL; REDIS_URL optional)
  tollgate migrate                  apply pending schema migrations to DATABASE_URL (or the local
                                    development cluster)
  tollgate admin ...                the operator's CLI ('tollgate admin -h' lists its commands)
  tollgate connect [-url URL] [-key KEY] CLIENT
                                    the settings for claude-code, codex, opencode, openai-sdk,
                                    anthropic-sdk, ai-sdk, langchain, mcp, curl (a quick check)
                                    or all, checked against the gateway ('tollgate connect -h')
  tollgate sim     [-listen ADDR]   the upstream simulator (OpenAI chat, Responses, Anthropic Messages)
  tollgate prices  [-config FILE] [-litellm FILE] [NAME...]
                                    the price catalog (USD per million tokens of each kind), and
                                    the price each configured model and expert is billed at

Environment:
  DATABASE_URL        PostgreSQL connection string. When unset, dev and admin use the local
                      cluster in $TOLLGATE_DATA_DIR (default ./.data), starting it if needed;
                      as root, under /var/tmp when the postgres OS user cannot reach that.
  TOLLGATE_DATA_DIR   where dev keeps its local PostgreSQL cluster (default ./.data)
  TOLLGATE_DATASETS_DIR  the dataset storage root (default $TOLLGATE_DATA_DIR/datasets)
  TOLLGATE_DATASET_STORE  dir (default) or s3: datasets in an S3-compatible bucket, set by
                      TOLLGATE_S3_ENDPOINT, TOLLGATE_S3_BUCKET, TOLLGATE_S3_REGION (or the
                      config's datasets section), credentials from AWS_ACCESS_KEY_ID and
                      AWS_SECRET_ACCESS_KEY
  OTEL_EXPORTER_OTLP_ENDPOINT  turns traces on (and the other OTEL_* variables; config
                      telemetry:); off by default
  TOLLGATE_CONFIG     config file (same as -config); default: the built-in configuration
  REDIS_URL           share per-key rate limits between gateway processes through Redis
  TOLLGATE_REPLICAS   how many gateway processes share the database and Redis (default 1;
                      learnt from Redis heartbeats with REDIS_URL): each key's rate cap is
                      shared out by it while Redis is down, and each account's last-known
                      available credit while the database is (-credit-failure-handling share;
                      there the processes seen holding credit in the database count too)
  TOLLGATE_OIDC_CLIENT_SECRET  the web application's client secret at its OpenID provider
                      (config web:); dev without one starts a development provider
  GODEBUG             serve and dev add schedtrace=2147483647, which keeps the Go runtime's
                      monitor thread from a deep sleep that every request paid to wake it
                      from (docs/operations.md); naming schedtrace yourself keeps your value
  LOG_FORMAT          json (default for serve) or text (default for dev)
  LOG_LEVEL           debug, info (default), warn, error
`

// commands are the commands of this binary, by name. A build with -tags dev adds the
// development commands (devtools.go), so that the production binary links none of the tools
// they use (the benchmark's load generator, the development OpenID provider, the chaos and
// hostile-load harnesses: impl/archtest checks it).
var commands = map[string]func(ctx context.Context, args []string) error{
	"serve":   func(ctx context.Context, args []string) error { return runServe(ctx, args, false) },
	"migrate": runMigrate,
	"admin":   func(ctx context.Context, args []string) error { return runAdmin(ctx, args, os.Stdout) },
	"connect": func(ctx context.Context, args []string) error { return runConnect(ctx, args, os.Stdout, os.Stderr) },
	"sim":     runSim,
	"prices":  func(_ context.Context, args []string) error { return runPrices(args, os.Stdout) },
}

// developmentCommands are the commands only a build with -tags dev has.
var developmentCommands = []string{"dev", "bench", "relay", "chaos", "hostile"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if cmd := os.Args[1]; cmd == "serve" || cmd == "dev" || cmd == "relay" {
		// First: it may execute the binary again. The bench's relays (relay) run like the
		// gateway, so that the floor they measure is the same runtime's.
		keepMonitorAwake()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd := os.Args[1]; {
	case cmd == "help" || cmd == "-h" || cmd == "-help" || cmd == "--help":
		fmt.Print(usage)
		return
	case commands[cmd] != nil:
		err = runCommand(ctx, cmd, os.Args[2:])
	case slices.Contains(developmentCommands, cmd):
		fmt.Fprintf(os.Stderr, "tollgate: %q is a development command, left out of this build: build with `go build -tags dev ./cmd/tollgate` (make run, make bench, make chaos and make hostile do)\n", cmd)
		os.Exit(2)
	default:
		fmt.Fprint(os.Stderr, errorReport(withHelp(usageError(fmt.Sprintf("unknown command %q", cmd)), "tollgate -h", "the commands")))
		os.Exit(2)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stderr, errorReport(err))
	}
	if code := exitStatus(err); code != 0 {
		os.Exit(code)
	}
}

// runCommand runs the command cmd with args. A usage error it returns without a hint gets the
// hint of the command's -h (withHelp), so that every command's mistake is its line and the help
// that rights it, none followed or preceded by the usage.
func runCommand(ctx context.Context, cmd string, args []string) error {
	return withHelp(commands[cmd](ctx, args), "tollgate "+cmd+" -h", "its flags")
}

// exitStatus is the process's exit status after a command returned err: 0 when it succeeded
// or printed the help its -h asked for, 2 for a mistake in the command line, else 1.
func exitStatus(err error) int {
	var u usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// usageError is a mistake in the command line.
type usageError string

func (u usageError) Error() string { return string(u) }

// helpHint is a mistake in the command line with the help that tells how to right it, which
// errorReport names on a line of its own after the mistake's: the mistake stays the last thing
// the operator reads, where the whole usage printed before it buried it.
type helpHint struct {
	err error
	// help is the command line that prints the help, such as "tollgate admin usage list -h".
	help string
	// what is what the help tells, such as "its arguments and flags".
	what string
}

func (h *helpHint) Error() string { return h.err.Error() }
func (h *helpHint) Unwrap() error { return h.err }

// withHelp is err with the hint that help (a command line) tells what, when err is a usage
// error that has no hint yet; any other error is returned as it is.
func withHelp(err error, help, what string) error {
	if _, ok := errors.AsType[usageError](err); !ok {
		return err
	}
	if _, ok := errors.AsType[*helpHint](err); ok {
		return err
	}
	return &helpHint{err: err, help: help, what: what}
}

// errorReport is what the process prints on standard error for a command's error: the error
// on one line after "tollgate: ", then, for a usage error with a hint (withHelp), "run 'HELP'
// for WHAT" on the next.
func errorReport(err error) string {
	report := "tollgate: " + err.Error() + "\n"
	if h, ok := errors.AsType[*helpHint](err); ok {
		report += "run '" + h.help + "' for " + h.what + "\n"
	}
	return report
}

// parseFlags parses a command's flags as every command does: asked for its help (-h, -help),
// it prints the flag set's usage on help (standard output: `tollgate serve -h | less` shows
// it) and returns flag.ErrHelp (exit status 0); a flag that does not parse is a usage error
// whose hint names the command's -h (withHelp), the usage not printed before it.
func parseFlags(fs *flag.FlagSet, args []string, help io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(help)
		if lines := topCommandLines(fs.Name()); lines != "" && !customUsage[fs.Name()] {
			fmt.Fprintf(help, "Usage:\n%s", lines)
			if hasFlags(fs) {
				fmt.Fprintln(help, "\nFlags:")
				fs.PrintDefaults()
			}
		} else {
			fs.Usage()
		}
		return err
	case err != nil:
		return withHelp(usageError(err.Error()), "tollgate "+fs.Name()+" -h", "its flags")
	}
	return nil
}

// customUsage names the commands whose flag set prints a help of its own (connect's lists its
// clients) rather than its lines of the top-level usage and its flags.
var customUsage = map[string]bool{"connect": true}

// topCommandLines is what the top-level usage (tollgate -h, with the development commands in a
// build that has them) says of the command name: its line, "  tollgate NAME ...", and the
// lines indented under it; "" for a command it does not list. A command's -h shows it above
// the command's flags, so that its arguments (prices' NAME...) and what it does are said where
// its flags are, from the one text.
func topCommandLines(name string) string {
	var b strings.Builder
	in := false
	for line := range strings.Lines(usage) {
		rest, isCommand := strings.CutPrefix(line, "  tollgate ")
		switch {
		case isCommand:
			word, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			in = word == name
		case in && strings.HasPrefix(line, "    "):
		default:
			in = false
		}
		if in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// takesNoArguments refuses the arguments left after the flags of fs's command, which takes
// none (parseFlags parsed them): a usage error naming the first.
func takesNoArguments(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return usageError(fmt.Sprintf("%s takes no arguments, got %q", fs.Name(), fs.Arg(0)))
}

// newLogger builds the process logger from LOG_FORMAT and LOG_LEVEL.
func newLogger(defaultFormat string) *slog.Logger {
	return slog.New(newLogHandler(defaultFormat, os.Stderr))
}

// newBufferedLogger is newLogger writing through a logsink.Writer: lines below warning level
// are written in batches (every 100 ms), warnings and errors at once. Close the writer last.
func newBufferedLogger(defaultFormat string) (*slog.Logger, *logsink.Writer) {
	sink := logsink.New(os.Stderr, 0, 0)
	return slog.New(sink.Urgent(newLogHandler(defaultFormat, sink), slog.LevelWarn)), sink
}

func newLogHandler(defaultFormat string, out io.Writer) slog.Handler {
	level := slog.LevelInfo
	if v, ok := os.LookupEnv("LOG_LEVEL"); ok {
		_ = level.UnmarshalText([]byte(v))
	}
	format := defaultFormat
	if v := os.Getenv("LOG_FORMAT"); v != "" {
		format = v
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.NewTextHandler(out, opts)
	}
	return slog.NewJSONHandler(out, opts)
}

// loadConfig reads the config file named by -config or TOLLGATE_CONFIG; without one it uses the
// built-in configuration (every provider the simulator) or, when OPENAI_API_KEY or
// ANTHROPIC_API_KEY is set, the built-in example that routes to the real providers. It fills
// provider keys from the environment.
func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		path = os.Getenv("TOLLGATE_CONFIG")
	}
	var cfg *config.Config
	switch {
	case path == "" && realProvidersChosen():
		cfg = config.Example()
	case path == "":
		cfg = config.Default()
	default:
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	cfg.ResolveSecrets(os.LookupEnv)
	return cfg, nil
}

// database is an open store and, when DATABASE_URL is unset, the local cluster behind it.
type database struct {
	Store   *store.Store
	URL     string
	cluster *pgcluster.Cluster
	started bool
	// where is where the local cluster lives (zero with DATABASE_URL).
	where pgcluster.Location
}

// openDatabase connects to DATABASE_URL or, when local is true and it is unset, to the local
// development cluster (started if it is not running), and applies pending migrations: serve,
// dev and migrate open it so.
func openDatabase(ctx context.Context, local bool, log *slog.Logger) (*database, error) {
	d, err := connectDatabase(ctx, local, log)
	if err != nil {
		return nil, err
	}
	applied, err := d.Store.Migrate(ctx)
	if err != nil {
		d.Close()
		return nil, err
	}
	if len(applied) > 0 {
		log.Info("applied migrations", "versions", applied)
	}
	if unknown, err := d.Store.UnknownMigrations(ctx); err == nil && len(unknown) > 0 {
		log.Warn(newerSchemaWarning(unknown, "this process runs on"), "unknown_migrations", unknown)
	}
	return d, nil
}

// connectDatabase connects to DATABASE_URL or, when local is true and it is unset, to the local
// development cluster (started if it is not running), leaving its schema as it is.
func connectDatabase(ctx context.Context, local bool, log *slog.Logger) (*database, error) {
	d := &database{URL: os.Getenv("DATABASE_URL")}
	if d.URL == "" {
		if !local {
			return nil, usageError("DATABASE_URL is not set")
		}
		where, err := localCluster()
		if err != nil {
			return nil, err
		}
		if where.Moved {
			log.Info("DATABASE_URL is unset: using the local PostgreSQL cluster, moved", "data_dir", where.DataDir, "because", where.Reason)
		} else {
			log.Info("DATABASE_URL is unset: using the local PostgreSQL cluster", "data_dir", where.DataDir)
		}
		c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: where.DataDir, SocketDir: where.SocketDir,
			Logf: func(f string, a ...any) { log.Debug(fmt.Sprintf(f, a...)) }})
		if err != nil {
			return nil, fmt.Errorf("start local PostgreSQL: %w", err)
		}
		d.cluster, d.started, d.where = c, !c.Reused(), where
		if err := c.CreateDatabase(ctx, "tollgate"); err != nil {
			d.Close()
			return nil, err
		}
		d.URL = c.ConnString("tollgate")
	}
	st, err := store.Open(ctx, d.URL, store.WithLogger(log))
	if err != nil {
		d.Close()
		return nil, err
	}
	d.Store = st
	return d, nil
}

// storeCloseWait bounds database.Close's wait for the store's connections to close: against a
// database that hangs, pgx closes a connection in use only after a cancel request the server
// never answers (15 s); the process's exit closes them anyway.
const storeCloseWait = time.Second

// Close closes the store (waiting for it at most storeCloseWait) and stops the local cluster
// if this process started it.
func (d *database) Close() {
	if d.Store != nil {
		closed := make(chan struct{})
		go func() {
			d.Store.Close()
			close(closed)
		}()
		t := time.NewTimer(storeCloseWait)
		select {
		case <-closed:
		case <-t.C:
		}
		t.Stop()
	}
	if d.cluster != nil && d.started {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.cluster.Stop(ctx)
	}
}

// localCluster decides where the local development cluster lives: $TOLLGATE_DATA_DIR/postgres
// (default ./.data/postgres) or, when that is out of the postgres OS user's reach (a checkout
// under root's private home, say), /var/tmp/tollgate-<hash of that path>/postgres, the same on
// every run from the same checkout, so dev and admin find the same cluster.
func localCluster() (pgcluster.Location, error) {
	opts, err := localClusterOptions()
	if err != nil {
		return pgcluster.Location{}, err
	}
	if err := os.MkdirAll(filepath.Dir(opts.DataDir), 0o755); err != nil {
		return pgcluster.Location{}, err
	}
	return pgcluster.Locate(opts)
}

// localClusterOptions are where the local cluster is looked for: $TOLLGATE_DATA_DIR/postgres
// (./.data/postgres by default), or its fallback under /var/tmp.
func localClusterOptions() (pgcluster.LocateOptions, error) {
	dataDir := os.Getenv("TOLLGATE_DATA_DIR")
	if dataDir == "" {
		dataDir = ".data"
	}
	abs, err := filepath.Abs(filepath.Join(dataDir, "postgres"))
	if err != nil {
		return pgcluster.LocateOptions{}, err
	}
	// /var/tmp rather than /tmp: it survives reboots, and with it the demo account.
	root := "/var/tmp"
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		root = os.TempDir()
	}
	return pgcluster.LocateOptions{DataDir: abs, FallbackRoot: root, FallbackPrefix: "tollgate-"}, nil
}

// requireLocalCluster refuses a command that reads the local cluster (the admin commands)
// when DATABASE_URL is unset and there is no cluster where make run makes it: run from another
// directory, such a command would otherwise make and migrate an empty cluster there, and then
// report that the demo account does not exist (trial h10 D6).
func requireLocalCluster() error {
	if os.Getenv("DATABASE_URL") != "" {
		return nil
	}
	opts, err := localClusterOptions()
	if err != nil {
		return err
	}
	if dir, ok := pgcluster.Existing(opts); !ok {
		return fmt.Errorf("DATABASE_URL is unset and there is no local PostgreSQL cluster at %s: run the command from the checkout where make run made it (or set TOLLGATE_DATA_DIR to that checkout's .data), or set DATABASE_URL", dir)
	}
	return nil
}

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := parseFlags(fs, args, os.Stdout); err != nil {
		return err
	}
	if err := takesNoArguments(fs); err != nil {
		return withHelp(err, "tollgate migrate -h", "what it does")
	}
	log := newLogger("text")
	d, err := openDatabase(ctx, true, log)
	if err != nil {
		return err
	}
	defer d.Close()
	fmt.Println("schema is up to date")
	return nil
}
