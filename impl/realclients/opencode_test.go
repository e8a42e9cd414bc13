package realclients_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/connect"
)

// opencode is opencode's native binary, from its linux/amd64 package (opencode-linux-x64, what
// the opencode-ai package installs as an optional dependency on this platform; the lock holds
// the platform package alone, as it does Node.js: npm resolving opencode-ai here records only
// this platform's packages in the lock, and npm ci then refuses it as incomplete).
func (c clients) opencode() string {
	return filepath.Join(c.modules, "opencode-linux-x64", "bin", "opencode")
}

// testOpencode: `opencode run` with exactly the settings the console and `tollgate connect
// opencode` give a person (connect.Opencode: the gateway as an OpenAI-compatible provider, the
// key from TOLLGATE_API_KEY), its models.dev catalogue fetch, update check and sharing off.
// The turn streams from /v1/chat/completions, and the token counts opencode reports are the
// ones the gateway billed.
func testOpencode(t *testing.T, c clients, fx fixture) {
	tenant := fx.gw.NewTenant(t, "opencode", 0, 100_000_000)
	rec := newRecorder(t, fx.gw.URL, tenant.Key)
	sb := newSandbox(t, c, rec)
	setup := connect.Opencode(connect.Target{BaseURL: rec.URL, Key: tenant.Key, ChatModel: "service-flint"})
	if setup.Unavailable != "" || len(setup.Blocks) == 0 || setup.Blocks[0].Lang != "json" {
		t.Fatalf("connect.Opencode gave no configuration: %+v", setup)
	}
	writeFile(t, filepath.Join(sb.work, "opencode.json"), setup.Blocks[0].Text)
	for k, v := range map[string]string{
		connect.KeyVariable:                tenant.Key,
		"OPENCODE_DISABLE_MODELS_FETCH":    "1",
		"OPENCODE_DISABLE_AUTOUPDATE":      "1",
		"OPENCODE_DISABLE_SHARE":           "1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
	} {
		sb.env[k] = v
	}
	r := run(t, rec, sb, c.opencode(), "run", "--format", "json", "Say hi")
	if r.err != nil {
		t.Errorf("opencode exited with %v", r.err)
	}
	var text string
	var input, output int64
	for _, ev := range jsonLines(r.stdout) {
		part, _ := ev["part"].(map[string]any)
		switch ev["type"] {
		case "error":
			t.Errorf("opencode reported an error: %v", ev["error"])
		case "text":
			text += fmt.Sprint(part["text"])
		case "step_finish":
			tokens, _ := part["tokens"].(map[string]any)
			in, _ := tokens["input"].(float64)
			out, _ := tokens["output"].(float64)
			input, output = input+int64(in), output+int64(out)
		}
	}
	if strings.TrimSpace(text) == "" {
		t.Errorf("opencode printed no text")
	}
	checkInference(t, rec, "/v1/chat/completions", "service-flint")
	calls := 0
	for _, ex := range rec.snapshot() {
		if ex.Path() == "/v1/chat/completions" && ex.Method == http.MethodPost && ex.Status == http.StatusOK {
			calls++
			if !strings.Contains(string(ex.RequestBody), `"stream":true`) {
				t.Errorf("opencode asked without streaming: %.200s", ex.RequestBody)
			}
		}
	}
	// opencode's first run may also ask the model for a session title: every call is billed,
	// and the steps' counts it prints are the main agent's calls among them.
	records := usageRecords(t, fx.gw, tenant.Account.ID, calls)
	var billedIn, billedOut int64
	for _, u := range records {
		billedIn += u.Tokens().Input()
		billedOut += u.Tokens().Output
	}
	if input == 0 || output == 0 || input > billedIn || output > billedOut {
		t.Errorf("opencode counted %d input and %d output tokens; the gateway billed %d and %d over %d calls", input, output, billedIn, billedOut, len(records))
	}
	rec.checkEgressBut(t, map[string]string{
		"CONNECT registry.npmjs.org:443": "opencode installs its own plugin package (@opencode-ai/plugin) into its configuration directory on first run; refused, it runs without it",
	})
}

// checkEgressBut is checkEgress with some destinations allowed, each with the reason: a
// client's own housekeeping that carries nothing of the gateway's (no key, no prompt).
func (rec *recorder) checkEgressBut(t *testing.T, allowed map[string]string) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, dest := range rec.refused {
		if reason, ok := allowed[dest]; ok {
			t.Logf("refused %s, allowed: %s", dest, reason)
			continue
		}
		t.Errorf("client tried to reach %s (refused by the recorder)", dest)
	}
}
