package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gen/api"
	"github.com/tollgate/tollgate/impl/client"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// connectUsage is `tollgate connect -h`.
const connectUsage = `usage: tollgate connect [-url URL] [-key KEY] CLIENT

Prints the settings that point CLIENT at a tollgate gateway with an API key, the same the web
console shows when a key is created: CLIENT is claude-code (or claude), codex, opencode,
openai-sdk, anthropic-sdk, ai-sdk (Vercel's AI SDK, or vercel), langchain, mcp, curl (a quick
check that the key works), or all. The key is checked against the gateway first (GET
/v1/models), and the settings name the first model of each family the key may use. Claude
Code's settings warn, as the console's do, when the key's credit cap (GET /v1/credits) is
below what one of its turns holds at the model's price (GET /v1/models), and say what to do;
Codex's and opencode's give them the chat model's window (and opencode its output bound and
price) as GET /v1/models says them.

  -url URL   the gateway's public URL (default $TOLLGATE_URL, else http://localhost:8080)
  -key KEY   the API key (default $TOLLGATE_API_KEY, the safer way: a key on the command line
             shows in the process list and in shell history)

A warning goes to stderr when the key is given with -key, and when URL is http:// to a host
other than this machine (localhost, 127.0.0.0/8, ::1), which the key would cross in clear.
`

// connectAliases are the other names a client is known by on the command line.
var connectAliases = map[string]string{"claude": "claude-code", "claudecode": "claude-code", "openai": "openai-sdk", "anthropic": "anthropic-sdk",
	"vercel": "ai-sdk", "aisdk": "ai-sdk"}

// runConnect is `tollgate connect`: it asks the gateway which models the key may use, then
// prints the chosen client's settings (impl/web/connect) to out. What the user should know
// about how the key was given or where it goes (connectWarnings) is written to notes (stderr),
// so that out stays the settings alone.
func runConnect(ctx context.Context, args []string, out, notes io.Writer) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), connectUsage) }
	baseURL := fs.String("url", "", "")
	key := fs.String("key", "", "")
	// The client may come before the flags (`tollgate connect codex -url ...`) or after them.
	var named []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		named, args = args[:1], args[1:]
	}
	if err := parseFlags(fs, args, out); err != nil {
		return err
	}
	named = append(named, fs.Args()...)
	// A mistake in the client is its line, which names the clients, and the hint of connect -h.
	clients := []string{}
	for _, s := range connect.All(connect.Target{}) {
		clients = append(clients, s.ID)
	}
	clients = append(clients, "all")
	switch {
	case len(named) == 0:
		return withHelp(usageError("connect takes one client: "+orList(clients)), "tollgate connect -h", "its clients and flags")
	case len(named) > 1:
		return withHelp(usageError(fmt.Sprintf("connect takes one client, got %d: %s", len(named), strings.Join(named, " "))),
			"tollgate connect -h", "its clients and flags")
	}
	which := strings.ToLower(named[0])
	if alias, ok := connectAliases[which]; ok {
		which = alias
	}
	// An unknown client is a mistake in the command line: said before the gateway is asked
	// anything, so that it is not hidden behind a refused key or an unreachable URL.
	if !slices.Contains(clients, which) {
		return withHelp(usageError(fmt.Sprintf("connect: unknown client %q: the clients are %s", named[0], orList(clients))),
			"tollgate connect -h", "its clients and flags")
	}
	// urlFrom is where the address came from, for an error that cannot reach it: "" is the default.
	urlFrom := "-url"
	if *baseURL == "" {
		*baseURL, urlFrom = os.Getenv("TOLLGATE_URL"), "$TOLLGATE_URL"
	}
	if *baseURL == "" {
		*baseURL, urlFrom = "http://localhost:8080", ""
	}
	// A pasted key or URL (or one read from a file) may bring white space along: the settings
	// carry them without it, as the gateway is sent them.
	*baseURL = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(*baseURL), "/"), "/v1")
	fromFlag := *key != ""
	if *key == "" {
		*key = os.Getenv(connect.KeyVariable)
	}
	*key = strings.TrimSpace(*key)
	if *key == "" {
		return usageError("connect needs an API key: -key, or $" + connect.KeyVariable + " (create one on the web console's Keys page or with `tollgate admin key create ACCOUNT`)")
	}

	for _, w := range connectWarnings(*baseURL, fromFlag) {
		fmt.Fprintln(notes, "tollgate connect: warning:", w)
	}

	c, err := client.New(*baseURL, *key, client.WithMaxRetries(1))
	if err != nil {
		return usageError(fmt.Sprintf("-url %q: %s", *baseURL, unprefixed(err)))
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	models, err := c.Models(ctx)
	if ue, unreached := errors.AsType[*url.Error](err); unreached {
		return unreachableGateway(*baseURL, urlFrom, ue)
	}
	if err != nil {
		return fmt.Errorf("the gateway at %s did not list the key's models: %s", *baseURL, unprefixed(err))
	}
	ids := make([]string, 0, len(models))
	family := make(map[string]string, len(models))
	for _, m := range models {
		ids = append(ids, m.Id)
		if m.Family != nil {
			family[m.Id] = *m.Family
		}
	}
	target := connect.Target{BaseURL: *baseURL, Key: *key}
	target.ChatModel, target.MessagesModel = connect.ChooseByFamily(ids, func(id string) string { return family[id] })
	target.Chat = listedFacts(models, target.ChatModel)
	if which == "all" || which == "claude-code" {
		target.Messages, target.CreditCapMicros = messagesFacts(ctx, c, models, target.MessagesModel)
	}

	var chosen []connect.Setup
	for _, s := range connect.All(target) {
		if which == "all" || s.ID == which {
			chosen = append(chosen, s)
		}
	}
	for i, s := range chosen {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprint(out, s.Text())
	}
	return nil
}

// connectWarnings are what the user should know before the key is sent to baseURL: that a
// key given with -key (fromFlag) shows in the process list and in shell history, where
// $TOLLGATE_API_KEY does not; and that an http:// URL to a host other than this machine
// carries the key in clear text. A URL that cannot be parsed gets no warning: client.New
// refuses it.
func connectWarnings(baseURL string, fromFlag bool) []string {
	var warnings []string
	if fromFlag {
		warnings = append(warnings, "a key given with -key shows in the process list (ps) and in shell history; $"+
			connect.KeyVariable+" is the safer way")
	}
	if u, err := url.Parse(baseURL); err == nil && u.Scheme == "http" && !isLocalHost(u.Hostname()) {
		warnings = append(warnings, fmt.Sprintf("%s is plain http:// to a host other than this machine: the key crosses the network in clear text; use https://", baseURL))
	}
	return warnings
}

// isLocalHost reports whether host names this machine: localhost (or a name under it,
// RFC 6761), or a loopback address (127.0.0.0/8, ::1).
func isLocalHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// messagesFacts are what Claude Code's settings are checked by: the Messages model's price and
// limits as the gateway's model list says them, and the key's credit cap (nil: none) as its
// credits say it. When either is not known (a gateway that does not say the price, credits
// that cannot be read) the facts are nil, and the settings say the rule rather than a figure.
func messagesFacts(ctx context.Context, c *client.Client, models []api.Model, id string) (*connect.ModelFacts, *int64) {
	facts := listedFacts(models, id)
	if facts == nil {
		return nil, nil
	}
	credits, err := c.Credits(ctx)
	if err != nil {
		return nil, nil
	}
	if credits.Key == nil || credits.Key.CreditCap == nil {
		return facts, nil
	}
	return facts, &credits.Key.CreditCap.CapMicros
}

// listedFacts are the price and limits the gateway's model list gives the model id
// (connect.FactsOf); nil when the list does not have it or says no price.
func listedFacts(models []api.Model, id string) *connect.ModelFacts {
	i := slices.IndexFunc(models, func(m api.Model) bool { return m.Id == id })
	if i < 0 {
		return nil
	}
	return connect.FactsOf(models[i])
}

// unreachableGateway is the error of a gateway address at which nothing answered (err is the
// transport's, whose cause it gives: refused, no such host, timed out), which says where the
// address came from (from: "-url", "$TOLLGATE_URL", or "" for the default) and how to give the
// right one (newcomer trial s12h5: with make run on ports of its own, connect tried the default
// and said only that "the gateway … did not list the key's models: … connection refused"). A
// usage error: the address is the command line's to fix.
func unreachableGateway(baseURL, from string, err *url.Error) error {
	why := err.Err.Error()
	switch from {
	case "":
		return usageError(fmt.Sprintf("no gateway answers at %s (the default: neither -url nor $TOLLGATE_URL was given): %s; "+
			"give the gateway's address with -url (make run prints it: \"tollgate is running on http://…\")", baseURL, why))
	case "-url":
		return usageError(fmt.Sprintf("no gateway answers at %s (-url): %s; is the gateway running, and is -url its address?", baseURL, why))
	}
	return usageError(fmt.Sprintf("no gateway answers at %s (%s): %s; is the gateway running, and is %s its address? (-url gives another)", baseURL, from, why, from))
}

// unprefixed is err's message without the "tollgate: " that impl/client's errors begin with:
// the command's own errors are printed after that prefix already (newcomer trial finding 8:
// "tollgate: the gateway … did not list the key's models: tollgate: 401 …").
func unprefixed(err error) string {
	return strings.TrimPrefix(err.Error(), "tollgate: ")
}
