package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// The agent's question, its scripted calls and what the tools answer.
const (
	scriptQuery = `{"dataset": "sales", "sql": "select region, sum(amount) from orders group by region"}`
	rowsResult  = `{"columns":["region","sum"],"rows":[["north",1200],["south",800]],"truncated":false}`
	listResult  = `{"datasets":[{"name":"sales","tables":["orders"]}]}`
)

// scriptPrompt asks a question about a dataset and scripts the two calls that answer it.
var scriptPrompt = "Which region sold most? " + Script(
	ScriptStep{Tool: "list_datasets"},
	ScriptStep{Tool: "query_data", Args: scriptQuery},
)

// reply is one model turn as a route answered it.
type reply struct {
	tool, args string // the call, when the turn is one
	text       string
	finish     string // finish_reason, status or stop_reason
	output     int    // output tokens
	input      int    // input tokens
	frags      int    // content events of a streamed turn (0 when not streamed)
}

// agentWire speaks one route for a small agent loop: it keeps the conversation in the route's
// spelling, sends it and reads the reply, streamed or not.
type agentWire struct {
	name, path string
	// start is the conversation's first messages (items) for prompt.
	start func(prompt string) []any
	// tools spells the function tools for the route.
	tools func(names ...string) []any
	// call and result are the messages (items) of a tool call and its result.
	call   func(id, name, args string) []any
	result func(id, text string) []any
	// body builds the request.
	body func(conv, tools []any, stream bool) map[string]any
	// read reads a non-streamed reply; readStream a streamed one.
	read       func(t *testing.T, m map[string]any) reply
	readStream func(t *testing.T, evs []event) reply
	// finishCall and finishText are the finish reasons of a call and of an answer.
	finishCall, finishText string
}

var agentWires = []agentWire{
	{
		name: "chat", path: chatPath,
		start: func(p string) []any {
			return []any{map[string]any{"role": "system", "content": "You answer questions about data."}, map[string]any{"role": "user", "content": p}}
		},
		tools: func(names ...string) []any { return funcTools(chatPath, names) },
		call: func(id, name, args string) []any {
			return []any{map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}}}
		},
		result: func(id, text string) []any {
			return []any{map[string]any{"role": "tool", "tool_call_id": id, "content": text}}
		},
		body: func(conv, tools []any, s bool) map[string]any {
			b := map[string]any{"model": "sim-general", "messages": conv, "tools": tools, "stream": s}
			if s {
				b["stream_options"] = map[string]any{"include_usage": true}
			}
			return b
		},
		read: func(t *testing.T, m map[string]any) reply {
			msg := path(t, m, "choices.0.message").(map[string]any)
			r := reply{finish: path(t, m, "choices.0.finish_reason").(string),
				output: num(t, path(t, m, "usage.completion_tokens")), input: num(t, path(t, m, "usage.prompt_tokens"))}
			if calls, ok := msg["tool_calls"].([]any); ok {
				r.tool = path(t, calls[0], "function.name").(string)
				r.args = path(t, calls[0], "function.arguments").(string)
			} else {
				r.text = msg["content"].(string)
			}
			return r
		},
		readStream: func(t *testing.T, evs []event) reply {
			text, finish, usage := chatChunks(t, evs, true)
			content, args := chatDeltas(t, evs)
			r := reply{text: text, finish: finish, args: strings.Join(args, ""),
				output: num(t, usage["completion_tokens"]), input: num(t, usage["prompt_tokens"]), frags: len(content) + len(args)}
			if calls, ok := path(t, evs[0].JSON(t), "choices.0.delta").(map[string]any)["tool_calls"].([]any); ok {
				r.tool = path(t, calls[0], "function.name").(string)
			}
			return r
		},
		finishCall: "tool_calls", finishText: "stop",
	},
	{
		name: "responses", path: responsesPath,
		start: func(p string) []any { return []any{map[string]any{"role": "user", "content": p}} },
		tools: func(names ...string) []any { return funcTools(responsesPath, names) },
		call: func(id, name, args string) []any {
			return []any{map[string]any{"type": "function_call", "call_id": id, "name": name, "arguments": args}}
		},
		result: func(id, text string) []any {
			return []any{map[string]any{"type": "function_call_output", "call_id": id, "output": text}}
		},
		body: func(conv, tools []any, s bool) map[string]any {
			return map[string]any{"model": "sim-reasoner", "input": conv, "tools": tools, "stream": s, "instructions": "You answer questions about data."}
		},
		read: readResponse,
		readStream: func(t *testing.T, evs []event) reply {
			_, final := checkResponsesStream(t, evs)
			r := readResponse(t, final)
			text, args := responsesDeltas(t, evs)
			if strings.Join(text, "")+strings.Join(args, "") != r.text+r.args {
				t.Errorf("deltas %q %q, response %q %q", text, args, r.text, r.args)
			}
			r.frags = len(text) + len(args)
			return r
		},
		finishCall: "completed", finishText: "completed",
	},
	{
		name: "messages", path: messagesPath,
		start: func(p string) []any { return []any{map[string]any{"role": "user", "content": p}} },
		tools: func(names ...string) []any { return funcTools(messagesPath, names) },
		call: func(id, name, args string) []any {
			return []any{map[string]any{"role": "assistant", "content": []any{map[string]any{
				"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(args)}}}}
		},
		result: func(id, text string) []any {
			return []any{map[string]any{"role": "user", "content": []any{map[string]any{
				"type": "tool_result", "tool_use_id": id, "content": []any{map[string]any{"type": "text", "text": text}}}}}}
		},
		body: func(conv, tools []any, s bool) map[string]any {
			return map[string]any{"model": "sim-sonnet", "max_tokens": 1024, "system": "You answer questions about data.",
				"messages": conv, "tools": tools, "stream": s}
		},
		read: func(t *testing.T, m map[string]any) reply {
			r := reply{finish: m["stop_reason"].(string), output: num(t, path(t, m, "usage.output_tokens")), input: num(t, path(t, m, "usage.input_tokens"))}
			block := path(t, m, "content.0").(map[string]any)
			if block["type"] == "tool_use" {
				r.tool = block["name"].(string)
				input, _ := json.Marshal(block["input"])
				r.args = string(input)
			} else {
				r.text = block["text"].(string)
			}
			return r
		},
		readStream: func(t *testing.T, evs []event) reply {
			_, text, partial, delta := checkMessagesStream(t, evs)
			texts, partials := messagesDeltas(t, evs)
			r := reply{text: text, args: partial, finish: path(t, delta, "delta.stop_reason").(string),
				output: num(t, path(t, delta, "usage.output_tokens")), input: num(t, path(t, evs[0].JSON(t), "message.usage.input_tokens")),
				frags: len(texts) + len(partials)}
			if block := path(t, evs[1].JSON(t), "content_block").(map[string]any); block["type"] == "tool_use" {
				r.tool = block["name"].(string)
			}
			return r
		},
		finishCall: "tool_use", finishText: "end_turn",
	},
}

// readResponse reads a Responses response object.
func readResponse(t *testing.T, m map[string]any) reply {
	item := path(t, m, "output.0").(map[string]any)
	r := reply{finish: m["status"].(string), output: num(t, path(t, m, "usage.output_tokens")), input: num(t, path(t, m, "usage.input_tokens"))}
	if item["type"] == "function_call" {
		r.tool, r.args = item["name"].(string), item["arguments"].(string)
	} else {
		r.text = path(t, item, "content.0.text").(string)
	}
	return r
}

// funcTools spells the named tools for route, query_data with its schema.
func funcTools(route string, names []string) []any {
	out := []any{}
	for _, n := range names {
		schema := json.RawMessage(listDatasetsSchema)
		if n == "query_data" {
			schema = json.RawMessage(queryDataSchema)
		}
		out = append(out, routeTool(route, n, schema))
	}
	return out
}

// turnOf sends the conversation and reads the reply.
func (w agentWire) turnOf(t *testing.T, srv *httptest.Server, conv, tools []any, streamed bool) reply {
	t.Helper()
	body := w.body(conv, tools, streamed)
	if !streamed {
		resp := post(t, srv, w.path, body)
		b := readAll(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return w.read(t, decode(t, b))
	}
	_, evs := stream(t, srv, w.path, body)
	return w.readStream(t, evs)
}

// runAgent plays an agent loop: it sends the conversation, runs each call with results (by tool
// name) and sends the result back, until the model answers text (at most 10 turns).
func (w agentWire) runAgent(t *testing.T, srv *httptest.Server, prompt string, tools []any, results map[string]string, streamed bool) []reply {
	t.Helper()
	conv := w.start(prompt)
	var turns []reply
	for i := range 10 {
		r := w.turnOf(t, srv, conv, tools, streamed)
		turns = append(turns, r)
		if r.tool == "" {
			return turns
		}
		id := fmt.Sprintf("call_%d", i)
		conv = append(conv, w.call(id, r.tool, r.args)...)
		conv = append(conv, w.result(id, results[r.tool])...)
	}
	t.Fatalf("no answer after 10 turns: %+v", turns)
	return nil
}

// TestScriptAgentLoop: a script plays an agent's model on every route, streamed and not: one
// scripted call per turn with exactly the scripted arguments (not those the query_data schema
// would generate), then an answer quoting the last tool result; output tokens count the
// argument scalars and the answer's words, and a stream carries one content event per token.
func TestScriptAgentLoop(t *testing.T) {
	_, srv := newServer(t, Options{})
	results := map[string]string{"list_datasets": listResult, "query_data": rowsResult}
	for _, w := range agentWires {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", w.name, streamed), func(t *testing.T) {
				turns := w.runAgent(t, srv, scriptPrompt, w.tools("list_datasets", "query_data"), results, streamed)
				if len(turns) != 3 {
					t.Fatalf("%d turns: %+v", len(turns), turns)
				}
				wantArgs := []string{"{}", scriptQuery}
				wantTokens := []int{1, 4} // {} is one token; the query's two keys and two values are four
				for i, r := range turns[:2] {
					args := r.args
					if w.name == "messages" && !streamed {
						// The tool_use input is an object in the body; compare its value.
						if !sameJSON(args, wantArgs[i]) {
							t.Errorf("turn %d: input %s, want %s", i, args, wantArgs[i])
						}
						args = wantArgs[i]
					}
					if r.tool != []string{"list_datasets", "query_data"}[i] || args != wantArgs[i] || r.finish != w.finishCall || r.output != wantTokens[i] {
						t.Errorf("turn %d: %+v, want a call with %s in %d tokens", i, r, wantArgs[i], wantTokens[i])
					}
					if streamed && r.frags != r.output {
						t.Errorf("turn %d: %d content events for %d output tokens", i, r.frags, r.output)
					}
				}
				answer := turns[2]
				want := ScriptAnswer("query_data", rowsResult)
				if answer.tool != "" || answer.text != want || !strings.Contains(answer.text, rowsResult) || answer.finish != w.finishText {
					t.Errorf("answer %+v, want %q", answer, want)
				}
				if answer.output != words(want) || (streamed && answer.frags != answer.output) {
					t.Errorf("answer: %d output tokens, %d events; want %d", answer.output, answer.frags, words(want))
				}
				if !(turns[0].input < turns[1].input && turns[1].input < turns[2].input) {
					t.Errorf("input tokens do not grow with the conversation: %d %d %d", turns[0].input, turns[1].input, turns[2].input)
				}
			})
		}
	}
}

// TestScriptSameTokensStreamedOrNot: a scripted turn counts the same input and output tokens
// whether it streams or not, on every route.
func TestScriptSameTokensStreamedOrNot(t *testing.T) {
	_, srv := newServer(t, Options{})
	results := map[string]string{"list_datasets": listResult, "query_data": rowsResult}
	for _, w := range agentWires {
		plain := w.runAgent(t, srv, scriptPrompt, w.tools("list_datasets", "query_data"), results, false)
		streamed := w.runAgent(t, srv, scriptPrompt, w.tools("list_datasets", "query_data"), results, true)
		for i := range plain {
			if plain[i].input != streamed[i].input || plain[i].output != streamed[i].output {
				t.Errorf("%s turn %d: %d+%d tokens, streamed %d+%d", w.name, i, plain[i].input, plain[i].output, streamed[i].input, streamed[i].output)
			}
		}
	}
}

// TestScriptToolNotOffered: a scripted call to a tool the request does not offer (or with
// tool_choice "none", or without tools at all) is answered with text saying so, so that an
// agent loop ends.
func TestScriptToolNotOffered(t *testing.T) {
	_, srv := newServer(t, Options{})
	prompt := "Go. " + Script(ScriptStep{Tool: "query_data", Args: scriptQuery})
	for _, w := range agentWires {
		for _, c := range []struct {
			name  string
			tools []any
			none  bool
			want  string
		}{
			{"other tools", w.tools("list_datasets"), false, "Script step 1 calls query_data, which this request does not offer."},
			{"no tools", nil, false, "Script step 1 calls query_data, which this request does not offer."},
			{"tool_choice none", w.tools("query_data"), true, `Script step 1 calls query_data, which tool_choice "none" forbids.`},
		} {
			for _, streamed := range []bool{false, true} {
				body := w.body(w.start(prompt), c.tools, streamed)
				if c.tools == nil {
					delete(body, "tools")
				}
				if c.none {
					body["tool_choice"] = "none"
					if w.name == "messages" {
						body["tool_choice"] = map[string]any{"type": "none"}
					}
				}
				var r reply
				if streamed {
					_, evs := stream(t, srv, w.path, body)
					r = w.readStream(t, evs)
				} else {
					r = w.read(t, decode(t, readAll(t, post(t, srv, w.path, body))))
				}
				if r.tool != "" || r.text != c.want || r.finish != w.finishText || r.output != words(c.want) {
					t.Errorf("%s %s stream=%v: %+v, want %q", w.name, c.name, streamed, r, c.want)
				}
			}
		}
	}
}

// TestScriptParseErrors: a malformed script is answered 400 in the route's envelope, naming the
// directive and what is wrong with it.
func TestScriptParseErrors(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct{ directive, why string }{
		{`[[sim script: ]]`, "it scripts no call"},
		{`[[sim script: run query_data]]`, `step 1 does not start with "call <tool>"`},
		{`[[sim script: call ]]`, "step 1 names no tool"},
		{`[[sim script: call query_data {"sql": ]]`, "the arguments of step 1 (query_data) are not a JSON object"},
		{`[[sim script: call query_data ["x"]]]`, `step 1 (query_data) is followed by neither a JSON object, ";" nor "]]"`},
		{`[[sim script: call list_datasets call query_data]]`, `step 1 (list_datasets) is followed by neither a JSON object, ";" nor "]]"`},
		{`[[sim script: call query_data {"sql":"x"} call list_datasets]]`, `step 1 (query_data) is followed by neither ";" nor "]]"`},
		{`[[sim script: call list_datasets; call query_data {}`, "it has no closing ]]"},
		{`[[sim script: call a]] [[sim script: call b]]`, "a message holds at most one script"},
	} {
		for _, w := range agentWires {
			resp := post(t, srv, w.path, w.body(w.start("x "+c.directive), w.tools("list_datasets", "query_data"), false))
			m := decode(t, readAll(t, resp))
			msg, _ := path(t, m, "error.message").(string)
			if resp.StatusCode != http.StatusBadRequest || path(t, m, "error.type") != "invalid_request_error" ||
				!strings.Contains(msg, "Invalid sim script directive") || !strings.Contains(msg, c.why) {
				t.Errorf("%s %s: %d %v", w.name, c.directive, resp.StatusCode, m)
			}
			first, _, _ := strings.Cut(c.directive, "]]")
			if !strings.Contains(msg, strings.ReplaceAll(first, `"`, `\"`)) {
				t.Errorf("%s: message %q does not name the directive %q", w.name, msg, first)
			}
		}
	}
}

// TestScriptGrammar: blanks around the parts are free, arguments are optional ({}), a trailing
// ";" is allowed, JSON holding "]]" or "words=" is read as JSON, and namespaced Responses
// functions are called by their qualified name.
func TestScriptGrammar(t *testing.T) {
	_, srv := newServer(t, Options{})
	args := `{"sql":"select a[[1]] from t where x = 'words=3'","dataset":"d"}`
	prompt := "q [[sim \n script:call   query_data\n" + args + " ;\n]] and more"
	for _, w := range agentWires {
		r := w.turnOf(t, srv, w.start(prompt), w.tools("query_data"), true)
		if r.tool != "query_data" || r.args != args {
			t.Errorf("%s: %+v", w.name, r)
		}
	}
	// Codex's spelling of an MCP tool: the call carries the function and its namespace.
	tools := []any{map[string]any{"type": "namespace", "name": "mcp__tollgate", "tools": []any{
		map[string]any{"type": "function", "name": "query_data", "parameters": json.RawMessage(queryDataSchema)}}}}
	m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody("q "+Script(ScriptStep{Tool: "mcp__tollgate__query_data", Args: args}),
		map[string]any{"tools": tools}))))
	if path(t, m, "output.0.name") != "query_data" || path(t, m, "output.0.namespace") != "mcp__tollgate" || path(t, m, "output.0.arguments") != args {
		t.Errorf("namespaced call %v", path(t, m, "output.0"))
	}
}

// TestScriptQuoteAndMaxTokens: the answer quotes the first 400 characters of a long result
// (code points, not bytes), keeps its blanks as they are, and is cut by max tokens with the
// route's finish reason.
func TestScriptQuoteAndMaxTokens(t *testing.T) {
	_, srv := newServer(t, Options{})
	long := strings.Repeat("ünïcode  row\n", 60)
	prompt := "q " + Script(ScriptStep{Tool: "query_data", Args: `{"sql":"select 1","dataset":"d"}`})
	for _, w := range agentWires {
		conv := append(w.start(prompt), w.call("c1", "query_data", `{"sql":"select 1","dataset":"d"}`)...)
		conv = append(conv, w.result("c1", long)...)
		r := w.turnOf(t, srv, conv, w.tools("query_data"), false)
		quoted := strings.TrimPrefix(r.text, "Answer from query_data: ")
		if utf8.RuneCountInString(quoted) != ScriptQuoteRunes || !strings.HasPrefix(long, quoted) || r.output != words(r.text) {
			t.Errorf("%s: %d characters quoted, %d tokens: %q", w.name, utf8.RuneCountInString(quoted), r.output, r.text)
		}
		body := w.body(conv, w.tools("query_data"), false)
		limit := map[string]string{"chat": "max_completion_tokens", "responses": "max_output_tokens", "messages": "max_tokens"}[w.name]
		body[limit] = 16
		m := decode(t, readAll(t, post(t, srv, w.path, body)))
		cut := w.read(t, m)
		want := map[string]string{"chat": "length", "responses": "incomplete", "messages": "max_tokens"}[w.name]
		if cut.output != 16 || words(cut.text) != 16 || !strings.HasPrefix(r.text, cut.text) || cut.finish != want {
			t.Errorf("%s cut: %+v", w.name, cut)
		}
	}
}

// TestScriptProgress: the step is the number of tool results after the message that holds the
// script, even when a later user message without a script joined the conversation; a later
// message with a script starts that script.
func TestScriptProgress(t *testing.T) {
	_, srv := newServer(t, Options{})
	tools := func(w agentWire) []any { return w.tools("list_datasets", "query_data") }
	for _, w := range agentWires {
		conv := append(w.start(scriptPrompt), w.call("c1", "list_datasets", "{}")...)
		conv = append(conv, w.result("c1", listResult)...)
		late := w.start("Also, be quick.")
		conv = append(conv, late[len(late)-1])
		if r := w.turnOf(t, srv, conv, tools(w), false); r.tool != "query_data" {
			t.Errorf("%s: after a joined message %+v, want the second call", w.name, r)
		}
		next := w.start("And now? " + Script(ScriptStep{Tool: "list_datasets"}))
		conv = append(conv, next[len(next)-1])
		if r := w.turnOf(t, srv, conv, tools(w), false); r.tool != "list_datasets" {
			t.Errorf("%s: a new script %+v, want its first call", w.name, r)
		}
	}
}

// TestScriptWithOtherDirectives: a script leaves the other directives of its message working
// (a fault with times= strikes first, then the script plays), and the "call <tool>" trigger
// still works in a message without a script.
func TestScriptWithOtherDirectives(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, w := range agentWires {
		prompt := scriptPrompt + " [[sim fault=429 times=1 tag=" + w.name + "]]"
		body := w.body(w.start(prompt), w.tools("list_datasets", "query_data"), false)
		resp := post(t, srv, w.path, body)
		readAll(t, resp)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d, want the directed 429", w.name, resp.StatusCode)
		}
		if r := w.read(t, decode(t, readAll(t, post(t, srv, w.path, body)))); r.tool != "list_datasets" || r.args != "{}" {
			t.Errorf("%s: after the fault %+v", w.name, r)
		}
		r := w.turnOf(t, srv, w.start("please call query_data"), w.tools("list_datasets", "query_data"), false)
		if r.tool != "query_data" || !json.Valid([]byte(r.args)) || r.args == scriptQuery {
			t.Errorf("%s: text trigger %+v", w.name, r)
		}
	}
}
