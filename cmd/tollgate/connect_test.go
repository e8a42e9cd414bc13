package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// TestConnectCommand runs `tollgate connect` against a real `tollgate serve`: with a key of an
// account on the default plan it prints exactly the settings the console shows (the first chat
// and Messages models the key may use, the gateway's URL, the key, for Claude Code the Messages
// model's window and for Codex and opencode the chat model's window, output bound and price,
// from what the gateway's model list gives where the console reads the configuration), with
// the client named before or after the flags; `all` prints every client; a key the gateway
// refuses, a missing key and an unknown client are errors that say so, and print nothing.
func TestConnectCommand(t *testing.T) {
	db := migratedDatabase(t)
	key := setupAccount(t, db)
	p := startServe(t, serveEnv(t, db))
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	ctx := context.Background()

	var out bytes.Buffer
	if err := runConnect(ctx, []string{"codex", "-url", p.base + "/", "-key", key}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The console's facts of the chat model, read from the configuration; the command's come
	// from GET /v1/models.
	flint := connect.Facts(config.Default(), "service-flint")
	want := connect.Codex(connect.Target{BaseURL: p.base, Key: key, ChatModel: "service-flint", MessagesModel: "service-sonnet", Chat: flint}).Text()
	if out.String() != want || !strings.Contains(out.String(), "model_context_window = 200000") {
		t.Errorf("connect codex printed:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	t.Setenv("TOLLGATE_URL", p.base+"/v1")
	t.Setenv(connect.KeyVariable, key)
	if err := runConnect(ctx, []string{"claude"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	sonnet := connect.Facts(config.Default(), "service-sonnet")
	console := connect.Target{BaseURL: p.base, Key: key, ChatModel: "service-flint", MessagesModel: "service-sonnet", Chat: flint, Messages: sonnet}
	if want := connect.ClaudeCode(console).Text(); out.String() != want || !strings.Contains(out.String(), "CLAUDE_CODE_AUTO_COMPACT_WINDOW=200000") {
		t.Errorf("connect claude (from the environment) printed:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := runConnect(ctx, []string{"opencode"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := connect.Opencode(console).Text(); out.String() != want || !strings.Contains(out.String(), "service-flint is a fusion model") {
		t.Errorf("connect opencode printed:\n%s\nwant (the console's):\n%s", out.String(), want)
	}
	for _, c := range []struct {
		name string
		want connect.Setup
	}{{"ai-sdk", connect.AISDK(console)}, {"vercel", connect.AISDK(console)}, {"langchain", connect.LangChain(console)}} {
		out.Reset()
		if err := runConnect(ctx, []string{c.name}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if want := c.want.Text(); out.String() != want {
			t.Errorf("connect %s printed:\n%s\nwant (the console's):\n%s", c.name, out.String(), want)
		}
	}
	out.Reset()
	if err := runConnect(ctx, []string{"-url", p.base, "all"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, s := range connect.All(console) {
		if !strings.Contains(out.String(), s.Text()) {
			t.Errorf("connect all lacks %s's settings", s.Client)
		}
	}

	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"-key", "tgk_not_a_key", "codex"}, key, "did not list the key's models"},
		{[]string{"codex"}, "", "needs an API key"},
		{[]string{"vim"}, key, `unknown client "vim"`},
		{[]string{}, key, "takes one client"},
		{[]string{"codex", "claude"}, key, "takes one client"},
	} {
		t.Setenv(connect.KeyVariable, c.env)
		out.Reset()
		err := runConnect(ctx, c.args, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) || out.Len() != 0 {
			t.Errorf("connect %v: %v, printed %q; want an error containing %q", c.args, err, out.String(), c.want)
		}
	}
}

// TestConnectNamesTheCapsFigure: for a key whose credit cap ($0.50) is below what a Claude Code
// turn on service-sonnet holds, `tollgate connect claude` against a real `tollgate serve` warns
// with the figure and the output bound that fits, the very text the console's key-created page
// gives the same key (the price read from GET /v1/models, the cap from GET /v1/credits, the
// arithmetic connect's); a gateway whose model list says no price gets the rule instead.
func TestConnectNamesTheCapsFigure(t *testing.T) {
	db := migratedDatabase(t)
	setupAccount(t, db)
	key := strings.TrimSpace(mustAdmin(t, "key create acme -credit-cap 500000 -quiet"))
	p := startServe(t, serveEnv(t, db))
	p.waitReadyz(t, http.StatusOK, 30*time.Second)
	ctx := context.Background()

	var out bytes.Buffer
	if err := runConnect(ctx, []string{"claude", "-url", p.base, "-key", key}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	capMicros := int64(500_000)
	want := connect.ClaudeCode(connect.Target{BaseURL: p.base, Key: key, ChatModel: "service-flint", MessagesModel: "service-sonnet",
		Messages: connect.Facts(config.Default(), "service-sonnet"), CreditCapMicros: &capMicros}).Text()
	if out.String() != want {
		t.Errorf("connect claude with a capped key printed:\n%s\nwant (the console's):\n%s", out.String(), want)
	}
	// 28,000 input tokens at $6 a million (a one-hour cache write) and 32,000 output tokens at $15.
	for _, figure := range []string{"# Warning: this key's credit cap ($0.50)", "about $0.65", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=22000"} {
		if !strings.Contains(out.String(), figure) {
			t.Errorf("connect claude with a capped key does not say %q:\n%s", figure, out.String())
		}
	}

	// A gateway that lists its models without their prices: the rule.
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"service-sonnet","object":"model","created":1,"owned_by":"x","family":"messages"}]}`)
	}))
	defer gw.Close()
	out.Reset()
	if err := runConnect(ctx, []string{"claude", "-url", gw.URL, "-key", key}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := connect.ClaudeCode(connect.Target{BaseURL: gw.URL, Key: key, MessagesModel: "service-sonnet"}).Text(); out.String() != want ||
		!strings.Contains(out.String(), "a key whose credit cap is below that is refused every turn") {
		t.Errorf("connect claude against a gateway that says no price printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestConnectChecksTheClientFirst: an unknown client is reported before the gateway is asked
// anything, so that a wrong name is not hidden behind a refused key (newcomer trial finding
// 8), and the gateway's refusal of a key reads without the "tollgate: " that main prints
// before every error already.
func TestConnectChecksTheClientFirst(t *testing.T) {
	var asked atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"invalid API key: the key is unknown or has been revoked","type":"authentication_error","param":null,"code":"invalid_api_key"}}`)
	}))
	defer gw.Close()
	ctx := context.Background()
	var out bytes.Buffer
	err := runConnect(ctx, []string{"foo", "-url", gw.URL, "-key", "tgk_refused"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `unknown client "foo"`) || asked.Load() != 0 || out.Len() != 0 {
		t.Errorf("connect foo: %v, %d requests to the gateway, printed %q; want the unknown client and no request", err, asked.Load(), out.String())
	}
	t.Setenv(connect.KeyVariable, "")
	if err := runConnect(ctx, []string{"foo", "-url", gw.URL}, &out, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown client "foo"`) {
		t.Errorf("connect foo without a key: %v, want the unknown client", err)
	}
	err = runConnect(ctx, []string{"codex", "-url", gw.URL, "-key", "tgk_refused"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "did not list the key's models: 401") || strings.Contains(err.Error(), "tollgate:") ||
		!strings.Contains(err.Error(), "unknown or has been revoked") {
		t.Errorf("connect codex with a refused key: %v", err)
	}
}

// TestConnectWarnsOfAnExposedKey: a key given with -key shows in the process list and in shell
// history, and one sent over plain http:// to another machine crosses the network in clear:
// `tollgate connect` says so on stderr, before the key is sent, and prints the same settings on
// stdout as it does without the warning. A key from $TOLLGATE_API_KEY sent to this machine
// (127.0.0.1, localhost) or over https:// gets no warning.
func TestConnectWarnsOfAnExposedKey(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"service-flint","object":"model","created":1,"owned_by":"x","family":"chat"}]}`)
	}))
	defer gw.Close()
	ctx := context.Background()
	const key = "tgk_exposed"
	localhost := strings.Replace(gw.URL, "127.0.0.1", "localhost", 1)
	var settings string
	for _, c := range []struct {
		name, base string
		args       []string
		env        string
		warnings   []string
	}{
		{"the environment's key to 127.0.0.1", gw.URL, []string{"codex", "-url", gw.URL}, key, nil},
		{"-key", gw.URL, []string{"codex", "-url", gw.URL, "-key", key}, "", []string{"-key shows in the process list (ps) and in shell history; $TOLLGATE_API_KEY is the safer way"}},
		{"-key over the environment's", gw.URL, []string{"codex", "-key", key, "-url", gw.URL}, "tgk_other", []string{"-key shows in the process list"}},
		{"the environment's key to localhost", localhost, []string{"codex", "-url", localhost + "/v1"}, key, nil},
	} {
		t.Setenv(connect.KeyVariable, c.env)
		var out, notes bytes.Buffer
		if err := runConnect(ctx, c.args, &out, &notes); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if settings == "" {
			settings = out.String() // the first case's, without a warning
		}
		if want := strings.ReplaceAll(settings, gw.URL, c.base); out.String() != want || !strings.Contains(want, key) {
			t.Errorf("%s: printed\n%s\nwant the settings printed without a warning:\n%s", c.name, out.String(), settings)
		}
		if got := strings.Count(notes.String(), "tollgate connect: warning:"); got != len(c.warnings) {
			t.Errorf("%s: stderr %q; want %d warnings", c.name, notes.String(), len(c.warnings))
		}
		for _, w := range c.warnings {
			if !strings.Contains(notes.String(), w) {
				t.Errorf("%s: stderr %q; want %q", c.name, notes.String(), w)
			}
		}
	}

	// The binary writes the settings to stdout and the warning to stderr.
	stdout, stderr, code := runTollgate(t, []string{"TOLLGATE_API_KEY="}, "connect", "codex", "-url", gw.URL, "-key", key)
	if code != 0 || stdout != settings || !strings.Contains(stderr, "tollgate connect: warning: a key given with -key") {
		t.Errorf("tollgate connect -key: exit %d, stdout\n%s\nstderr %q; want the settings and the warning on stderr", code, stdout, stderr)
	}

	// A plain http:// URL to another host is warned of before the key is sent: the host here
	// does not resolve, and the warning is there all the same.
	t.Setenv(connect.KeyVariable, key)
	var out, notes bytes.Buffer
	err := runConnect(ctx, []string{"codex", "-url", "http://gateway.invalid:8080"}, &out, &notes)
	if err == nil || out.Len() != 0 || !strings.Contains(notes.String(), "http://gateway.invalid:8080 is plain http:// to a host other than this machine: the key crosses the network in clear text; use https://") {
		t.Errorf("connect to http://gateway.invalid: %v, printed %q, stderr %q; want an error and the warning", err, out.String(), notes.String())
	}
	// Over https:// the key is not in clear: no warning (this gateway's certificate is the
	// test's own, which the command does not trust, so the call itself fails).
	tls := httptest.NewTLSServer(gw.Config.Handler)
	defer tls.Close()
	out.Reset()
	notes.Reset()
	if err := runConnect(ctx, []string{"codex", "-url", tls.URL}, &out, &notes); err == nil || notes.Len() != 0 {
		t.Errorf("connect to %s: %v, stderr %q; want the certificate refused and no warning", tls.URL, err, notes.String())
	}
}

// TestConnectTrimsAPastedKey: a key or URL with the white space a paste or a file brings
// ($(cat key.txt) keeps none, a copied line often a newline) is printed and sent without it,
// from -key, $TOLLGATE_API_KEY and $TOLLGATE_URL alike: the settings are the same as for the
// bare key (newcomer trial h1: TOLLGATE_API_KEY with a trailing newline was checked, as
// impl/client trims it, and printed as export ANTHROPIC_AUTH_TOKEN='tgk_…<newline>').
func TestConnectTrimsAPastedKey(t *testing.T) {
	var sent atomic.Value
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"service-flint","object":"model","created":1,"owned_by":"x","family":"chat"},{"id":"service-sonnet","object":"model","created":1,"owned_by":"x","family":"messages"}]}`)
	}))
	defer gw.Close()
	ctx := context.Background()
	const key = "tgk_pasted"
	want := connect.ClaudeCode(connect.Target{BaseURL: gw.URL, Key: key, ChatModel: "service-flint", MessagesModel: "service-sonnet"}).Text()
	for _, c := range []struct {
		name      string
		args      []string
		env, base string
	}{
		{"$TOLLGATE_API_KEY with a newline", []string{"claude", "-url", gw.URL}, key + "\n", ""},
		{"-key with spaces and a CRLF", []string{"claude", "-url", gw.URL, "-key", "  " + key + "\r\n"}, "", ""},
		{"$TOLLGATE_URL with a newline", []string{"claude"}, "\t" + key, gw.URL + "/v1\n"},
	} {
		t.Setenv(connect.KeyVariable, c.env)
		t.Setenv("TOLLGATE_URL", c.base)
		var out bytes.Buffer
		if err := runConnect(ctx, c.args, &out, io.Discard); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if out.String() != want {
			t.Errorf("%s: printed\n%s\nwant the bare key's settings:\n%s", c.name, out.String(), want)
		}
		if got := sent.Load(); got != "Bearer "+key {
			t.Errorf("%s: the gateway was sent %q", c.name, got)
		}
	}
}

// TestConnectWarnings: which URLs carry the key in clear (plain http:// to a host other than
// this machine) and that -key is warned of whatever the URL.
func TestConnectWarnings(t *testing.T) {
	for _, c := range []struct {
		url      string
		fromFlag bool
		want     int
	}{
		{"https://gateway.example.com", false, 0},
		{"HTTPS://gateway.example.com", false, 0},
		{"http://gateway.example.com", false, 1},
		{"http://10.0.0.7:8080", false, 1},
		{"http://[2001:db8::1]:8080", false, 1},
		{"http://localhost:8080", false, 0},
		{"http://LOCALHOST.:8080", false, 0},
		{"http://app.localhost:8080", false, 0},
		{"http://127.0.0.1:8080", false, 0},
		{"http://127.45.6.7", false, 0},
		{"http://[::1]:8080", false, 0},
		{"http://localhost:8080", true, 1},
		{"https://gateway.example.com", true, 1},
		{"http://gateway.example.com", true, 2},
	} {
		if got := connectWarnings(c.url, c.fromFlag); len(got) != c.want {
			t.Errorf("connectWarnings(%q, -key %v) = %q; want %d", c.url, c.fromFlag, got, c.want)
		}
	}
}

// TestConnectSaysWhereItLookedForTheGateway (newcomer trial s12h5): with make run on ports of
// its own, `tollgate connect codex` went to http://localhost:8080, the default, and said only
// `the gateway at http://localhost:8080 did not list the key's models: Get "…": dial tcp
// 127.0.0.1:8080: connect: connection refused`, as though a gateway were there and had
// refused, with no word of where the address came from or how to give another. A gateway that
// cannot be reached is now said to be so, with where the address came from (-url,
// $TOLLGATE_URL or the default) and how to give the right one; a usage error, as the address
// is the command line's.
func TestConnectSaysWhereItLookedForTheGateway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	t.Setenv(connect.KeyVariable, "tgk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM")
	ctx := context.Background()

	var out bytes.Buffer
	err = runConnect(ctx, []string{"codex", "-url", closed}, &out, io.Discard)
	if want := "no gateway answers at " + closed + " (-url): "; err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "is the gateway running, and is -url its address?") ||
		exitStatus(err) != 2 || out.Len() != 0 {
		t.Errorf("connect -url %s: %v (exit status %d), want it to begin %q and ask of -url\nstdout:\n%s", closed, err, exitStatus(err), want, out.String())
	}
	t.Setenv("TOLLGATE_URL", closed)
	err = runConnect(ctx, []string{"codex"}, &out, io.Discard)
	if want := "no gateway answers at " + closed + " ($TOLLGATE_URL): "; err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "is the gateway running, and is $TOLLGATE_URL its address? (-url gives another)") {
		t.Errorf("connect with TOLLGATE_URL=%s: %v, want it to begin %q and ask of $TOLLGATE_URL", closed, err, want)
	}
	// The default address is this machine's port 8080, where a gateway of another test may
	// answer: its words are checked on the error the command makes of a refused connection.
	refused := fmt.Errorf("Get %q: dial tcp 127.0.0.1:8080: connect: connection refused", "http://localhost:8080/v1/models")
	err = unreachableGateway("http://localhost:8080", "", &url.Error{Op: "Get", URL: "http://localhost:8080/v1/models", Err: refused})
	if want := `no gateway answers at http://localhost:8080 (the default: neither -url nor $TOLLGATE_URL was given): `; err == nil ||
		!strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `give the gateway's address with -url (make run prints it: "tollgate is running on http://…")`) {
		t.Errorf("the default address: %v, want it to begin %q and say to give -url", err, want)
	}
}

// TestHelpNamesEveryConnectClient (newcomer trial s12h5): `tollgate -h` said connect gives "the
// settings for claude-code, codex, opencode, openai-sdk, anthropic-sdk, mcp or all", leaving
// out ai-sdk, langchain and curl, which connect -h and the README name; and it said to "run
// 'tollgate admin' for its commands", which prints them on stderr as a mistake (exit status
// 2). The binary's help now names every client connect knows (connect.All), as connect -h
// does, and points at `tollgate admin -h`.
func TestHelpNamesEveryConnectClient(t *testing.T) {
	connectLines := usage[strings.Index(usage, "tollgate connect"):strings.Index(usage, "tollgate sim")]
	for _, s := range connect.All(connect.Target{}) {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(s.ID) + `\b`).MatchString(connectLines) {
			t.Errorf("tollgate -h does not name the connect client %s:\n%s", s.ID, connectLines)
		}
		if !strings.Contains(connectUsage, s.ID) {
			t.Errorf("tollgate connect -h does not name the client %s", s.ID)
		}
	}
	if !strings.Contains(usage, "'tollgate admin -h'") || strings.Contains(usage, "run 'tollgate admin' for") {
		t.Errorf("tollgate -h does not point at `tollgate admin -h` for the admin commands:\n%s", usage)
	}
}
