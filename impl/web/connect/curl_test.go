package connect_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/web/connect"
)

func TestMain(m *testing.M) { apitest.Main(m) }

// TestCurlChecksTheKey runs the curl entry's lines as "Connect a client" and `tollgate connect
// curl` give them, with sh and curl, against a real gateway (the simulator behind it): the
// model list, then one chat completion, or for a key without a chat model one Anthropic
// message, each answered with the gateway's JSON rather than an error (newcomer walk s11h3:
// there was no plain check that a key works).
func TestCurlChecksTheKey(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	g := apitest.Start(t, apitest.Options{})
	tn := g.NewTenant(t, "acme", 0, 5_000_000)
	for _, c := range []struct {
		name   string
		target connect.Target
		object string
	}{
		{"chat", connect.Target{BaseURL: g.URL, Key: tn.Key, ChatModel: "service-flint", MessagesModel: "service-sonnet"}, `"chat.completion"`},
		{"messages only", connect.Target{BaseURL: g.URL, Key: tn.Key, MessagesModel: "service-sonnet"}, `"message"`},
	} {
		s := connect.Curl(c.target)
		if len(s.Blocks) != 1 || s.Blocks[0].Lang != "sh" {
			t.Fatalf("%s: curl's setup is not one shell block: %+v", c.name, s.Blocks)
		}
		out, err := exec.CommandContext(t.Context(), "sh", "-e", "-c", s.Blocks[0].Text).Output()
		if err != nil {
			t.Fatalf("%s: the curl lines failed: %v\n%s", c.name, err, s.Blocks[0].Text)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		var models, answer map[string]any
		if err := dec.Decode(&models); err != nil || models["object"] != "list" {
			t.Errorf("%s: the first line did not print the model list: %v\n%s", c.name, err, out)
		}
		if err := dec.Decode(&answer); err != nil || answer["error"] != nil || !strings.Contains(string(out), `"object":`+c.object) &&
			!strings.Contains(string(out), `"type":`+c.object) {
			t.Errorf("%s: the second line did not print an answer of kind %s: %v\n%s", c.name, c.object, err, out)
		}
	}
	if note := connect.Curl(connect.Target{BaseURL: g.URL, Key: tn.Key}).Note; !strings.Contains(note, "POST /v1/agents") ||
		!strings.Contains(note, "approval") {
		t.Errorf("curl's note does not say that the key starts an agent and the MCP tools wait for approval: %q", note)
	}
}
