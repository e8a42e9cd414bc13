package realclients_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/connect"
)

// TestCompaction drives each coding client's own compaction of its context through the
// gateway, in the client's non-interactive mode, each on a tenant of its own: Claude Code's
// /compact (claude -c -p /compact, then a turn on the compacted conversation), Codex's
// automatic compaction on the custom Responses provider connect.Codex gives (a low
// model_auto_compact_token_limit, so the second codex exec compacts before its turn, with a
// Responses request of its own) and on its built-in provider (remote compaction over the
// Responses WebSocket: a compaction_trigger item, answered with one compaction item), and
// opencode's automatic compaction (a model limit the first
// turn outgrows, so `opencode run -c` compacts before its turn, with a chat request of its
// own). Each compaction request is answered 200, the client completes the turn after it, and
// every call of the session is billed: its usage record holds, kind by kind, the usage the
// gateway answered the client with, its bill is its counts at its price, and the reservation
// covered it (nothing waived).
func TestCompaction(t *testing.T) {
	c := findClients(t)
	fx := startGateway(t)
	for _, tc := range []struct {
		name string
		test func(*testing.T, clients, fixture)
	}{
		{"ClaudeCode", compactClaudeCode},
		{"Codex", compactCodex},
		{"CodexBuiltinProvider", compactCodexBuiltin},
		{"Opencode", compactOpencode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, c, fx)
		})
	}
}

// compactClaudeCode: a turn, /compact, and a turn on the compacted conversation. Claude Code
// compacts on the client: a Messages request that asks for a summary of the conversation
// ("Your task is to create a detailed summary"), whose answer opens the next turn.
func compactClaudeCode(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "compact-claude", 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := claudeSandbox(t, c, fixture{gw: fx.gw, key: tenant.Key}, rec)
	r := run(t, rec, sb, c.claude(), "-p", "Say hi", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	r = run(t, rec, sb, c.claude(), "-c", "-p", "/compact", "--output-format", "json")
	if r.err != nil || !bytes.Contains(r.stdout, []byte(`"local_command":"compact"`)) || !bytes.Contains(r.stdout, []byte(`"subtype":"success"`)) {
		t.Errorf("claude -p /compact did not compact (%v): %s", orOK(r.err), shorten(r.stdout, 600))
	}
	r = run(t, rec, sb, c.claude(), "-c", "-p", "Say more", "--output-format", "json")
	claudeResult(t, r, jsonLines(r.stdout))
	checkCompacted(t, rec, "/v1/messages", "Your task is to create a detailed summary of the conversation", "This session is being continued from a previous conversation")
	checkSessionBilled(t, fx, rec, tenant.Account.ID, "/v1/messages")
}

// compactCodex: codex exec, then exec resume --last past model_auto_compact_token_limit on the
// custom provider: Codex compacts before the turn with a Responses request of its own
// (client_metadata's request_kind "compaction"), then answers on the compacted history.
func compactCodex(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "compact-codex", 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := codexSandbox(t, c, fixture{gw: fx.gw, key: tenant.Key}, rec, false, false)
	writeFile(t, filepath.Join(sb.env["CODEX_HOME"], "config.toml"), "model_auto_compact_token_limit = 2000\n"+codexConfig(rec.URL, false, false))
	flags := []string{"--json", "--strict-config", "--skip-git-repo-check"}
	codexTurn(t, run(t, rec, sb, append(c.codex(), append(append([]string{"exec"}, flags...), "Say hi")...)...))
	events := codexTurn(t, run(t, rec, sb, append(c.codex(), append(append([]string{"exec", "resume", "--last"}, flags...), "Say hi again")...)...))
	for _, ev := range events {
		if item, _ := ev["item"].(map[string]any); item["type"] == "error" && !strings.Contains(fmt.Sprint(item["message"]), "Model metadata") {
			t.Errorf("Codex reported %v", item["message"])
		}
	}
	checkCompacted(t, rec, "/v1/responses", `\"request_kind\":\"compaction\"`, "")
	checkSessionBilled(t, fx, rec, tenant.Account.ID, "/v1/responses")
}

// compactCodexBuiltin: codex exec, then exec resume --last past model_auto_compact_token_limit
// on the built-in openai provider pointed at the gateway. Codex compacts remotely (its
// remote_compaction_v2, on by default and no longer a setting): on the Responses WebSocket, a
// response.create whose input ends with a compaction_trigger item, answered with exactly one
// output item of type compaction, which the next request's input holds in place of the
// conversation before it. Every answer that generated (a warm-up, generate false, is not billed)
// has a usage record of its counts, billed as checkSessionBilled requires. Trial h4: the
// simulator standing in for OpenAI answered the trigger with a message, and Codex failed the
// turn ("remote compaction v2 expected exactly one compaction output item, got 0 from 1 output
// items") after the gateway had billed it.
func compactCodexBuiltin(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "compact-codex-builtin", 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := codexSandbox(t, c, fixture{gw: fx.gw, key: tenant.Key}, rec, true, false)
	writeFile(t, filepath.Join(sb.env["CODEX_HOME"], "config.toml"), "model_auto_compact_token_limit = 2000\n"+codexConfig(rec.URL, true, false))
	flags := []string{"--json", "--strict-config", "--skip-git-repo-check"}
	codexTurn(t, run(t, rec, sb, append(c.codex(), append(append([]string{"exec"}, flags...), "Say hi")...)...))
	codexTurn(t, run(t, rec, sb, append(c.codex(), append(append([]string{"exec", "resume", "--last"}, flags...), "Say hi again")...)...))
	triggers, compactions, resumed := 0, 0, 0
	var answered []price.Tokens
	for _, ex := range rec.snapshot() {
		if ex.Path() != "/v1/responses" {
			continue
		}
		if ex.Method != http.MethodGet || ex.Status != http.StatusSwitchingProtocols {
			t.Errorf("%s /v1/responses answered %d: %s", ex.Method, ex.Status, errorMessage(ex.ResponseBody))
			continue
		}
		for _, m := range socketMessages(ex.Socket, true) {
			kinds := itemTypes(m.payload, "input")
			switch {
			case len(kinds) > 0 && kinds[len(kinds)-1] == "compaction_trigger":
				triggers++
			case slices.Contains(kinds, "compaction"):
				resumed++
			}
		}
		for _, m := range socketMessages(ex.Socket, false) {
			var ev struct {
				Type     string          `json:"type"`
				Response json.RawMessage `json:"response"`
			}
			if json.Unmarshal(m.payload, &ev) != nil || ev.Type != "response.completed" {
				continue
			}
			if out := itemTypes(ev.Response, "output"); slices.Contains(out, "compaction") {
				compactions++
				if len(out) != 1 {
					t.Errorf("the compaction's answer has output items %v, want one compaction item", out)
				}
			}
			if tok, ok := answeredUsage(append([]byte("data: "), m.payload...)); ok && tok.Input() > 0 {
				answered = append(answered, tok)
			}
		}
	}
	if triggers != 1 || compactions != 1 || resumed == 0 {
		t.Errorf("%d compaction triggers, %d compaction items answered, %d requests after them holding one: want 1, 1 and some", triggers, compactions, resumed)
	}
	records := usageRecords(t, fx.gw, tenant.Account.ID, len(answered))
	if len(records) != len(answered) {
		t.Errorf("%d usage records for %d answers", len(records), len(answered))
	}
	matched := map[string]bool{}
	for _, want := range answered {
		i := slices.IndexFunc(records, func(u store.UsageRecord) bool { return !matched[u.RequestID] && u.Tokens() == want })
		if i < 0 {
			t.Errorf("no usage record holds the usage of an answer, %+v", want)
			continue
		}
		matched[records[i].RequestID] = true
		checkBill(t, records[i])
	}
	rec.checkEgress(t)
}

// itemTypes lists the types of the items of the array member of the JSON object obj.
func itemTypes(obj []byte, member string) []string {
	var m map[string]json.RawMessage
	var items []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(obj, &m) != nil || json.Unmarshal(m[member], &items) != nil {
		return nil
	}
	var kinds []string
	for _, it := range items {
		kinds = append(kinds, it.Type)
	}
	return kinds
}

// compactOpencode: `opencode run` with about 9,000 tokens of notes on a model whose limit the
// test sets to 8,000 tokens (opencode compacts when a turn's tokens pass the limit less the
// output bound), then `opencode run -c`: opencode compacts first, with a chat request of its
// own (its compaction agent's system prompt), and answers on the summary.
func compactOpencode(t *testing.T, c clients, fx fixture) {
	const model = "service-flint-base"
	tenant := fx.gw.NewTenant(t, "compact-opencode", 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := newSandbox(t, c, rec)
	facts := connect.Facts(fx.gw.Config, model)
	setup := connect.Opencode(connect.Target{BaseURL: rec.URL, Key: tenant.Key, ChatModel: model, Chat: facts})
	var cfg struct {
		Provider map[string]struct {
			Models map[string]map[string]any `json:"models"`
		} `json:"provider"`
	}
	var whole map[string]any
	if err := json.Unmarshal([]byte(setup.Blocks[0].Text), &whole); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(setup.Blocks[0].Text), &cfg); err != nil || cfg.Provider["tollgate"].Models[model] == nil {
		t.Fatalf("connect.Opencode gave no model %s: %v", model, err)
	}
	entry := whole["provider"].(map[string]any)["tollgate"].(map[string]any)["models"].(map[string]any)[model].(map[string]any)
	entry["limit"] = map[string]any{"context": 8000, "output": 500}
	text, _ := json.MarshalIndent(whole, "", "  ")
	writeFile(t, filepath.Join(sb.work, "opencode.json"), string(text))
	for k, v := range map[string]string{
		connect.KeyVariable:                tenant.Key,
		"OPENCODE_DISABLE_MODELS_FETCH":    "1",
		"OPENCODE_DISABLE_AUTOUPDATE":      "1",
		"OPENCODE_DISABLE_SHARE":           "1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
	} {
		sb.env[k] = v
	}
	words := make([]string, 4_500)
	for i := range words {
		words[i] = "note" + strconv.Itoa(i)
	}
	for _, args := range [][]string{{"run", "--format", "json", "Here are my notes: " + strings.Join(words, " ")}, {"run", "-c", "--format", "json", "Say more"}} {
		r := run(t, rec, sb, append([]string{c.opencode()}, args...)...)
		if r.err != nil {
			t.Errorf("opencode exited with %v", r.err)
		}
		said := ""
		for _, ev := range jsonLines(r.stdout) {
			part, _ := ev["part"].(map[string]any)
			switch ev["type"] {
			case "error":
				t.Errorf("opencode reported an error: %v", ev["error"])
			case "text":
				said += fmt.Sprint(part["text"])
			}
		}
		if strings.TrimSpace(said) == "" {
			t.Errorf("opencode %s printed no text", args[1])
		}
	}
	checkCompacted(t, rec, "/v1/chat/completions", "You are a context summarization agent", "")
	checkSessionBilled(t, fx, rec, tenant.Account.ID, "/v1/chat/completions")
}

// checkCompacted: the client sent path exactly one request whose body holds marker (its
// compaction), answered 200, then at least one more request answered 200, the first of which
// holds after (when given: the summary's hand-over); and no request of the session failed.
func checkCompacted(t *testing.T, rec *recorder, path, marker, after string) {
	t.Helper()
	compactions, answeredAfter := 0, 0
	for _, ex := range rec.snapshot() {
		if ex.Path() != path || ex.Method != http.MethodPost {
			continue
		}
		switch {
		case ex.Status != http.StatusOK:
			t.Errorf("POST %s answered %d: %s", path, ex.Status, errorMessage(ex.ResponseBody))
		case bytes.Contains(ex.RequestBody, []byte(marker)):
			compactions++
		case compactions > 0:
			if answeredAfter == 0 && after != "" && !bytes.Contains(ex.RequestBody, []byte(after)) {
				t.Errorf("the turn after the compaction does not hold its summary's hand-over %q", after)
			}
			answeredAfter++
		}
	}
	if compactions == 0 || answeredAfter == 0 {
		t.Errorf("%d compaction requests (%q) answered 200 and %d requests after them: want the client to compact and go on", compactions, marker, answeredAfter)
	}
}

// checkSessionBilled: every POST path the recorder saw answered 200 has its usage record (by
// the request id the gateway answered with), which holds the usage of the answer kind by kind,
// status ok, a bill that is its counts at its price, and nothing waived.
func checkSessionBilled(t *testing.T, fx fixture, rec *recorder, account uuid.UUID, path string) {
	t.Helper()
	var answered []recorded
	for _, ex := range rec.snapshot() {
		if ex.Path() == path && ex.Method == http.MethodPost && ex.Status == http.StatusOK {
			answered = append(answered, ex)
		}
	}
	byID := map[string]int{}
	records := usageRecords(t, fx.gw, account, len(answered))
	for i, u := range records {
		byID[u.RequestID] = i
	}
	for _, ex := range answered {
		id := ex.ResponseHeader.Get("X-Request-Id")
		i, ok := byID[id]
		if !ok {
			t.Errorf("no usage record of request %q", id)
			continue
		}
		want, ok := answeredUsage(ex.ResponseBody)
		if !ok {
			t.Errorf("request %s: its answer reported no usage", id)
			continue
		}
		if got := records[i].Tokens(); got != want {
			t.Errorf("request %s: billed %+v, the answer reported %+v", id, got, want)
		}
		checkBill(t, records[i])
	}
}

// checkBill: the record is priced, status ok, its bill its counts at its price, nothing waived.
func checkBill(t *testing.T, u store.UsageRecord) {
	t.Helper()
	if u.Price == nil {
		t.Errorf("request %s: an unpriced usage record", u.RequestID)
		return
	}
	if again := price.Cost(u.Tokens(), *u.Price); u.Status != "ok" || u.WaivedMicros != 0 || u.CostMicros != again.Total()+u.HostedMicros {
		t.Errorf("request %s: status %s, cost %d, waived %d; its counts at its price cost %d", u.RequestID, u.Status, u.CostMicros, u.WaivedMicros, again.Total())
	}
	t.Logf("request %s (%s): %+v, %d micro-units", u.RequestID, u.UpstreamModel, u.Tokens(), u.CostMicros)
}

// answeredUsage is the usage a streamed answer reported to its client, in any of the three
// formats, as token kinds: a Messages stream's last message_delta (with message_start's split
// of the cache writes), a Responses stream's response.completed, a chat stream's chunk with
// usage.
func answeredUsage(body []byte) (price.Tokens, bool) {
	var tok price.Tokens
	found := false
	var split struct{ Ephemeral5m, Ephemeral1h int64 }
	for _, line := range bytes.Split(body, []byte("\n")) {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
		if !ok {
			continue
		}
		var ev struct {
			Type     string
			Message  struct{ Usage messagesUsage }
			Usage    *json.RawMessage
			Response struct {
				Usage *struct {
					InputTokens        int64 `json:"input_tokens"`
					OutputTokens       int64 `json:"output_tokens"`
					InputTokensDetails struct {
						CachedTokens int64 `json:"cached_tokens"`
					} `json:"input_tokens_details"`
					OutputTokensDetails struct {
						ReasoningTokens int64 `json:"reasoning_tokens"`
					} `json:"output_tokens_details"`
				}
			}
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "message_start":
			split.Ephemeral5m, split.Ephemeral1h = ev.Message.Usage.CacheCreation.Ephemeral5m, ev.Message.Usage.CacheCreation.Ephemeral1h
		case ev.Type == "message_delta" && ev.Usage != nil:
			var u messagesUsage
			_ = json.Unmarshal(*ev.Usage, &u)
			tok = price.Tokens{Uncached: u.InputTokens, CacheRead: u.CacheRead, CacheWrite5m: u.CacheWrite, Output: u.OutputTokens}
			if split.Ephemeral1h > 0 {
				tok.CacheWrite5m, tok.CacheWrite1h = split.Ephemeral5m, split.Ephemeral1h
			}
			found = true
		case ev.Type == "response.completed" && ev.Response.Usage != nil:
			u := ev.Response.Usage
			tok = price.Tokens{Uncached: u.InputTokens - u.InputTokensDetails.CachedTokens, CacheRead: u.InputTokensDetails.CachedTokens,
				Output: u.OutputTokens, Reasoning: u.OutputTokensDetails.ReasoningTokens}
			found = true
		case ev.Type == "" && ev.Usage != nil && string(*ev.Usage) != "null":
			var u struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
				CompletionTokensDetails struct {
					ReasoningTokens int64 `json:"reasoning_tokens"`
				} `json:"completion_tokens_details"`
			}
			_ = json.Unmarshal(*ev.Usage, &u)
			tok = price.Tokens{Uncached: u.PromptTokens - u.PromptTokensDetails.CachedTokens, CacheRead: u.PromptTokensDetails.CachedTokens,
				Output: u.CompletionTokens, Reasoning: u.CompletionTokensDetails.ReasoningTokens}
			found = true
		}
	}
	return tok, found
}

// messagesUsage is a Messages usage object.
type messagesUsage struct {
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	CacheWrite    int64 `json:"cache_creation_input_tokens"`
	CacheCreation struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}
