package sim

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The schemas of two of the gateway's MCP tools (openapi.yaml ListStorageDatasetsInput and
// QueryDataInput): both refuse {"q":"<word>"}.
const (
	listDatasetsSchema = `{"type":"object","description":"It takes no arguments.","additionalProperties":false,"properties":{}}`
	queryDataSchema    = `{"type":"object","required":["sql","dataset"],"additionalProperties":false,` +
		`"properties":{"sql":{"type":"string","minLength":1,"description":"One SELECT statement."},` +
		`"dataset":{"type":"string","minLength":1}}}`
)

// defaultArgs matches the default arguments of a tool call.
var defaultArgs = regexp.MustCompile(`^\{"q":"[a-z]+"\}$`)

// toolTurn is one tool call as a route answered it, without and with streaming.
type toolTurn struct {
	name, args string // the non-streamed call
	tokens     int    // its output tokens
	frags      []string
}

// callTool sends prompt with tools (in the route's spelling) and extra fields, and returns the
// tool call of the non-streamed answer and the argument fragments of the streamed one.
func callTool(t *testing.T, route, prompt string, tools []any, extra map[string]any) toolTurn {
	t.Helper()
	_, srv := newServer(t, Options{})
	fields := map[string]any{"tools": tools}
	for k, v := range extra {
		fields[k] = v
	}
	var body map[string]any
	switch route {
	case chatPath:
		body = chatBody(prompt, fields)
	case responsesPath:
		body = responsesBody(prompt, fields)
	default:
		body = messagesBody(prompt, fields)
	}
	m := decode(t, readAll(t, post(t, srv, route, body)))
	var tt toolTurn
	body["stream"] = true
	switch route {
	case chatPath:
		tt.name, _ = path(t, m, "choices.0.message.tool_calls.0.function.name").(string)
		tt.args, _ = path(t, m, "choices.0.message.tool_calls.0.function.arguments").(string)
		tt.tokens = num(t, path(t, m, "usage.completion_tokens"))
		_, evs := stream(t, srv, route, body)
		_, tt.frags = chatDeltas(t, evs)
	case responsesPath:
		tt.name, _ = path(t, m, "output.0.name").(string)
		tt.args, _ = path(t, m, "output.0.arguments").(string)
		tt.tokens = num(t, path(t, m, "usage.output_tokens"))
		_, evs := stream(t, srv, route, body)
		checkResponsesStream(t, evs)
		_, tt.frags = responsesDeltas(t, evs)
	default:
		tt.name, _ = path(t, m, "content.0.name").(string)
		input, _ := json.Marshal(path(t, m, "content.0.input"))
		tt.args = string(input)
		tt.tokens = num(t, path(t, m, "usage.output_tokens"))
		_, evs := stream(t, srv, route, body)
		_, tt.frags = messagesDeltas(t, evs)
	}
	return tt
}

// sameJSON reports whether two JSON texts hold the same value (a Messages tool_use input is
// an object, decoded and encoded again here with its keys sorted).
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && jsonEqualAny(x, y)
}

// routeTool spells a function tool as route does; a nil schema is left out.
func routeTool(route, name string, schema json.RawMessage) any {
	var params any
	if schema != nil {
		params = schema
	}
	switch route {
	case chatPath:
		f := map[string]any{"name": name}
		if params != nil {
			f["parameters"] = params
		}
		return map[string]any{"type": "function", "function": f}
	case responsesPath:
		tool := map[string]any{"type": "function", "name": name}
		if params != nil {
			tool["parameters"] = params
		}
		return tool
	default:
		tool := map[string]any{"name": name}
		if params != nil {
			tool["input_schema"] = params
		}
		return tool
	}
}

// TestTextTriggeredArguments: a call triggered by "call <tool>" gets arguments generated from
// the tool's schema when that declares properties, required or additionalProperties: false, on
// every route, streamed in as many fragments as output tokens; a tool without such a schema
// gets {"q":"<word>"} in three.
func TestTextTriggeredArguments(t *testing.T) {
	for _, c := range []struct {
		name    string
		schema  string // "" for none
		generic bool   // {"q":"<word>"}
	}{
		{"no schema", "", true},
		{"open object", `{"type":"object"}`, true},
		{"open object with a description", `{"type":"object","description":"Anything."}`, true},
		{"list_storage_datasets", listDatasetsSchema, false},
		{"query_data", queryDataSchema, false},
		{"closed only", `{"type":"object","additionalProperties":false}`, false},
		{"required only", `{"type":"object","required":["path"]}`, false},
		{"q of another type", `{"type":"object","properties":{"q":{"type":"integer","minimum":3}},"required":["q"]}`, false},
		{"properties", `{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]},"days":{"type":"integer"}}}`, false},
	} {
		for _, route := range []string{chatPath, responsesPath, messagesPath} {
			t.Run(c.name+route, func(t *testing.T) {
				var schema json.RawMessage
				if c.schema != "" {
					schema = json.RawMessage(c.schema)
				}
				tools := []any{routeTool(route, "get_time", nil), routeTool(route, "the_tool", schema)}
				tt := callTool(t, route, "Please call the_tool now.", tools, nil)
				if tt.name != "the_tool" {
					t.Fatalf("called %q", tt.name)
				}
				if !sameJSON(strings.Join(tt.frags, ""), tt.args) || len(tt.frags) != tt.tokens {
					t.Errorf("streamed %q, non-stream %s in %d tokens", tt.frags, tt.args, tt.tokens)
				}
				if c.generic {
					if !defaultArgs.MatchString(tt.args) || tt.tokens != toolFragments {
						t.Errorf("arguments %s in %d tokens, want {\"q\":\"<word>\"} in %d", tt.args, tt.tokens, toolFragments)
					}
					return
				}
				if defaultArgs.MatchString(tt.args) && !strings.Contains(c.schema, `"q"`) {
					t.Errorf("arguments %s: the default for a schema that describes them", tt.args)
				}
				validateJSON(t, compileSchema(t, c.schema), tt.args)
			})
		}
	}

	// The same request gets the same arguments; the schema of list_storage_datasets gets {}.
	a := callTool(t, chatPath, "call list_storage_datasets", []any{routeTool(chatPath, "list_storage_datasets", json.RawMessage(listDatasetsSchema))}, nil)
	b := callTool(t, chatPath, "call list_storage_datasets", []any{routeTool(chatPath, "list_storage_datasets", json.RawMessage(listDatasetsSchema))}, nil)
	if a.args != "{}" || b.args != a.args || a.tokens != 1 {
		t.Errorf("list_storage_datasets: %s (%d tokens), then %s", a.args, a.tokens, b.args)
	}
}

// codexTools are tools as Codex CLI offers them: a top-level function, the namespace tool of
// its MCP server "tollgate" and a hosted web search.
func codexTools() []any {
	return []any{
		map[string]any{"type": "function", "name": "shell", "parameters": json.RawMessage(`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"],"additionalProperties":false}`)},
		map[string]any{"type": "namespace", "name": "mcp__tollgate", "description": "Tools of the tollgate MCP server.", "tools": []any{
			map[string]any{"type": "function", "name": "list_storage_datasets", "description": "List datasets.", "parameters": json.RawMessage(listDatasetsSchema), "strict": false},
			map[string]any{"type": "function", "name": "query_data", "description": "Query a dataset.", "parameters": json.RawMessage(queryDataSchema), "strict": false},
			map[string]any{"type": "custom", "name": "notes", "description": "Free text."},
		}},
		map[string]any{"type": "web_search", "external_web_access": false},
	}
}

// TestResponsesNamespaceCalls: the functions of a namespace tool are called as
// "call <namespace>__<function>", "call <function>" or by tool_choice, and the function_call
// item carries name and namespace in the response and in every stream event that shows it.
func TestResponsesNamespaceCalls(t *testing.T) {
	_, srv := newServer(t, Options{})
	for _, c := range []struct {
		name      string
		prompt    string
		choice    any
		function  string
		namespace string // "" for a top-level function: no namespace key
	}{
		{"qualified name", "call mcp__tollgate__list_storage_datasets", nil, "list_storage_datasets", "mcp__tollgate"},
		{"function name", "Which data have I got? call query_data", nil, "query_data", "mcp__tollgate"},
		{"longest mention wins", "call shell or call mcp__tollgate__query_data", nil, "query_data", "mcp__tollgate"},
		{"top-level function", "call shell", nil, "shell", ""},
		{"forced without namespace", "hello", map[string]any{"type": "function", "name": "query_data"}, "query_data", "mcp__tollgate"},
		{"forced with namespace", "hello", map[string]any{"type": "function", "name": "list_storage_datasets", "namespace": "mcp__tollgate"}, "list_storage_datasets", "mcp__tollgate"},
		{"forced by qualified name", "hello", map[string]any{"type": "function", "name": "mcp__tollgate__query_data"}, "query_data", "mcp__tollgate"},
		{"required", "hello", "required", "shell", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := map[string]any{"tools": codexTools()}
			if c.choice != nil {
				extra["tool_choice"] = c.choice
			}
			body := responsesBody(c.prompt, extra)
			m := decode(t, readAll(t, post(t, srv, responsesPath, body)))
			item := path(t, m, "output.0").(map[string]any)
			want := []string{"id", "type", "status", "arguments", "call_id", "name"}
			if c.namespace != "" {
				want = append(want, "namespace")
			}
			keys(t, "function_call", item, want...)
			if item["type"] != "function_call" || item["name"] != c.function || (c.namespace != "" && item["namespace"] != c.namespace) {
				t.Fatalf("item %v", item)
			}
			args := item["arguments"].(string)
			schema := map[string]string{"list_storage_datasets": listDatasetsSchema, "query_data": queryDataSchema}[c.function]
			if schema != "" {
				validateJSON(t, compileSchema(t, schema), args)
			}
			tokens := num(t, path(t, m, "usage.output_tokens"))

			body["stream"] = true
			_, evs := stream(t, srv, responsesPath, body)
			_, final := checkResponsesStream(t, evs)
			_, frags := responsesDeltas(t, evs)
			if strings.Join(frags, "") != args || len(frags) != tokens {
				t.Errorf("streamed %q, non-stream %s in %d tokens", frags, args, tokens)
			}
			for _, ev := range evs {
				d := ev.JSON(t)
				var shown map[string]any
				switch ev.Name {
				case "response.output_item.added", "response.output_item.done":
					shown = d["item"].(map[string]any)
				case "response.function_call_arguments.done":
					shown = d
				case "response.completed":
					shown = path(t, final, "output.0").(map[string]any)
				default:
					continue
				}
				ns, has := shown["namespace"]
				if shown["name"] != c.function || has != (c.namespace != "") || (has && ns != c.namespace) {
					t.Errorf("%s: %s", ev.Name, ev.Data)
				}
			}
		})
	}

	// A custom tool of a namespace is not a function; the simulator does not call it.
	m := decode(t, readAll(t, post(t, srv, responsesPath, responsesBody("call notes", map[string]any{"tools": codexTools()}))))
	if path(t, m, "output.0.type") != "message" {
		t.Errorf("custom tool of a namespace: %v", m["output"])
	}
	// The loop ends once the call's output comes back, as Codex sends it.
	m = decode(t, readAll(t, post(t, srv, responsesPath, responsesBody([]any{
		map[string]any{"role": "user", "content": "call mcp__tollgate__list_storage_datasets"},
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "list_storage_datasets", "namespace": "mcp__tollgate", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "No datasets in storage."},
	}, map[string]any{"tools": codexTools()}))))
	if path(t, m, "output.0.type") != "message" {
		t.Errorf("after the tool output: %v", m["output"])
	}
}

// TestSDKResponsesNamespace: openai-go reads the namespace of a function call, streamed or not.
func TestSDKResponsesNamespace(t *testing.T) {
	_, client := openAIClient(t, 0)
	ctx := context.Background()
	var listSchema, querySchema map[string]any
	_ = json.Unmarshal([]byte(listDatasetsSchema), &listSchema)
	_ = json.Unmarshal([]byte(queryDataSchema), &querySchema)
	p := responses.ResponseNewParams{
		Model: "sim-reasoner",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("call mcp__tollgate__list_storage_datasets")},
		Tools: []responses.ToolUnionParam{{OfNamespace: &responses.NamespaceToolParam{
			Name: "mcp__tollgate", Description: "Tools of the tollgate MCP server.",
			Tools: []responses.NamespaceToolToolUnionParam{
				{OfFunction: &responses.NamespaceToolToolFunctionParam{Name: "list_storage_datasets", Parameters: listSchema}},
				{OfFunction: &responses.NamespaceToolToolFunctionParam{Name: "query_data", Parameters: querySchema}},
			},
		}}},
	}
	r, err := client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	fc := r.Output[0].AsFunctionCall()
	if r.Output[0].Type != "function_call" || fc.Name != "list_storage_datasets" || fc.Namespace != "mcp__tollgate" || fc.Arguments != "{}" ||
		r.Output[0].Namespace != "mcp__tollgate" {
		t.Errorf("function call %s", r.Output[0].RawJSON())
	}

	// Streamed, forced by name: the items of output_item.added and .done and the completed
	// response carry the namespace.
	p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("Top regions by sales?")}
	p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "query_data"}}
	stream := client.Responses.NewStreaming(ctx, p)
	var args string
	var added, done responses.ResponseFunctionToolCall
	var final *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.added":
			added = ev.AsResponseOutputItemAdded().Item.AsFunctionCall()
		case "response.function_call_arguments.delta":
			args += ev.AsResponseFunctionCallArgumentsDelta().Delta
		case "response.output_item.done":
			done = ev.AsResponseOutputItemDone().Item.AsFunctionCall()
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			final = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final == nil {
		t.Fatal("no response.completed")
	}
	fc = final.Output[0].AsFunctionCall()
	for what, call := range map[string]responses.ResponseFunctionToolCall{"added": added, "done": done, "completed": fc} {
		if call.Name != "query_data" || call.Namespace != "mcp__tollgate" {
			t.Errorf("%s: %s", what, call.RawJSON())
		}
	}
	if added.Arguments != "" || done.Arguments != args || fc.Arguments != args {
		t.Errorf("arguments: added %q, done %q, completed %q, streamed %q", added.Arguments, done.Arguments, fc.Arguments, args)
	}
	validateJSON(t, compileSchema(t, queryDataSchema), args)
}
