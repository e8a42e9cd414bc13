package realclients_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/web/connect"
)

// snippetDrivers is what runs after a TypeScript line of a setup, by the setup's ID: one call
// on the model the line sets up, the way the client's documentation makes one, printing the
// answer's text as one JSON object.
var snippetDrivers = map[string]string{
	"ai-sdk": `
import { generateText } from "ai";
const result = await generateText({ model, prompt: "Say hello.", maxOutputTokens: 200 });
console.log(JSON.stringify({ text: result.text }));
`,
	"langchain": `
const answer = await model.invoke("Say hello.");
console.log(JSON.stringify({ text: typeof answer.content === "string" ? answer.content : JSON.stringify(answer.content) }));
`,
}

// testConnectSnippets runs the TypeScript lines that the console's "Connect a client" page and
// `tollgate connect` give for the AI SDK and LangChain (connect.AISDK, connect.LangChain) as
// they are written, each followed by one call on the model it sets up: a line that drifts from
// what the client takes (an option's name, the base URL's form, the key sent as x-api-key)
// fails here. Each must get an answer from the gateway on the route of its model, with the key
// as a bearer token only and nothing sent elsewhere.
func testConnectSnippets(t *testing.T, c clients, fx fixture) {
	rec := newRecorder(t, fx.gw.URL, fx.key)
	sb := sdkSandbox(t, c, fx, rec)
	target := connect.Target{BaseURL: rec.URL, Key: fx.key, ChatModel: "service-flint-base", MessagesModel: "service-sonnet"}
	dir := t.TempDir()
	// The snippets import the pinned packages by name, which node finds in a node_modules
	// beside the script.
	if err := os.Symlink(c.modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, setup := range []connect.Setup{connect.AISDK(target), connect.LangChain(target)} {
		for i, b := range setup.Blocks {
			if b.Lang != "typescript" {
				continue
			}
			script := filepath.Join(dir, setup.ID+"-"+string(rune('a'+i))+".mjs")
			writeFile(t, script, b.Text+snippetDrivers[setup.ID])
			var out struct {
				Text string `json:"text"`
			}
			if sdkOutput(t, run(t, rec, sb, c.node, script), &out) {
				nonEmpty(t, setup.Client+", "+b.Where, out.Text)
			}
			ran++
		}
	}
	if ran != 4 {
		t.Errorf("ran %d TypeScript lines, want 4 (the AI SDK's OpenAI and Anthropic providers, LangChain's ChatOpenAI and ChatAnthropic)", ran)
	}
	checkInference(t, rec, "/v1/responses", "service-flint-base")
	checkInference(t, rec, "/v1/chat/completions", "service-flint-base")
	checkInference(t, rec, "/v1/messages", "service-sonnet")
	checkBearerOnly(t, rec, fx.key)
	rec.checkEgress(t)
	if t.Failed() {
		t.Logf("the lines run:\n%s", strings.Join(scripts(dir), "\n"))
	}
}

// scripts are the texts of the .mjs files in dir, each under its name.
func scripts(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.mjs"))
	var out []string
	for _, n := range names {
		b, _ := os.ReadFile(n)
		out = append(out, "--- "+filepath.Base(n)+"\n"+string(b))
	}
	return out
}
