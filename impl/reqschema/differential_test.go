package reqschema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAgreesWithKin puts every body of the corpus to every operation with a body, of the
// gateway's document and of testdata/keywords.yaml, and asserts that this package and
// kin-openapi agree: on accepting it, and on a rejection's kind, field path, keyword and reason.
func TestAgreesWithKin(t *testing.T) {
	bodies := corpus(t)
	for _, s := range subjects(t) {
		if !s.op.HasBody() {
			continue
		}
		for _, body := range bodies {
			s.compare(t, nil, body)
		}
	}
}

// TestParametersAgreeWithKin varies the headers and the content type of requests.
func TestParametersAgreeWithKin(t *testing.T) {
	bodies := [][]byte{[]byte(`{}`), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), []byte(`[`)}
	for _, s := range subjects(t) {
		variants := []http.Header{s.header}
		// Without each header parameter, and with it present but without a value.
		for name := range s.header {
			if name == "Content-Type" {
				continue
			}
			without := s.header.Clone()
			without.Del(name)
			empty := s.header.Clone()
			empty[name] = []string{}
			blank := s.header.Clone()
			blank.Set(name, "")
			variants = append(variants, without, empty, blank)
		}
		for _, ct := range []string{
			"", "application/json; charset=utf-8", "APPLICATION/JSON", " application/json ", "application/json;",
			"Application/Json ; q=1", "text/plain", "application/xml", "application/vnd.api+json", "application/jsonx",
			"application/json, text/plain", "application/*", "*/*", "application", "applicatIon/jſon",
		} {
			h := s.header.Clone()
			h.Set("Content-Type", ct)
			variants = append(variants, h)
		}
		for _, h := range variants {
			for _, body := range bodies {
				s.compare(t, h, body)
			}
		}
		// An empty path parameter (ServeMux never matches one, but kin-openapi refuses it).
		for _, name := range s.params {
			r := s.request(nil, bodies[0])
			r.SetPathValue(name, "")
			want := s.kin(t, r, bodies[0])
			r = s.request(nil, bodies[0])
			r.SetPathValue(name, "")
			if got := s.ours(t, r, bodies[0]); got != want {
				t.Errorf("%s, empty path parameter %s:\n kin-openapi %+v\n reqschema   %+v", s.name, name, want, got)
			}
		}
	}
}

// FuzzAgreesWithKin compares this package and kin-openapi on arbitrary bodies, for every
// operation with a body. Its seeds are the corpus.
func FuzzAgreesWithKin(f *testing.F) {
	for _, body := range corpus(f) {
		if len(body) <= 4096 {
			f.Add(body)
		}
	}
	var withBody []subject
	for _, s := range subjects(f) {
		if s.op.HasBody() {
			withBody = append(withBody, s)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) == 0 {
			return // impl/httpapi refuses an empty body before validation
		}
		for _, s := range withBody {
			s.compare(t, nil, body)
		}
	})
}

// corpus is the bodies of the differential test: hand-written ones, the JSON-looking string
// literals of impl/httpapi's tests, and generated edge cases.
func corpus(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	for _, s := range handWritten {
		out = append(out, []byte(s))
	}
	out = append(out, httpapiTestBodies(t)...)
	return append(out, edgeCases()...)
}

// handWritten are valid and invalid bodies for the operations of both documents.
var handWritten = []string{
	// Chat completions.
	`{"model":"service-flint-base","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16,"temperature":0.2}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"n":1,"top_p":1,"max_completion_tokens":5}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":null,"stream_options":null,"max_tokens":null,"temperature":null,"top_p":null,"n":null,"tools":null,"tool_choice":null,"response_format":null,"stop":null}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":"no"}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":[]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":2.0000001}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":-0.0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":"0.5"}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"top_p":1.5,"temperature":3}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1.5}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1e2}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1.0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":-0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1E-2}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10E-1}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":true}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":0,"max_tokens":0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function"},{"function":{}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":1}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":{}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":null}}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":"json"}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b"],"tool_choice":"auto"}`,
	`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]},{"role":"tool","tool_call_id":"1","content":"x","name":"n"}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[1]}]}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`,
	`{"model":"m","messages":[{"role":"user","name":5}]}`,
	`{"model":"m","messages":[{"role":"user","tool_call_id":null}]}`,
	`{"model":"m","messages":[{"role":null}]}`,
	`{"model":"m","messages":[{"role":1}]}`,
	`{"model":"m","messages":[{"role":"user"},{"content":"no role"}]}`,
	`{"model":"m","messages":[{"role":"user"},{"role":"user"},{"role":2},{"content":"x"}]}`,
	`{"model":"m","messages":["hi"]}`,
	`{"model":"m","messages":[null]}`,
	`{"model":"m","messages":[]}`,
	`{"model":"m","messages":{}}`,
	`{"model":"m","messages":null}`,
	`{"model":"","messages":[{"role":"user"}]}`,
	`{"model":null,"messages":[{"role":"user"}]}`,
	`{"model":["m"],"messages":[{"role":"user"}]}`,
	`{"model":"m"}`,
	`{"messages":[{"role":"user"}]}`,
	`{"temperature":7,"max_tokens":"many"}`,
	`{"max_tokens":"many","temperature":7,"model":1}`,
	`{"zzz":1,"model":2,"messages":3,"max_tokens":4.5}`,
	// Responses.
	`{"model":"m","input":"hi"}`,
	`{"model":"m","input":[{"role":"user","content":"hi"}],"instructions":null,"max_output_tokens":1,"tools":[{"type":"web_search"}]}`,
	`{"model":"m","input":null}`,
	`{"model":"m","input":1e400}`,
	`{"model":"m","input":0,"max_output_tokens":0.5}`,
	`{"model":"m","input":"x","instructions":7}`,
	`{"model":"m","input":"x","tools":[{}]}`,
	`{"model":"m","input":"x","tool_choice":{"type":"function","name":"f"}}`,
	// Messages.
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"system":"s","temperature":1,"top_p":0,"top_k":0,"stop_sequences":["x"],"tools":null,"tool_choice":{"type":"auto"},"stream":false}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user"}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"content":"x"}]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":null}]}`,
	`{"model":"m","max_tokens":16,"messages":[]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"temperature":1.01}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"top_k":-1}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"top_k":0.5}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"stop_sequences":["a",1]}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"stop_sequences":null}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tool_choice":null}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":5}}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"system":null}`,
	`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tools":[1]}`,
	`{"model":"m","max_tokens":-1,"messages":"x"}`,
	// Agents and MCP.
	`{"slot":"slot-1","prompt":"hello"}`,
	`{"slot":"","prompt":"hello"}`,
	`{"slot":"s","prompt":null}`,
	`{"slot":"s","prompt":1}`,
	`{"text":"hello"}`,
	`{"text":""}`,
	`{"text":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
	`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"n"}}`,
	`{"jsonrpc":"1.0","method":"m"}`,
	`{"jsonrpc":2.0,"method":"m"}`,
	`{"jsonrpc":null,"method":"m"}`,
	`{"jsonrpc":["2.0"],"method":"m"}`,
	`{"jsonrpc":"2\u002e0","method":"m","params":[]}`,
	`{"jsonrpc":"2.0","method":"m","params":null}`,
	`{"jsonrpc":true,"id":null}`,
	`[{"jsonrpc":"2.0","method":"m"}]`,
	// keywords.yaml.
	`{"name":"ab","count":7,"ghost":null}`,
	`{"name":"ab","count":7,"ghost":1,"short":"abc"}`,
	`{"name":"ab","count":7,"ghost":1,"short":"abcd"}`,
	`{"name":"ab","count":7,"ghost":1,"short":"😀😀😀"}`,
	`{"name":"ab","count":7,"ghost":1,"short":"\ud83d\ude00\u0061bc"}`,
	`{"name":"ab","count":7,"ghost":1,"short":""}`,
	`{"name":"ab","count":7.0,"ghost":1,"ratio":null,"flag":false,"tags":["a","b","<&>","é"],"mode":null}`,
	`{"name":"ab","count":-3,"ghost":1,"ratio":0.5,"mode":"on","bounded":10,"choice":"y","free":null,"nothing":null}`,
	`{"name":"ab","count":-4,"ghost":1}`,
	`{"name":"ab","count":8,"ghost":1}`,
	`{"name":"ab","count":3,"ghost":1,"ratio":1.6}`,
	`{"name":"ab","count":3,"ghost":1,"ratio":"1"}`,
	`{"name":"ab","count":3,"ghost":1,"tags":[]}`,
	`{"name":"ab","count":3,"ghost":1,"tags":["c"]}`,
	`{"name":"ab","count":3,"ghost":1,"tags":["\u00e9","\u003c\u0026\u003e"]}`,
	`{"name":"ab","count":3,"ghost":1,"tags":["e\u0301"]}`,
	`{"name":"ab","count":3,"ghost":1,"tags":[null]}`,
	`{"name":"ab","count":3,"ghost":1,"tags":[1]}`,
	`{"name":"ab","count":3,"ghost":1,"mode":"ON"}`,
	`{"name":"ab","count":3,"ghost":1,"mode":1}`,
	`{"name":"ab","count":3,"ghost":1,"bounded":9.99}`,
	`{"name":"ab","count":3,"ghost":1,"bounded":"9"}`,
	`{"name":"ab","count":3,"ghost":1,"bounded":null}`,
	`{"name":"ab","count":3,"ghost":1,"bounded":[1]}`,
	`{"name":"ab","count":3,"ghost":1,"choice":"z"}`,
	`{"name":"ab","count":3,"ghost":1,"choice":null}`,
	`{"name":"ab","count":3,"ghost":1,"choice":1}`,
	`{"name":"ab","count":3,"ghost":1,"choice":{}}`,
	`{"name":"ab","count":3,"ghost":1,"choice":[]}`,
	`{"name":"ab","count":3,"ghost":1,"choice":true}`,
	`{"name":"ab","count":3,"ghost":1,"free":1e999}`,
	`{"name":"ab","count":3,"ghost":1,"nothing":1e999}`,
	`{"name":"ab","count":3,"ghost":1,"unknown":1e999}`,
	`{"name":"ab","count":3,"ghost":1,"object":{}}`,
	`{"name":"ab","count":3,"ghost":1,"object":{"id":"1"}}`,
	`{"name":"ab","count":3,"ghost":1,"object":null}`,
	`{"name":"ab","count":3,"ghost":1,"typeless":{}}`,
	`{"name":"ab","count":3,"ghost":1,"typeless":"not an object"}`,
	`{"name":"ab","count":3,"ghost":1,"typeless":{"k":1}}`,
	`{"name":"ab","count":3,"ghost":1,"typeless":null}`,
	`{"name":"ab","count":3,"ghost":1,"emptyish":null}`,
	`{"name":"ab","count":3,"ghost":1,"emptyish":{"inner":null}}`,
	`{"name":"ab","count":3,"ghost":1,"arrayish":[1,2.5]}`,
	`{"name":"ab","count":3,"ghost":1,"arrayish":{"x":1.5}}`,
	`{"name":"ab","count":3,"ghost":1,"a/b~c":"x"}`,
	`{"name":"ab","count":3,"ghost":1,"0":"xy"}`,
	`{"name":"ab","count":3,"ghost":1,"ünï":"x"}`,
	`{"name":"ab","count":3,"ghost":1,"\u00fcn\u00ef":"x"}`,
	`{"name":"ab","count":3,"ghost":1,"":"x"}`,
	`{"name":"ab","count":3,"ghost":1,"child":{"name":"cd","count":1,"ghost":1,"child":{"name":"e","count":1,"ghost":1}}}`,
	`{"name":"ab","count":3,"ghost":1,"children":[{"name":"cd","count":1,"ghost":1},{"name":"cd","count":1}]}`,
	`{"name":"ab","count":3,"ghost":1,"children":[{"name":"cd","count":1,"ghost":1,"children":[{"count":"x"}]}]}`,
	`{"count":3.5,"name":"a","tags":[]}`,
	`{"tags":["c"],"ratio":2,"name":1,"count":"1","mode":"x"}`,
	`{"child":{},"children":[{}],"object":{}}`,
	`{"z":{},"y":[],"x":null}`,
	`[{"name":"ab","count":7,"ghost":null},{"name":"ab","count":7,"ghost":null}]`,
	`[{"name":"ab","count":7,"ghost":null}]`,
	`[{"name":"ab","count":7,"ghost":null},{"name":"ab","count":7}]`,
	`[{"name":"ab","count":7},{"name":"ab","count":7,"ghost":null}]`,
	`[{"name":"ab","count":7}]`,
	`[]`, `{}`, `null`, `true`, `false`, `0`, `-0`, `1.5`, `2`, `-1.5`, `-1.51`, `1e300`, `1.1e300`, `1e400`, `"x"`, `""`,
	// Numbers, strings and duplicated names in more places.
	`{"name":"a\u0062","count":1e0,"ghost":0}`,
	`{"name":"\ud83d\ude00","count":1,"ghost":0}`,
	`{"name":"😀","count":1,"ghost":0}`,
	`{"name":"\ud83d","count":1,"ghost":0}`,
	`{"name":"\ud83d\u0041","count":1,"ghost":0}`,
	`{"name":"\ude00\ud83d","count":1,"ghost":0}`,
	`{"name":"\ud83dx","count":1,"ghost":0}`,
	`{"name":"é","count":1,"ghost":0}`,
	`{"name":"\n","count":1,"ghost":0}`,
	`{"name":"\\\"","count":1,"ghost":0}`,
	`{"name":"ab","count":70e-1,"ghost":0}`,
	`{"name":"ab","count":0.7e1,"ghost":0}`,
	`{"name":"ab","count":-3.0000000000000001,"ghost":0}`,
	`{"name":"ab","count":-3.000000000000001,"ghost":0}`,
	`{"name":"ab","count":1e-400,"ghost":0}`,
	`{"name":"ab","count":-1e400,"ghost":0}`,
	`{"name":"ab","count":12345678901234567890,"ghost":0}`,
	`{"name":"ab","count":1234567890123456,"ghost":0}`,
	`{"name":"ab","count":-123456789012345,"ghost":0}`,
	`{"name":1,"name":"ab","count":1,"ghost":0}`,
	`{"name":"ab","name":1,"count":1,"ghost":0}`,
	`{"name":"ab","count":"x","count":1,"ghost":0}`,
	`{"name":"ab","count":1,"count":"x","ghost":0}`,
	`{"nam\u0065":"ab","c\u006Funt":1,"gh\u006fst":0}`,
	`{"model":1,"model":"m","messages":[{"role":"user"}]}`,
	`{"model":"m","model":1,"messages":[{"role":"user"}]}`,
	`{"mod\u0065l":"m","m\u0065ssages":[{"r\u006fle":"user"}]}`,
	`{"model\u0000":"m","messages":[{"role":"user"}]}`,
	`{"model":"m","messages":[{"role":"user"}],"messages":[{}]}`,
	`{"model":"m","messages":[{}],"messages":[{"role":"user"}]}`,
	// Syntax.
	` {"model":"m","messages":[{"role":"user"}]} `,
	"\t\r\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}\n",
	`{"model":"m","messages":[{"role":"user"}]} x`,
	`{"model":"m","messages":[{"role":"user"}]}}`,
	`{"model":"m","messages":[{"role":"user"}]} {}`,
	`{"model":"m","messages":[{"role":"user"}]}]`,
	`{"model":"m","messages":[{"role":"user"}],}`,
	`{"model":"m","messages":[{"role":"user"},]}`,
	`{"model":"m","messages":[{"role":"user"}]`,
	`{"model":"m","messages":[{"role":"user"}}`,
	`{"model" "m"}`, `{"model":}`, `{:1}`, `{,}`, `{"a":1 "b":2}`, `{"a"}`, `{"a":1,,"b":2}`, `{1:2}`,
	`{"stream":tru}`, `{"stream":nul}`, `{"stream":falsey}`, `{"stream":True}`, `{"a":01}`, `{"a":-}`,
	`{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`, `{"a":0x10}`, `{"a":NaN}`, `{"a":Infinity}`,
	`{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\q"}`, `{"a":"\'"}`, `{"a":"x`, `{"a":"\`, `{"a":[1 2]}`, `{"a":[}`,
	`{"a":[1,]}`, `[1,]`, `[,1]`, `[`, `]`, `{`, `}`, `"`, `-`, `nul`, `tru`, `x`, `{}{}`, `[][]`, `1 2`,
	"\ufeff{}", "{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}", "{\"model\":\"m\x00\"}", "{\"a\":1}\x00",
	"{\"model\":\"\xff\",\"messages\":[{\"role\":\"\xc3\",\"content\":\"\xe2\x82\"}]}",
	"{\"name\":\"\xff\",\"count\":1,\"ghost\":0}",
	"{\"name\":\"\xff\xfe\",\"count\":1,\"ghost\":0}",
	"{\"name\":\"\xed\xa0\x80\",\"count\":1,\"ghost\":0}",
	"{\"nam\xff\":\"\",\"count\":1,\"ghost\":0}",
	"{\"tags\":[\"\xc3\xa9\"],\"mode\":\"o\xffn\",\"name\":\"ab\",\"count\":1,\"ghost\":0}",
}

// edgeCases are generated bodies: nesting in a field the schema does not describe and in
// recursive validation, long strings, long numbers. (Nesting at encoding/json's depth limit is
// tested against encoding/json in TestDepthLimit: kin-openapi takes seconds on such a body.)
func edgeCases() [][]byte {
	chat := func(content string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":` + content + `}]}`)
	}
	var out [][]byte
	const deep = 500
	out = append(out,
		chat(strings.Repeat("[", deep)+strings.Repeat("]", deep)),
		chat(strings.Repeat(`{"a":`, deep)+"1"+strings.Repeat("}", deep)),
		chat(strings.Repeat("[", deep)+strings.Repeat("]", deep-1)+"}"),
		[]byte(strings.Repeat("[", deep)),
	)
	// Recursive validation through Thing.child, failing at the bottom or not.
	for _, bottom := range []string{`{"name":"x"}`, `{"name":"xy","count":1,"ghost":0}`, `{"name":"xy","count":1,"ghost":0,"children":[{},{"count":1.5}]}`} {
		thing := strings.Repeat(`{"name":"ab","count":1,"ghost":0,"child":`, deep) + bottom + strings.Repeat("}", deep)
		out = append(out, []byte(thing))
	}
	// Long strings and numbers.
	long := strings.Repeat("é a\\n\\u00e9", 20_000)
	out = append(out, chat(`"`+long+`"`), []byte(`{"model":"`+long+`","messages":[{"role":"user"}]}`))
	digits := strings.Repeat("9", 400)
	for _, number := range []string{digits, "-" + digits, "0." + digits, digits + ".5", "1" + strings.Repeat("0", 308), "1" + strings.Repeat("0", 309)} {
		out = append(out, chat(number))
		out = append(out, []byte(`{"model":"m","messages":[{"role":"user"}],"max_tokens":`+number+`}`))
		out = append(out, []byte(`{"model":"m","messages":[{"role":"user"}],"unknown":`+number+`}`))
		out = append(out, []byte(`{"name":"ab","count":1,"ghost":0,"bounded":`+number+`}`))
	}
	return out
}

// httpapiTestBodies are the string literals of impl/httpapi's tests that look like JSON bodies
// (some are format strings: they are bodies for this test all the same).
func httpapiTestBodies(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("../httpapi/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no impl/httpapi tests found: %v", err)
	}
	var out [][]byte
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if trimmed := strings.TrimSpace(s); err == nil && (strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")) {
				out = append(out, []byte(s))
			}
			return true
		})
	}
	if len(out) < 20 {
		t.Fatalf("only %d bodies found in impl/httpapi's tests", len(out))
	}
	return out
}
