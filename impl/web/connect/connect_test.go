package connect

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/config"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the code")

// target is a gateway behind https with a key of the real shape.
var target = Target{BaseURL: "https://gateway.example.com", Key: "tgk_0123456789ABCDEFabcdef0123456789ABCDEFab",
	ChatModel: "service-flint", MessagesModel: "service-sonnet"}

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestSettingsExact: each client's settings for a gateway URL and a key, byte for byte
// (testdata/<client>.golden, read there as a person reads them), as the key-created page
// shows them and a terminal command would print them.
func TestSettingsExact(t *testing.T) {
	for _, s := range All(target) {
		if s.Unavailable != "" || len(s.Blocks) == 0 {
			t.Errorf("%s has nothing to paste: %q", s.ID, s.Unavailable)
		}
		golden(t, s.ID, s.Text())
	}
}

// TestSettingsAddresses: the base URL each client wants, which the clients disagree on: the
// Anthropic ones (Claude Code, the Anthropic SDKs) without /v1, the OpenAI ones (Codex,
// opencode, the OpenAI SDKs) with it, MCP at /api/mcp; the key sent as a bearer token
// everywhere (never as ANTHROPIC_API_KEY, which is x-api-key).
func TestSettingsAddresses(t *testing.T) {
	text := map[string]string{}
	for _, s := range All(target) {
		text[s.ID] = s.Text()
	}
	for id, wants := range map[string][]string{
		"claude-code":   {"ANTHROPIC_BASE_URL=https://gateway.example.com\n", "ANTHROPIC_AUTH_TOKEN=" + target.Key + "\n"},
		"codex":         {`base_url = "https://gateway.example.com/v1"`, `env_key = "TOLLGATE_API_KEY"`, `wire_api = "responses"`, "export TOLLGATE_API_KEY=" + target.Key},
		"opencode":      {`"baseURL": "https://gateway.example.com/v1"`, `"apiKey": "{env:TOLLGATE_API_KEY}"`},
		"openai-sdk":    {`baseURL: "https://gateway.example.com/v1"`, `base_url="https://gateway.example.com/v1"`},
		"anthropic-sdk": {`baseURL: "https://gateway.example.com", authToken:`, `base_url="https://gateway.example.com", auth_token=`},
		"mcp":           {"URL: https://gateway.example.com/api/mcp\n", "Header: Authorization: Bearer " + target.Key + "\n", `"Authorization": "Bearer ` + target.Key + `"`},
	} {
		for _, want := range wants {
			if !strings.Contains(text[id], want) {
				t.Errorf("%s lacks %q:\n%s", id, want, text[id])
			}
		}
	}
	for _, s := range All(target) {
		for _, b := range s.Blocks {
			if strings.Contains(b.Text, "ANTHROPIC_API_KEY") || strings.Contains(strings.ToLower(b.Text), "x-api-key") {
				t.Errorf("%s sends the key as x-api-key:\n%s", s.ID, b.Text)
			}
		}
	}
}

// TestSettingsQuoting: an address with characters a file format gives meaning to stays one
// string in every block: the JSON blocks parse and hold it as it was, and the shell words are
// quoted.
func TestSettingsQuoting(t *testing.T) {
	odd := Target{BaseURL: `https://gw.example.com/a "b"\c`, Key: "tgk_it's", ChatModel: "m", MessagesModel: "n"}
	for _, s := range All(odd) {
		for _, b := range s.Blocks {
			switch b.Lang {
			case "json":
				var v any
				if err := json.Unmarshal([]byte(b.Text), &v); err != nil {
					t.Errorf("%s: %s is not JSON: %v\n%s", s.ID, b.Where, err, b.Text)
				}
				if !strings.Contains(b.Text, `https://gw.example.com/a \"b\"\\c`) {
					t.Errorf("%s: %s does not hold the address as a JSON string:\n%s", s.ID, b.Where, b.Text)
				}
			case "sh":
				if strings.Contains(b.Text, "tgk_it's") && !strings.Contains(b.Text, `'tgk_it'\''s'`) {
					t.Errorf("%s: the key is not quoted for the shell:\n%s", s.ID, b.Text)
				}
			}
		}
	}
}

// TestSettingsWithoutAModel: a key that may use no model of a family gets no settings for the
// clients that need one, and says why; the MCP endpoint needs no model.
func TestSettingsWithoutAModel(t *testing.T) {
	onlyChat := target
	onlyChat.MessagesModel = ""
	for _, s := range All(onlyChat) {
		wantNone := s.ID == "claude-code" || s.ID == "anthropic-sdk"
		if got := s.Unavailable != ""; got != wantNone || (wantNone && len(s.Blocks) > 0) {
			t.Errorf("%s without a Messages model: unavailable %q, %d blocks", s.ID, s.Unavailable, len(s.Blocks))
		}
		if wantNone && !strings.Contains(s.Text(), "no model served on Anthropic Messages") {
			t.Errorf("%s does not say why: %q", s.ID, s.Text())
		}
	}
}

// TestChooseModels picks the first model of each family among those a key may use, in the
// account's order, by the configuration's families.
func TestChooseModels(t *testing.T) {
	cfg := config.Default()
	for _, c := range []struct {
		ids            []string
		chat, messages string
	}{
		{[]string{"service-flint", "service-flint-base", "service-sonnet"}, "service-flint", "service-sonnet"},
		{[]string{"service-sonnet", "service-flint-base"}, "service-flint-base", "service-sonnet"},
		{[]string{"service-sonnet"}, "", "service-sonnet"},
		{[]string{"no-such-model", "service-flint"}, "service-flint", ""},
		{nil, "", ""},
	} {
		chat, messages := ChooseModels(cfg, c.ids)
		if chat != c.chat || messages != c.messages {
			t.Errorf("ChooseModels(%v) = %q, %q; want %q, %q", c.ids, chat, messages, c.chat, c.messages)
		}
	}
}
