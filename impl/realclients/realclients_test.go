package realclients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// The tools the gateway's MCP endpoint lists today.
var datasetTools = []string{"list_storage_datasets", "load_storage_dataset", "query_datasets", "query_schema", "query_data"}

// TestRealClients drives each real client against one gateway on the simulator, each through
// its own recorder, in parallel.
func TestRealClients(t *testing.T) {
	c := findClients(t)
	fx := startGateway(t)
	for _, tc := range []struct {
		name string
		test func(*testing.T, clients, fixture)
	}{
		{"ClaudeCode", testClaudeCode},
		{"ClaudeCodeCachedTurns", testClaudeCodeCachedTurns},
		{"ClaudeCodeCompactsAtTheContextWindow", testClaudeCodeCompactsAtTheContextWindow},
		{"ClaudeCodeMCP", testClaudeCodeMCP},
		{"Codex", testCodex},
		{"CodexMCP", testCodexMCP},
		{"CodexMCPSlowStart", testCodexMCPSlowStart},
		{"CodexBuiltinProvider", testCodexBuiltinProvider},
		{"CodexWebSocketTurns", testCodexWebSocketTurns},
		{"MCPTypeScriptSDK", testMCPTypeScriptSDK},
		{"MCPInspectorCLI", testMCPInspectorCLI},
		{"OpenAITypeScriptSDK", testOpenAISDK},
		{"AnthropicTypeScriptSDK", testAnthropicSDK},
		{"AISDK", testAISDK},
		{"LangChain", testLangChain},
		{"ConnectSnippets", testConnectSnippets},
		{"Opencode", testOpencode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, c, fx)
		})
	}
}

// claudeSandbox is Claude Code's environment: the gateway as its Anthropic base URL (without
// /v1), the key as a bearer token, service-sonnet for every model slot, and its update check,
// telemetry, error reporting and other non-essential traffic off.
func claudeSandbox(t *testing.T, c clients, fx fixture, rec *recorder) sandbox {
	sb := newSandbox(t, c, rec)
	for k, v := range map[string]string{
		"ANTHROPIC_BASE_URL":                       rec.URL,
		"ANTHROPIC_AUTH_TOKEN":                     fx.key,
		"ANTHROPIC_MODEL":                          "service-sonnet",
		"ANTHROPIC_DEFAULT_SONNET_MODEL":           "service-sonnet",
		"ANTHROPIC_DEFAULT_OPUS_MODEL":             "service-sonnet",
		"ANTHROPIC_DEFAULT_HAIKU_MODEL":            "service-sonnet",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY":      "1",
	} {
		sb.env[k] = v
	}
	return sb
}

// claudeResult checks the result message of a Claude Code run: a success with text.
func claudeResult(t *testing.T, r clientRun, msgs []map[string]any) {
	t.Helper()
	var result map[string]any
	for _, m := range msgs {
		if m["type"] == "result" {
			result = m
		}
	}
	switch {
	case result == nil:
		t.Errorf("Claude Code printed no result message (%v)", orOK(r.err))
	case result["subtype"] != "success" || result["is_error"] != false:
		t.Errorf("Claude Code's result is not a success: subtype %v, is_error %v, result %q", result["subtype"], result["is_error"], result["result"])
	case strings.TrimSpace(fmt.Sprint(result["result"])) == "":
		t.Errorf("Claude Code's result has no text: %v", result)
	}
	if r.err != nil {
		t.Errorf("Claude Code exited with %v", r.err)
	}
}

// checkInference checks that the run POSTed inference requests to path, each for model and
// each answered 200. Failures are grouped by answer, so six retries of one refusal read as one
// line.
func checkInference(t *testing.T, rec *recorder, path, model string) {
	t.Helper()
	n := 0
	failed := map[string]int{}
	var order []string
	for _, ex := range rec.snapshot() {
		if ex.Path() != path || ex.Method != http.MethodPost {
			continue
		}
		n++
		var body struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(ex.RequestBody, &body)
		if body.Model != model {
			t.Errorf("POST %s asked for model %q, want %q", ex.URI, body.Model, model)
		}
		if ex.Status != http.StatusOK {
			key := fmt.Sprintf("%d %s", ex.Status, errorMessage(ex.ResponseBody))
			if failed[key] == 0 {
				order = append(order, key)
			}
			failed[key]++
		}
	}
	if n == 0 {
		t.Errorf("the client sent no POST %s", path)
	}
	for _, key := range order {
		t.Errorf("%d of %d POST %s got %s", failed[key], n, path, key)
	}
}

// errorMessage is the message of an error envelope in any of the three formats, or the start
// of the body.
func errorMessage(body []byte) string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error.Message != "" {
		return strconv.Quote(env.Error.Message)
	}
	return shorten(body, 300)
}

// checkMCP checks that the client initialized an MCP session, listed the tools and made each
// of calls, every one answered 200 or 202.
func checkMCP(t *testing.T, rec *recorder, calls ...string) {
	t.Helper()
	methods := rec.mcpMethods()
	for _, want := range append([]string{"initialize", "tools/list"}, calls...) {
		if !contains(methods, want) {
			t.Errorf("the client never sent %s to /api/mcp; it sent %v", want, methods)
		}
	}
	for _, ex := range rec.snapshot() {
		if ex.Path() == "/api/mcp" && ex.Method == http.MethodPost && ex.Status != http.StatusOK && ex.Status != http.StatusAccepted {
			t.Errorf("POST /api/mcp %s got %d: %s", ex.RPCMethod(), ex.Status, errorMessage(ex.ResponseBody))
		}
	}
}

// testClaudeCode: one turn of Claude Code in print mode with JSON output.
func testClaudeCode(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := claudeSandbox(t, c, fx, rec)
	r := run(t, rec, sb, c.claude(), "-p", "Say hi", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	rec.checkEgress(t)
}

// testClaudeCodeCachedTurns: two turns of one Claude Code conversation (the second with
// --continue) on a tenant of their own. Claude Code marks its system prompt and the latest
// message with cache_control, so the simulator (like Anthropic) writes the prompt's prefix to
// its cache on the first turn and reads it on the second; the second turn's usage record shows
// the cache reads, billed at claude-sonnet-4-5's cache-read price (service-sonnet's catalog
// entry), and the bill is the record's kinds at its price.
func testClaudeCodeCachedTurns(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "claude-cache", 0, 100_000_000)
	own := fixture{gw: fx.gw, key: tenant.Key}
	rec := newRecorder(t, own.gw.URL, own.key)
	sb := claudeSandbox(t, c, own, rec)
	r := run(t, rec, sb, c.claude(), "-p", "Say hi", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	first := len(usageRecords(t, own.gw, tenant.Account.ID, messagesCalls(rec)))
	r = run(t, rec, sb, c.claude(), "-p", "--continue", "Say more", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	records := usageRecords(t, own.gw, tenant.Account.ID, messagesCalls(rec))
	var writes, reads int64
	for _, u := range records {
		if u.Price == nil {
			t.Fatalf("an unpriced usage record: %+v", u)
		}
		if again := price.Cost(u.Tokens(), *u.Price); again != u.Costs || u.CostMicros != again.Total()+u.HostedMicros-u.WaivedMicros {
			t.Errorf("record %s: cost %d as %+v is not its counts %+v at its price (%+v)", u.RequestID, u.CostMicros, u.Costs, u.Tokens(), again)
		}
		writes += u.CacheWrite5mTokens + u.CacheWrite1hTokens
	}
	for _, u := range records[:len(records)-first] { // the second turn's, newest first
		reads += u.CacheReadTokens
		if u.CacheReadTokens > 0 && (u.Price.CacheRead != 300_000 || u.Costs.CacheRead != price.Part(u.CacheReadTokens, 300_000)) {
			t.Errorf("record %s: %d cache reads cost %d at %d per million, want claude-sonnet-4-5's 300,000",
				u.RequestID, u.CacheReadTokens, u.Costs.CacheRead, u.Price.CacheRead)
		}
	}
	if writes == 0 || reads == 0 {
		t.Errorf("cache writes %d (both turns), reads %d (second turn): want both", writes, reads)
	}
	t.Logf("%d records; cache writes %d, second-turn reads %d", len(records), writes, reads)
}

// testClaudeCodeCompactsAtTheContextWindow: a Claude Code conversation that outgrows
// service-sonnet's 200,000-token context window (two turns of about 700 KB of notes each,
// piped in as a user would: some 130,000 tokens a turn with Claude Code's instructions, at the
// six bytes a token the gateway's context check counts) is compacted by Claude Code and goes
// on. Claude Code does not know
// service-sonnet's window (it assumes a million tokens), so the gateway's 400 is the only
// signal it gets, and it acts on Anthropic's words for it, "prompt is too long: N tokens > M
// maximum" (the Messages envelope has no code). Trial h10 D1: worded otherwise, the second turn
// failed, and so did every later turn of the conversation. Every call answered is billed with
// the usage its answer reported, nothing waived (checkSessionBilled).
func testClaudeCodeCompactsAtTheContextWindow(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "claude-compact", 0, 100_000_000)
	own := fixture{gw: fx.gw, key: tenant.Key}
	rec := newRecorder(t, own.gw.URL, own.key)
	sb := claudeSandbox(t, c, own, rec)
	words := make([]string, 70_000)
	for i := range words {
		words[i] = "word" + strconv.Itoa(i)
	}
	notes := []byte(strings.Join(words, " "))
	r := runWithInput(t, rec, sb, notes, c.claude(), "-p", "Part one of my notes.", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	r = runWithInput(t, rec, sb, notes, c.claude(), "-c", "-p", "Part two of my notes.", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	refused, answeredAfter := 0, 0
	for _, ex := range rec.snapshot() {
		if ex.Path() != "/v1/messages" || ex.Method != http.MethodPost {
			continue
		}
		switch {
		case ex.Status == http.StatusBadRequest:
			refused++
			if msg := errorMessage(ex.ResponseBody); !strings.Contains(msg, "prompt is too long: ") || !strings.Contains(msg, " > 200000 maximum") {
				t.Errorf("the context window's 400 says %s, want Anthropic's \"prompt is too long: N tokens > 200000 maximum\"", msg)
			}
		case ex.Status == http.StatusOK && refused > 0:
			answeredAfter++
		}
	}
	if refused == 0 || answeredAfter == 0 {
		t.Errorf("%d requests refused at the context window and %d answered after the first refusal: want Claude Code to meet the window and go on", refused, answeredAfter)
	}
	// The compaction that followed, and every other answered call, is billed as its answer
	// reported, within its reservation (task h4).
	checkSessionBilled(t, own, rec, tenant.Account.ID, "/v1/messages")
}

// messagesCalls counts the POST /v1/messages the recorder saw answered 200: each is one usage
// record.
func messagesCalls(rec *recorder) int {
	n := 0
	for _, ex := range rec.snapshot() {
		if ex.Path() == "/v1/messages" && ex.Method == http.MethodPost && ex.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// usageRecords waits until the account has at least n usage records (the meter writes them in
// batches) and returns them, newest first.
func usageRecords(t *testing.T, gw *apitest.Gateway, account uuid.UUID, n int) []store.UsageRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := gw.Store.UsageRecords(context.Background(), account, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d usage records, want at least %d", len(recs), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// claudeMCPConfig is the --mcp-config file that points Claude Code at the gateway's MCP
// endpoint, as `tollgate connect mcp` and the console give it: the key as a bearer header that
// names the key's environment variable (connect.KeyVariable), which Claude Code expands.
func claudeMCPConfig(t *testing.T, url string) string {
	for _, b := range connect.MCP(connect.Target{BaseURL: strings.TrimSuffix(url, "/api/mcp")}).Blocks {
		if b.Lang == "json" {
			return b.Text
		}
	}
	t.Fatal("connect.MCP gave no Claude Code file")
	return ""
}

// testClaudeCodeMCP: Claude Code with the gateway's /api/mcp as an MCP server. The simulator
// calls a tool when the prompt says "call <tool name>", so the turn is a real tool loop:
// Claude Code connects, lists the tools, sends them to the model, calls the one the model
// picks on the MCP server and sends the result back.
func testClaudeCodeMCP(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := claudeSandbox(t, c, fx, rec)
	cfg := filepath.Join(sb.home, "tollgate-mcp.json")
	writeFile(t, cfg, claudeMCPConfig(t, rec.URL+"/api/mcp"))
	if text, _ := os.ReadFile(cfg); strings.Contains(string(text), fx.key) {
		t.Fatalf("the MCP settings file holds the key:\n%s", text)
	}
	sb.env[connect.KeyVariable] = fx.key
	const tool = "mcp__tollgate__list_storage_datasets"
	// Claude Code otherwise defers MCP tools behind its ToolSearch tool (the request carries a
	// DeferredToolPlaceholder with defer_loading), which a simulated model cannot search.
	sb.env["ENABLE_TOOL_SEARCH"] = "false"
	r := run(t, rec, sb, c.claude(), "-p", "call "+tool, "--output-format", "stream-json", "--verbose",
		"--mcp-config", cfg, "--strict-mcp-config", "--allowedTools", tool)
	msgs := jsonLines(r.stdout)
	var init map[string]any
	for _, m := range msgs {
		if m["type"] == "system" && m["subtype"] == "init" {
			init = m
			break
		}
	}
	if init == nil {
		t.Errorf("Claude Code printed no init message")
	} else {
		connected := false
		servers, _ := init["mcp_servers"].([]any)
		for _, s := range servers {
			if m, _ := s.(map[string]any); m["name"] == "tollgate" && m["status"] == "connected" {
				connected = true
			}
		}
		if !connected {
			t.Errorf("Claude Code's init message does not list the tollgate MCP server as connected: %v", init["mcp_servers"])
		}
		var tools []string
		list, _ := init["tools"].([]any)
		for _, name := range list {
			tools = append(tools, fmt.Sprint(name))
		}
		for _, name := range datasetTools {
			if !contains(tools, "mcp__tollgate__"+name) {
				t.Errorf("Claude Code's tools lack mcp__tollgate__%s: %v", name, tools)
			}
		}
	}
	claudeResult(t, r, msgs)
	checkMCP(t, rec, "tools/call:list_storage_datasets")
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	rec.checkEgress(t)
}

// codexConfig is the Codex CLI's config.toml. With builtin false the gateway is a custom
// provider on the Responses API with the key in TOLLGATE_API_KEY; with builtin true the built-in
// openai provider's base URL points at the gateway (the key is then CODEX_API_KEY, which
// codex exec reads; with OPENAI_API_KEY alone it sends no Authorization and gets 401). mcp adds
// the gateway's MCP endpoint with the same key as its bearer token, as a required server, which
// Codex waits for before the first turn (testCodexMCPSlowStart). The update check,
// analytics and feedback are off, and so are plugins, whose start-up sync of the curated
// plugin list otherwise reaches github.com, api.github.com and chatgpt.com.
func codexConfig(recURL string, builtin, mcp bool) string {
	var b strings.Builder
	b.WriteString("model = \"service-flint\"\n")
	if builtin {
		fmt.Fprintf(&b, "openai_base_url = \"%s/v1\"\n", recURL)
	} else {
		b.WriteString("model_provider = \"tollgate\"\n")
	}
	b.WriteString(`check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
`)
	if !builtin {
		fmt.Fprintf(&b, `
[model_providers.tollgate]
name = "tollgate"
base_url = "%s/v1"
env_key = "TOLLGATE_API_KEY"
wire_api = "responses"
`, recURL)
	}
	if mcp {
		fmt.Fprintf(&b, `
[mcp_servers.tollgate]
url = "%s/api/mcp"
bearer_token_env_var = "TOLLGATE_API_KEY"
required = true
`, recURL)
	}
	return b.String()
}

// codexSandbox is the Codex CLI's environment: its own CODEX_HOME with config.toml, and the key.
func codexSandbox(t *testing.T, c clients, fx fixture, rec *recorder, builtin, mcp bool) sandbox {
	sb := newSandbox(t, c, rec)
	codexHome := filepath.Join(sb.home, ".codex")
	writeFile(t, filepath.Join(codexHome, "config.toml"), codexConfig(rec.URL, builtin, mcp))
	sb.env["CODEX_HOME"] = codexHome
	if builtin {
		sb.env["CODEX_API_KEY"] = fx.key
	} else {
		sb.env["TOLLGATE_API_KEY"] = fx.key
	}
	return sb
}

// codexTurn checks the events of codex exec --json: a completed turn with an agent message.
func codexTurn(t *testing.T, r clientRun) []map[string]any {
	t.Helper()
	events := jsonLines(r.stdout)
	completed, message := false, ""
	for _, ev := range events {
		switch ev["type"] {
		case "turn.completed":
			completed = true
		case "error":
			t.Errorf("Codex reported an error: %v", ev["message"])
		case "turn.failed":
			errObj, _ := ev["error"].(map[string]any)
			t.Errorf("Codex reported turn.failed: %v", errObj["message"])
		case "item.completed":
			if item, _ := ev["item"].(map[string]any); item["type"] == "agent_message" {
				message = fmt.Sprint(item["text"])
			}
		}
	}
	if !completed {
		t.Errorf("Codex printed no turn.completed event")
	}
	if strings.TrimSpace(message) == "" {
		t.Errorf("Codex printed no agent message")
	}
	if r.err != nil {
		t.Errorf("Codex exited with %v", r.err)
	}
	return events
}

// testCodex: codex exec with exactly the config.toml the console and `tollgate connect codex`
// give a person (connect.Codex: the gateway as a custom Responses provider, the model's
// context window as the console reads it), which --strict-config accepts (it refuses a field
// Codex does not know). Codex holds the window it was given: its session's token counts say
// model_context_window, which it compacts by, at 95% of it (190,000 for service-flint's
// 200,000; without the setting, 258,400, 95% of the 272,000 its fallback metadata assumes).
func testCodex(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := codexSandbox(t, c, fx, rec, false, false)
	facts := connect.Facts(fx.gw.Config, "service-flint")
	setup := connect.Codex(connect.Target{BaseURL: rec.URL, Key: fx.key, ChatModel: "service-flint", Chat: facts})
	if facts == nil || setup.Unavailable != "" || !strings.Contains(setup.Blocks[0].Text, "model_context_window") {
		t.Fatalf("connect.Codex gave no config.toml with the model's window: %+v", setup)
	}
	writeFile(t, filepath.Join(sb.env["CODEX_HOME"], "config.toml"), setup.Blocks[0].Text)
	r := run(t, rec, sb, append(c.codex(), "exec", "--json", "--strict-config", "--skip-git-repo-check", "Say hi")...)
	codexTurn(t, r)
	checkInference(t, rec, "/v1/responses", "service-flint")
	checkCodexWindow(t, sb.env["CODEX_HOME"], facts.ContextTokens)
	rec.checkEgress(t)
}

// checkCodexWindow: the session Codex wrote under codexHome (sessions/…/rollout-*.jsonl) says
// in its token counts that the model's context window is window, less the 5% Codex keeps back
// (its model metadata's effective_context_window_percent, 95 for a model it has no metadata
// for).
func checkCodexWindow(t *testing.T, codexHome string, window int) {
	t.Helper()
	rollouts, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*.jsonl"))
	if len(rollouts) == 0 {
		t.Fatalf("Codex wrote no session under %s", codexHome)
	}
	var windows []string
	for _, path := range rollouts {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		windows = append(windows, codexWindowRe.FindAllString(string(b), -1)...)
	}
	t.Logf("Codex's session says %v", windows)
	want := fmt.Sprintf(`"model_context_window":%d`, window*95/100)
	if len(windows) == 0 || slices.ContainsFunc(windows, func(w string) bool { return w != want }) {
		t.Errorf("Codex's session says %v, want %s", windows, want)
	}
}

// codexWindowRe finds the context window in a Codex session's token counts.
var codexWindowRe = regexp.MustCompile(`"model_context_window":[0-9]+`)

// knownGaps names what the gateway does not do yet that a check below depends on, with why.
// A check whose gap is listed is skipped (visibly, with the reason) instead of failing; once
// the gap is closed the check fails until its entry is removed, so the list cannot go stale.
var knownGaps = map[string]string{}

// knownGap runs check as a subtest: with gap listed in knownGaps, a failing check is skipped
// with the reason and a passing one fails to say the entry must go.
func knownGap(t *testing.T, gap, name string, check func() error) {
	t.Run(name, func(t *testing.T) {
		err := check()
		reason, listed := knownGaps[gap]
		switch {
		case err != nil && listed:
			t.Skipf("known gap %q: %v: %s", gap, err, reason)
		case err != nil:
			t.Error(err)
		case listed:
			t.Errorf("known gap %q is closed (the check passes): remove it from knownGaps", gap)
		}
	})
}

// testCodexMCP: codex exec with the gateway's MCP endpoint configured. Codex starts the MCP
// client before the turn, so the recording shows initialize and tools/list whatever the model
// does; the prompt asks the simulator for a call of the namespaced tool.
func testCodexMCP(t *testing.T, c clients, fx fixture) {
	codexMCPTurn(t, c, fx, 0)
}

// testCodexMCPSlowStart is testCodexMCP with every request to /api/mcp held 1.5 s, as a loaded
// machine once did (TestRealClients/CodexMCP/ToolCall failed when Codex 0.169 sent its first
// POST /v1/responses 17 ms after the MCP initialize, before tools/list): Codex builds the first
// turn's tools waiting for an optional MCP server only mcp_optional_startup_grace_ms (1,000 ms
// by default), so a server slower than that is left out of the turn. The configuration marks
// the server required, which makes Codex wait for it up to its startup_timeout_sec.
func testCodexMCPSlowStart(t *testing.T, c clients, fx fixture) {
	codexMCPTurn(t, c, fx, 1500*time.Millisecond)
}

// codexMCPTurn is one codex exec turn that asks for the gateway's MCP tool, with each MCP
// request held delay, and its checks.
func codexMCPTurn(t *testing.T, c clients, fx fixture, delay time.Duration) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	rec.mcpDelay = delay
	sb := codexSandbox(t, c, fx, rec, false, true)
	r := run(t, rec, sb, append(c.codex(), "exec", "--json", "--strict-config", "--skip-git-repo-check", "call mcp__tollgate__list_storage_datasets")...)
	codexTurn(t, r)
	checkMCP(t, rec)
	checkInference(t, rec, "/v1/responses", "service-flint")
	rec.checkEgress(t)
	knownGap(t, "codex-mcp-tool-call", "ToolCall", func() error {
		if methods := rec.mcpMethods(); !contains(methods, "tools/call:list_storage_datasets") {
			return fmt.Errorf("Codex never called list_storage_datasets on /api/mcp (it sent %v)", methods)
		}
		return nil
	})
}

// testCodexBuiltinProvider: codex exec on its built-in openai provider with the base URL
// pointed at the gateway and the key as the OpenAI API key. The built-in provider asks for the
// Responses WebSocket mode first; the gateway serves it, so the one handshake is a 101 and the
// turn never falls back to POST /v1/responses (see testCodexWebSocketTurns for three turns).
func testCodexBuiltinProvider(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := codexSandbox(t, c, fx, rec, true, false)
	r := run(t, rec, sb, append(c.codex(), "exec", "--json", "--strict-config", "--skip-git-repo-check", "Say hi")...)
	codexTurn(t, r)
	var probes []string
	for _, ex := range rec.snapshot() {
		if ex.Method == http.MethodGet && strings.EqualFold(ex.RequestHeader.Get("Upgrade"), "websocket") {
			probes = append(probes, fmt.Sprintf("%d", ex.Status))
		}
		if ex.Method == http.MethodPost && ex.Path() == "/v1/responses" {
			t.Errorf("Codex fell back to POST /v1/responses (answered %d)", ex.Status)
		}
	}
	if len(probes) != 1 || probes[0] != "101" {
		t.Errorf("Codex's WebSocket handshakes on GET /v1/responses were answered %s; want one 101", strings.Join(probes, ", "))
	}
	rec.checkEgress(t)
}

// testCodexWebSocketTurns: three turns of codex exec (then exec resume --last twice) on the
// built-in openai provider, with no provider configured: every turn goes over the Responses
// WebSocket (a 101 handshake), none falls back to POST /v1/responses, and none meets a 426.
func testCodexWebSocketTurns(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := codexSandbox(t, c, fx, rec, true, false)
	flags := []string{"--json", "--strict-config", "--skip-git-repo-check"}
	turns := [][]string{
		append(append([]string{"exec"}, flags...), "Say hi"),
		append(append([]string{"exec", "resume", "--last"}, flags...), "Say hi again"),
		append(append([]string{"exec", "resume", "--last"}, flags...), "And once more"),
	}
	for _, args := range turns {
		codexTurn(t, run(t, rec, sb, append(c.codex(), args...)...))
	}
	upgrades := 0
	for _, ex := range rec.snapshot() {
		if ex.Path() != "/v1/responses" {
			continue
		}
		switch {
		case ex.Method == http.MethodGet && ex.Status == http.StatusSwitchingProtocols:
			upgrades++
		case ex.Method == http.MethodPost:
			t.Errorf("Codex fell back to POST /v1/responses (answered %d)", ex.Status)
		default:
			t.Errorf("%s /v1/responses answered %d: %s", ex.Method, ex.Status, errorMessage(ex.ResponseBody))
		}
	}
	if upgrades < len(turns) {
		t.Errorf("%d WebSocket handshakes for %d turns", upgrades, len(turns))
	}
	rec.checkEgress(t)
}

// testMCPTypeScriptSDK: the official TypeScript SDK client lists the tools and calls three.
func testMCPTypeScriptSDK(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := newSandbox(t, c, rec)
	sb.env["TOLLGATE_API_KEY"] = fx.key
	r := run(t, rec, sb, append(c.mcpClient(), rec.URL+"/api/mcp")...)
	if r.err != nil {
		t.Errorf("the SDK client exited with %v", r.err)
	}
	var out struct {
		Tools             []string
		List, Load, Query toolResult
		ProtocolVersion   string
	}
	if err := json.Unmarshal(r.stdout, &out); err != nil {
		t.Errorf("the SDK client's output is not JSON: %v", err)
	}
	for _, name := range datasetTools {
		if !contains(out.Tools, name) {
			t.Errorf("tools/list lacks %s: %v", name, out.Tools)
		}
	}
	out.List.expect(t, "list_storage_datasets", "sales")
	out.Load.expect(t, "load_storage_dataset", "3")
	out.Query.expect(t, "query_data", "42")
	checkMCP(t, rec, "tools/call:list_storage_datasets", "tools/call:load_storage_dataset", "tools/call:query_data")
	rec.checkEgress(t)
}

// toolResult is an MCP CallToolResult as the clients print it.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (r toolResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// expect checks the result is not an error and its text contains want.
func (r toolResult) expect(t *testing.T, tool, want string) {
	t.Helper()
	if r.IsError || !strings.Contains(r.text(), want) {
		t.Errorf("%s: isError %v, text %q, want it to contain %q", tool, r.IsError, r.text(), want)
	}
}

// testMCPInspectorCLI: the MCP Inspector's CLI mode, tools/list and tools/call.
func testMCPInspectorCLI(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := newSandbox(t, c, rec)
	base := append(c.inspector(), "--cli", rec.URL+"/api/mcp", "--transport", "http", "--header", "Authorization: Bearer "+fx.key)

	r := run(t, rec, sb, append(base, "--method", "tools/list")...)
	if r.err != nil {
		t.Errorf("inspector tools/list exited with %v", r.err)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.stdout, &list); err != nil {
		t.Errorf("inspector tools/list output is not JSON: %v", err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, name := range datasetTools {
		if !contains(names, name) {
			t.Errorf("inspector tools/list lacks %s: %v", name, names)
		}
	}

	r = run(t, rec, sb, append(base, "--method", "tools/call", "--tool-name", "list_storage_datasets")...)
	if r.err != nil {
		t.Errorf("inspector tools/call exited with %v", r.err)
	}
	var res toolResult
	if err := json.Unmarshal(r.stdout, &res); err != nil {
		t.Errorf("inspector tools/call output is not JSON: %v", err)
	}
	res.expect(t, "list_storage_datasets", "sales")
	checkMCP(t, rec, "tools/call:list_storage_datasets")
	rec.checkEgress(t)
}

// sdkSandbox is the environment of our scripts on the official SDKs: the key in
// TOLLGATE_API_KEY and no provider variable at all (ANTHROPIC_API_KEY, OPENAI_API_KEY,
// OPENAI_BASE_URL and the like stay unset, so only what the script passes counts), and Node's
// fetch told to honour the proxy variables, so a request for anywhere but the gateway goes to
// the recorder and is refused and reported instead of failing unseen.
func sdkSandbox(t *testing.T, c clients, fx fixture, rec *recorder) sandbox {
	sb := newSandbox(t, c, rec)
	sb.env["TOLLGATE_API_KEY"] = fx.key
	sb.env["NODE_USE_ENV_PROXY"] = "1"
	// Node 22 warns on stderr that the proxy agent this uses is experimental.
	sb.env["NODE_OPTIONS"] = "--disable-warning=UNDICI-EHPA"
	return sb
}

// sdkOutput decodes the one JSON object a script printed into out. It fails the test and
// reports false when the script failed (with what it said) or printed something else; what
// went over the wire is checked in any case, the output only when there is one.
func sdkOutput(t *testing.T, r clientRun, out any) bool {
	t.Helper()
	if r.err != nil {
		t.Errorf("%s exited with %v: %s", clientName(r.args), r.err, shorten(r.stderr, 2000))
		return false
	}
	if err := json.Unmarshal(r.stdout, out); err != nil {
		t.Errorf("%s's output is not one JSON object: %v", clientName(r.args), err)
		return false
	}
	return true
}

// usage is a usage object in any of the three formats.
type usage map[string]any

// positive checks that each of fields is a number above zero.
func (u usage) positive(t *testing.T, what string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		if n, ok := u[f].(float64); !ok || n <= 0 {
			t.Errorf("%s: usage.%s is %v, want a number above 0 (usage %v)", what, f, u[f], map[string]any(u))
		}
	}
}

// nonEmpty checks that a text the client got is not blank.
func nonEmpty(t *testing.T, what, text string) {
	t.Helper()
	if strings.TrimSpace(text) == "" {
		t.Errorf("%s: the text is empty", what)
	}
}

// checkRoutes checks that the client sent each of routes ("METHOD /path") at least once and
// that every request it sent to one of them was answered 200 (checkInference does this for
// the inference routes, with their models).
func checkRoutes(t *testing.T, rec *recorder, routes ...string) {
	t.Helper()
	seen := map[string]int{}
	for _, ex := range rec.snapshot() {
		route := ex.Method + " " + ex.Path()
		if !contains(routes, route) {
			continue
		}
		seen[route]++
		if ex.Status != http.StatusOK {
			t.Errorf("%s got %d: %s", route, ex.Status, errorMessage(ex.ResponseBody))
		}
	}
	for _, route := range routes {
		if seen[route] == 0 {
			t.Errorf("the client never sent %s", route)
		}
	}
}

// checkBearerOnly checks that every request carried the key as a bearer token and none an
// x-api-key header: the gateway takes bearer keys only, and an SDK that also sends x-api-key
// (the Anthropic SDK does when ANTHROPIC_API_KEY is set or apiKey is passed) is configured
// differently from what the README tells users.
func checkBearerOnly(t *testing.T, rec *recorder, key string) {
	t.Helper()
	var withAPIKey, notBearer []string
	list := rec.snapshot()
	for _, ex := range list {
		if len(ex.RequestHeader.Values("X-Api-Key")) > 0 {
			withAPIKey = append(withAPIKey, ex.Method+" "+ex.Path())
		}
		if got := ex.RequestHeader.Get("Authorization"); got != "Bearer "+key {
			scheme, _, _ := strings.Cut(got, " ")
			notBearer = append(notBearer, fmt.Sprintf("%s %s (Authorization %q …)", ex.Method, ex.Path(), scheme))
		}
	}
	if len(withAPIKey) > 0 {
		t.Errorf("%d of %d requests carried an x-api-key header: %s", len(withAPIKey), len(list), strings.Join(withAPIKey, ", "))
	}
	if len(notBearer) > 0 {
		t.Errorf("%d of %d requests did not carry the key as Authorization: Bearer: %s", len(notBearer), len(list), strings.Join(notBearer, ", "))
	}
}

// requestsTo decodes the JSON body of each POST to path.
func requestsTo(rec *recorder, path string) []map[string]any {
	var out []map[string]any
	for _, ex := range rec.snapshot() {
		if ex.Method != http.MethodPost || ex.Path() != path {
			continue
		}
		var m map[string]any
		if json.Unmarshal(ex.RequestBody, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// checkModels checks that a models list names every model the tenant's plan offers.
func checkModels(t *testing.T, what string, got []string) {
	t.Helper()
	for _, id := range []string{"service-flint", "service-flint-base", "service-sonnet"} {
		if !contains(got, id) {
			t.Errorf("%s: models.list() lacks %s: %v", what, id, got)
		}
	}
}

// testOpenAISDK: the official OpenAI TypeScript SDK (npm/openai-sdk.mjs) with the gateway as
// its base URL: chat completions and Responses, streamed and not, structured output parsed
// with zod and a function-tool round trip on each, and the models list.
func testOpenAISDK(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := sdkSandbox(t, c, fx, rec)
	r := run(t, rec, sb, append(c.script("openai-sdk.mjs"), rec.URL+"/v1")...)
	type chatOut struct {
		ID, Text, FinishReason string
		Usage                  usage
	}
	var out struct {
		Chat       chatOut
		ChatStream struct {
			chatOut
			Chunks int
		}
		Response struct {
			ID, Status, Text string
			Usage            usage
		}
		ResponseStream struct {
			ID, Status, Text, Deltas string
			Events                   int
			EventTypes               []string
			Usage                    usage
		}
		Structured struct {
			ID, FinishReason, Content string
			Refusal                   *string
			Parsed                    map[string]any
			Usage                     usage
		}
		StructuredResponse struct {
			ID, Status, Text string
			Parsed           map[string]any
			Usage            usage
		}
		Tools struct {
			FinishReason string
			Call         struct {
				ID, Type, Name string
				Arguments      map[string]any
			}
			FinalFinishReason, FinalText string
			FinalToolCalls               int
		}
		ResponseTools struct {
			Call struct {
				CallID, Name string
				Arguments    map[string]any
			}
			FinalStatus, FinalText string
			FinalCalls             int
		}
		Models []string
	}
	ok := sdkOutput(t, r, &out)

	// What went over the wire: every inference request for its model and answered 200, the
	// models listed, the key as a bearer token only, and nothing sent anywhere else.
	checkInference(t, rec, "/v1/chat/completions", "service-flint-base")
	checkInference(t, rec, "/v1/responses", "service-flint")
	checkRoutes(t, rec, "GET /v1/models")
	checkBearerOnly(t, rec, fx.key)
	rec.checkEgress(t)
	if !ok {
		return
	}

	const chatUsage, respUsage = "prompt_tokens completion_tokens total_tokens", "input_tokens output_tokens total_tokens"

	// (a), (b): chat completions.
	nonEmpty(t, "chat", out.Chat.Text)
	out.Chat.Usage.positive(t, "chat", strings.Fields(chatUsage)...)
	if out.Chat.FinishReason != "stop" || !strings.HasPrefix(out.Chat.ID, "chatcmpl") {
		t.Errorf("chat: finish_reason %q, id %q; want stop and a chatcmpl id", out.Chat.FinishReason, out.Chat.ID)
	}
	nonEmpty(t, "streamed chat", out.ChatStream.Text)
	out.ChatStream.Usage.positive(t, "streamed chat (stream_options.include_usage)", strings.Fields(chatUsage)...)
	if out.ChatStream.Chunks < 3 || out.ChatStream.FinishReason != "stop" {
		t.Errorf("streamed chat: %d chunks, finish_reason %q; want several and stop", out.ChatStream.Chunks, out.ChatStream.FinishReason)
	}

	// (c), (d): Responses.
	nonEmpty(t, "response", out.Response.Text)
	out.Response.Usage.positive(t, "response", strings.Fields(respUsage)...)
	if out.Response.Status != "completed" || !strings.HasPrefix(out.Response.ID, "resp") {
		t.Errorf("response: status %q, id %q; want completed and a resp id", out.Response.Status, out.Response.ID)
	}
	rs := out.ResponseStream
	nonEmpty(t, "streamed response", rs.Text)
	rs.Usage.positive(t, "streamed response", strings.Fields(respUsage)...)
	if rs.Status != "completed" || rs.Deltas != rs.Text {
		t.Errorf("streamed response: status %q, deltas %q, final output_text %q; want completed and the deltas adding up to the text", rs.Status, rs.Deltas, rs.Text)
	}
	for _, ev := range []string{"response.created", "response.output_text.delta", "response.completed"} {
		if !contains(rs.EventTypes, ev) {
			t.Errorf("streamed response: no %s event among %v", ev, rs.EventTypes)
		}
	}

	// (e): structured output, parsed and validated by the SDK with the zod schema.
	st := out.Structured
	st.Usage.positive(t, "structured", strings.Fields(chatUsage)...)
	if st.Refusal != nil || st.FinishReason != "stop" {
		t.Errorf("structured: finish_reason %q, refusal %v; want stop and none", st.FinishReason, st.Refusal)
	}
	var fromContent map[string]any
	if err := json.Unmarshal([]byte(st.Content), &fromContent); err != nil {
		t.Errorf("structured: the content is not JSON: %v: %q", err, st.Content)
	}
	checkCity(t, st.Parsed)
	if fromContent != nil && !reflect.DeepEqual(fromContent, st.Parsed) {
		t.Errorf("structured: parsed %v differs from the content %q", st.Parsed, st.Content)
	}
	// The same on Responses (responses.parse with zodTextFormat).
	sr := out.StructuredResponse
	sr.Usage.positive(t, "structured response", strings.Fields(respUsage)...)
	if sr.Status != "completed" {
		t.Errorf("structured response: status %q, want completed", sr.Status)
	}
	checkCity(t, sr.Parsed)

	// (f): the function-tool round trips.
	tl := out.Tools
	if tl.FinishReason != "tool_calls" || tl.Call.Name != "get_weather" || tl.Call.Type != "function" || tl.Call.ID == "" {
		t.Errorf("tool call: finish_reason %q, call %+v; want tool_calls and a function call of get_weather with an id", tl.FinishReason, tl.Call)
	}
	if city, ok := tl.Call.Arguments["city"].(string); !ok || len(tl.Call.Arguments) != 1 {
		t.Errorf("tool call: arguments %v, want {\"city\": <string>} (%q) as the strict schema says", tl.Call.Arguments, city)
	}
	nonEmpty(t, "the answer to the tool result", tl.FinalText)
	if tl.FinalFinishReason != "stop" || tl.FinalToolCalls != 0 {
		t.Errorf("the answer to the tool result: finish_reason %q with %d tool calls; want stop and text", tl.FinalFinishReason, tl.FinalToolCalls)
	}
	rt := out.ResponseTools
	if city, ok := rt.Call.Arguments["city"].(string); !ok || len(rt.Call.Arguments) != 1 || rt.Call.Name != "get_weather" || rt.Call.CallID == "" {
		t.Errorf("Responses tool call: %+v (city %q); want a get_weather function_call with a call_id and arguments {\"city\": <string>}", rt.Call, city)
	}
	nonEmpty(t, "the Responses answer to the function_call_output", rt.FinalText)
	if rt.FinalStatus != "completed" || rt.FinalCalls != 0 {
		t.Errorf("the Responses answer to the function_call_output: status %q with %d function calls; want completed and text", rt.FinalStatus, rt.FinalCalls)
	}

	// (g): the models list.
	checkModels(t, "OpenAI SDK", out.Models)

	// The requests as the SDK built them.
	var sawStructured, sawForced, sawUsageStream bool
	for _, body := range requestsTo(rec, "/v1/chat/completions") {
		if rf, _ := body["response_format"].(map[string]any); rf["type"] == "json_schema" {
			js, _ := rf["json_schema"].(map[string]any)
			sawStructured = sawStructured || js["name"] == "city" && js["strict"] == true && js["schema"] != nil
		}
		if tc, _ := body["tool_choice"].(map[string]any); tc["type"] == "function" {
			sawForced = true
		}
		if so, _ := body["stream_options"].(map[string]any); body["stream"] == true && so["include_usage"] == true {
			sawUsageStream = true
		}
	}
	if !sawStructured || !sawForced || !sawUsageStream {
		t.Errorf("the chat requests lack a strict json_schema response_format named city (%v), a forced tool_choice (%v) or a stream with include_usage (%v)", sawStructured, sawForced, sawUsageStream)
	}
}

// checkCity checks the structured object against the script's zod schema: name a string,
// population an integer, coastal a boolean, districts an array of strings, nothing else.
func checkCity(t *testing.T, obj map[string]any) {
	t.Helper()
	if obj == nil {
		t.Errorf("structured: no parsed object")
		return
	}
	if len(obj) != 4 {
		t.Errorf("structured: %d fields, want the schema's 4: %v", len(obj), obj)
	}
	if _, ok := obj["name"].(string); !ok {
		t.Errorf("structured: name is %T %v, want a string", obj["name"], obj["name"])
	}
	if n, ok := obj["population"].(float64); !ok || n != float64(int64(n)) {
		t.Errorf("structured: population is %T %v, want an integer", obj["population"], obj["population"])
	}
	if _, ok := obj["coastal"].(bool); !ok {
		t.Errorf("structured: coastal is %T %v, want a boolean", obj["coastal"], obj["coastal"])
	}
	list, ok := obj["districts"].([]any)
	if !ok {
		t.Errorf("structured: districts is %T %v, want an array of strings", obj["districts"], obj["districts"])
	}
	for _, d := range list {
		if _, ok := d.(string); !ok {
			t.Errorf("structured: districts holds %T %v, want strings only", d, d)
		}
	}
}

// testAnthropicSDK: the official Anthropic TypeScript SDK (npm/anthropic-sdk.mjs) with the
// gateway as its base URL and the key as its auth token: Messages streamed and not at a coding
// agent's max_tokens, one bound above the model's limit clamped (and said so in a header), a
// forced tool call and its result, count_tokens and the models list.
func testAnthropicSDK(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := sdkSandbox(t, c, fx, rec)
	r := run(t, rec, sb, append(c.script("anthropic-sdk.mjs"), rec.URL)...)
	type msgOut struct {
		ID, Model, StopReason, Text string
		Usage                       usage
	}
	var out struct {
		Message msgOut
		Stream  struct {
			msgOut
			Deltas string
		}
		Clamped struct {
			msgOut
			Header, Expert string
		}
		Tool struct {
			StopReason string
			Call       struct {
				ID, Name string
				Input    map[string]any
			}
			Final         msgOut
			FinalToolUses int
		}
		CountTokens struct {
			InputTokens int `json:"input_tokens"`
		}
		Models []string
	}
	ok := sdkOutput(t, r, &out)

	// What went over the wire: every Messages request for service-sonnet and answered 200,
	// the clamp header on the one above the limit only, and the key as a bearer token only.
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	checkRoutes(t, rec, "POST /v1/messages/count_tokens", "GET /v1/models")
	var bounds []string
	for _, ex := range rec.snapshot() {
		if ex.Method != http.MethodPost || ex.Path() != "/v1/messages" {
			continue
		}
		var body struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.Unmarshal(ex.RequestBody, &body)
		bounds = append(bounds, strconv.Itoa(body.MaxTokens))
		clamped := ex.ResponseHeader.Get("X-Tollgate-Clamped-Fields")
		switch {
		case body.MaxTokens > 64000 && clamped != "max_tokens=64000":
			t.Errorf("POST /v1/messages with max_tokens %d: x-tollgate-clamped-fields %q, want max_tokens=64000", body.MaxTokens, clamped)
		case body.MaxTokens <= 64000 && clamped != "":
			t.Errorf("POST /v1/messages with max_tokens %d (within the limit): x-tollgate-clamped-fields %q, want none", body.MaxTokens, clamped)
		}
		if ex.RequestHeader.Get("Anthropic-Version") == "" {
			t.Errorf("POST /v1/messages without anthropic-version: the SDK always sends it")
		}
	}
	checkBearerOnly(t, rec, fx.key)
	rec.checkEgress(t)
	if !ok {
		return
	}

	msgUsage := []string{"input_tokens", "output_tokens"}
	check := func(what string, m msgOut) {
		t.Helper()
		nonEmpty(t, what, m.Text)
		m.Usage.positive(t, what, msgUsage...)
		if m.StopReason != "end_turn" || !strings.HasPrefix(m.ID, "msg_") || m.Model != "service-sonnet" {
			t.Errorf("%s: stop_reason %q, id %q, model %q; want end_turn, a msg_ id and service-sonnet", what, m.StopReason, m.ID, m.Model)
		}
	}
	check("message", out.Message)
	check("streamed message", out.Stream.msgOut)
	if out.Stream.Deltas != out.Stream.Text {
		t.Errorf("streamed message: the text events %q do not add up to the final text %q", out.Stream.Deltas, out.Stream.Text)
	}
	check("clamped message", out.Clamped.msgOut)
	if out.Clamped.Header != "max_tokens=64000" {
		t.Errorf("max_tokens 100000: x-tollgate-clamped-fields is %q, want \"max_tokens=64000\"", out.Clamped.Header)
	}

	tl := out.Tool
	if city, ok := tl.Call.Input["city"].(string); tl.StopReason != "tool_use" || tl.Call.Name != "get_weather" || !strings.HasPrefix(tl.Call.ID, "toolu_") || !ok {
		t.Errorf("forced tool call: stop_reason %q, call %+v (city %q); want tool_use and a get_weather call with a toolu_ id and a string city", tl.StopReason, tl.Call, city)
	}
	check("the answer to the tool result", tl.Final)
	if tl.FinalToolUses != 0 {
		t.Errorf("the answer to the tool result has %d tool_use blocks, want text only", tl.FinalToolUses)
	}
	if out.CountTokens.InputTokens <= 0 {
		t.Errorf("countTokens: input_tokens %d, want above 0", out.CountTokens.InputTokens)
	}
	checkModels(t, "Anthropic SDK", out.Models)
	if want := "32000 32000 100000 32000 32000"; strings.Join(bounds, " ") != want {
		t.Errorf("max_tokens of the Messages requests: %s, want %s", strings.Join(bounds, " "), want)
	}
}
