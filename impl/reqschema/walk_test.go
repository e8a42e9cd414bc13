package reqschema

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/api"
)

// operation compiles the named operation ("METHOD path") of the embedded document or, with a
// "keywords.yaml: " prefix, of testdata/keywords.yaml.
func operation(t testing.TB, name string) *Operation {
	t.Helper()
	for _, s := range subjects(t) {
		if s.name == name || s.name == "embedded: "+name {
			return s.op
		}
	}
	t.Fatalf("no operation %s", name)
	return nil
}

// bodyError validates body and returns the *Error, or nil.
func bodyError(t testing.TB, op *Operation, body string) *Error {
	t.Helper()
	err := op.ValidateBody("application/json", []byte(body))
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T is not an *Error", err)
	}
	return e
}

// TestDepthLimit: nesting is limited as encoding/json limits it (10000 arrays and objects
// deep), wherever it is: in a value the schema does not describe, at the root, and in recursive
// validation. Going past the limit is a syntax error, not a stack overflow.
func TestDepthLimit(t *testing.T) {
	chat := operation(t, "POST /v1/chat/completions")
	thing := operation(t, "keywords.yaml: POST /things/{id}")
	anything := operation(t, "keywords.yaml: POST /anything")
	// The content array opens at depth 4 (object, messages, message, content).
	for _, n := range []int{9996, 9997, 9998, 100_000} {
		for _, content := range []string{
			strings.Repeat("[", n) + strings.Repeat("]", n),
			strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n),
		} {
			body := `{"model":"m","messages":[{"role":"user","content":` + content + `}]}`
			checkSyntax(t, chat, body)
		}
	}
	for _, n := range []int{9999, 10000, 10001, 100_000} {
		checkSyntax(t, anything, strings.Repeat("[", n)+strings.Repeat("]", n))
		checkSyntax(t, anything, strings.Repeat("[", n))
		// Thing.child recursion, with a failure at the bottom.
		checkSyntax(t, thing, strings.Repeat(`{"name":"ab","count":1,"ghost":0,"child":`, n-1)+`{"name":"x"}`+strings.Repeat("}", n-1))
	}
	// At the deepest allowed level the failure is reported with its whole path.
	e := bodyError(t, thing, strings.Repeat(`{"name":"ab","count":1,"ghost":0,"child":`, 9999)+`{"name":"x"}`+strings.Repeat("}", 9999))
	want := append(slices.Repeat([]string{"child"}, 9999), "name")
	if e == nil || e.Kind != BodySchema || !slices.Equal(e.Pointer, want) || e.Keyword != "minLength" {
		t.Errorf("deep failure: got %+v", e)
	}
}

// checkSyntax asserts that op finds body invalid JSON exactly when encoding/json does.
func checkSyntax(t *testing.T, op *Operation, body string) {
	t.Helper()
	e := bodyError(t, op, body)
	if invalid := e != nil && e.Kind == BodySyntax; invalid == json.Valid([]byte(body)) {
		t.Errorf("%s (%d bytes): syntax error %v, encoding/json finds it valid: %v", abbreviate([]byte(body)), len(body), invalid, !invalid)
	}
}

// TestDecisions documents the choices for inputs where JSON parsers differ, all of them
// kin-openapi's (with encoding/json) except text after the value.
func TestDecisions(t *testing.T) {
	chat := operation(t, "POST /v1/chat/completions")
	thing := operation(t, "keywords.yaml: POST /things/{id}")
	cases := []struct {
		op      *Operation
		body    string
		kind    ErrorKind // 0: accepted
		pointer string
	}{
		// A repeated name counts with its last value only.
		{chat, `{"model":1,"model":"m","messages":[{"role":"user"}]}`, 0, ""},
		{chat, `{"model":"m","model":1,"messages":[{"role":"user"}]}`, BodySchema, "model"},
		// Names are compared decoded.
		{chat, `{"mod\u0065l":"m","messages":[{"r\u006fle":"user"}]}`, 0, ""},
		// Numbers are judged on their value.
		{chat, `{"model":"m","messages":[{"role":"user"}],"max_tokens":1e2,"n":1.0}`, 0, ""},
		{chat, `{"model":"m","messages":[{"role":"user"}],"max_tokens":-0}`, BodySchema, "max_tokens"},
		{chat, `{"model":"m","messages":[{"role":"user"}],"max_tokens":1.5}`, BodySchema, "max_tokens"},
		{chat, `{"model":"m","messages":[{"role":"user"}],"max_tokens":1e400}`, BodySchema, "max_tokens"},
		{chat, `{"model":"m","messages":[{"role":"user"}],"seed":1e400}`, 0, ""},
		// Invalid UTF-8 is accepted, each bad byte counting as one character.
		{chat, "{\"model\":\"\xff\",\"messages\":[{\"role\":\"\xc3\"}]}", 0, ""},
		{thing, "{\"name\":\"\xff\",\"count\":1,\"ghost\":0}", BodySchema, "name"},
		{thing, "{\"name\":\"\xff\xfe\",\"count\":1,\"ghost\":0}", 0, ""},
		// Characters, not bytes or UTF-16 units, are counted.
		{thing, `{"name":"😀","count":1,"ghost":0}`, BodySchema, "name"},
		{thing, `{"name":"\ud83d\ude00","count":1,"ghost":0}`, BodySchema, "name"},
		// Text after the value makes the body invalid (kin-openapi would ignore it).
		{chat, `{"model":"m","messages":[{"role":"user"}]} {}`, BodySyntax, ""},
		{chat, `{"model":"m","messages":[{"role":"user"}]}garbage`, BodySyntax, ""},
		{chat, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}\r\n\t ", 0, ""},
		// Syntax errors win over schema errors wherever they are.
		{chat, `{"model":1,"messages":[{"role":"user"}],"x":[1,]}`, BodySyntax, ""},
		{chat, ``, BodySyntax, ""},
	}
	for _, tc := range cases {
		e := bodyError(t, tc.op, tc.body)
		var kind ErrorKind
		var pointer string
		if e != nil {
			kind, pointer = e.Kind, strings.Join(e.Pointer, "/")
		}
		if kind != tc.kind || pointer != tc.pointer {
			t.Errorf("%q: got %+v, want kind %d at %q", tc.body, e, tc.kind, tc.pointer)
		}
	}
}

// TestHugeString: a string of 30 MB, plain or full of escapes, is one scan.
func TestHugeString(t *testing.T) {
	chat := operation(t, "POST /v1/chat/completions")
	for _, text := range []string{strings.Repeat("abcdefgh", 30<<17), strings.Repeat(`\u00e9\n`, 30<<17/4)} {
		body := `{"model":"` + text + `","messages":[{"role":"user","content":"` + text + `"}]}`
		if e := bodyError(t, chat, body); e != nil {
			t.Errorf("huge string refused: %v", e)
		}
		if e := bodyError(t, chat, body[:len(body)-4]); e == nil || e.Kind != BodySyntax {
			t.Errorf("truncated huge string: %v", e)
		}
	}
}

// TestValidBodyAllocatesNothing: the walk over a valid body allocates nothing once its walker
// exists (ValidateBody keeps walkers in a sync.Pool, which the race detector makes drop some).
func TestValidBodyAllocatesNothing(t *testing.T) {
	chat := operation(t, "POST /v1/chat/completions")
	body := []byte(`{"model":"service-flint-base","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16,"temperature":0.2,"top_p":0.95,"stop":["\n"],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	w := new(walker)
	allocs := testing.AllocsPerRun(100, func() {
		if !isJSON("application/json; charset=utf-8") {
			t.Fatal("not JSON")
		}
		if f, valid := w.walk(chat.body, body); !valid || f.reason != passed {
			t.Fatalf("refused: %v %+v", valid, f)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per valid body, want 0", allocs)
	}
}

// TestErrorText: an Error says what is wrong and where.
func TestErrorText(t *testing.T) {
	thing := operation(t, "keywords.yaml: POST /things/{id}")
	for body, want := range map[string]string{
		`{"name":"ab","count":1}`:                       `request body at /ghost: property "ghost" is missing`,
		`{"name":"ab","count":1,"ghost":0,"a/b~c":1.5}`: "request body at /a~1b~0c: value must be an integer",
		`[]`:                    "request body: value must be an object",
		`[1,`:                   "the request body is not valid JSON: it ends early, inside a value (was it cut short?)",
		"{\"name\":\n \"ab\",}": "the request body is not valid JSON: unexpected character '}' (line 2, column 7)",
		`{"name":"ab"} {}`:      "the request body is not valid JSON: unexpected character '{' (line 1, column 15)",
		"{\"name\":\x01}":       "the request body is not valid JSON: unexpected byte 0x01 (line 1, column 9)",
		"\x1f\x8b\x08\x00":      "the request body is not valid JSON: it starts like gzip-compressed data: send it uncompressed",
		" \n ":                  "the request body is empty: send a JSON value",
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1): "the request body is not valid JSON: its arrays and objects nest deeper than 10000 levels (line 1, column 10001)",
	} {
		if e := bodyError(t, thing, body); e == nil || e.Error() != want {
			t.Errorf("%.40q: %.200v, want %q", body, e, want)
		}
	}
	if err := thing.ValidateBody("text/html", []byte(`{}`)); err == nil || err.Error() != `header Content-Type has unexpected value "text/html"` {
		t.Errorf("content type: %v", err)
	}
}

// FuzzTextMatchesEncodingJSON: the decoded text of a string is encoding/json's.
func FuzzTextMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`a`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\ud83d\u0041`, `\ude00\ud83d`, "\xff\xfe", "\xed\xa0\x80", `\"\\\/\b\f\n\r\t`, "é😀"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		quoted := append(append([]byte{'"'}, raw...), '"')
		w := &walker{data: quoted}
		escaped, nonASCII := w.scanString()
		if w.bad || w.pos != len(quoted) {
			if json.Valid(quoted) {
				t.Fatalf("%q: refused, encoding/json accepts it", quoted)
			}
			return
		}
		var want string
		if err := json.Unmarshal(quoted, &want); err != nil {
			t.Fatalf("%q: accepted, encoding/json refuses it: %v", quoted, err)
		}
		if got := string(w.text(raw, escaped, nonASCII)); got != want {
			t.Fatalf("%q: text %q, encoding/json %q", quoted, got, want)
		}
	})
}

// BenchmarkValidateChatBody measures the body validation alone.
func BenchmarkValidateChatBody(b *testing.B) {
	doc, err := api.GetSwagger()
	if err != nil {
		b.Fatal(err)
	}
	ops, err := Compile(doc)
	if err != nil {
		b.Fatal(err)
	}
	chat := find(ops, "POST", "/v1/chat/completions")
	body := []byte(`{"model":"service-flint-base","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16,"temperature":0.2}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := chat.ValidateBody("application/json", body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestValidateBodyStrict: the strict validation refuses the first string (value or member name)
// that is not valid UTF-8, pointing at it, after any syntax or schema fault; valid UTF-8, escapes
// included (a lone surrogate escape is valid JSON), passes as with ValidateBody.
func TestValidateBodyStrict(t *testing.T) {
	chat := operation(t, "POST /v1/chat/completions")
	for _, tc := range []struct {
		body    string
		keyword string // "": accepted
		pointer string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"héllo 😀 \ud83d\ude00 \ud800"}]}`, "", ""},
		{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}", "utf8", "messages/0/content"},
		{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xed\xa0\x80\"}]}]}", "utf8", "messages/0/content/0/text"},
		{"{\"model\":\"\xff\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}", "utf8", "model"},
		{"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"metadata\":{\"k\":\"\xc3(\"}}", "utf8", "metadata/k"},
		// A schema fault is reported first.
		{"{\"model\":1,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "type", "model"},
	} {
		err := chat.ValidateBodyStrict("application/json", []byte(tc.body))
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("%T is not an *Error", err)
		}
		var keyword, pointer string
		if e != nil {
			keyword, pointer = e.Keyword, strings.Join(e.Pointer, "/")
		}
		if keyword != tc.keyword || pointer != tc.pointer {
			t.Errorf("%q: got %+v, want %q at %q", tc.body, e, tc.keyword, tc.pointer)
		}
		if lenient := bodyError(t, chat, tc.body); tc.keyword == "utf8" && lenient != nil {
			t.Errorf("%q: ValidateBody refused it: %+v", tc.body, lenient)
		}
	}
}

// BenchmarkValidateBodyStrict compares ValidateBody and ValidateBodyStrict on a small chat body
// and on 1 MB prompts of ASCII and of accented text: the strict check reads again only the
// strings that have bytes above 0x7F.
func BenchmarkValidateBodyStrict(b *testing.B) {
	doc, err := api.GetSwagger()
	if err != nil {
		b.Fatal(err)
	}
	ops, err := Compile(doc)
	if err != nil {
		b.Fatal(err)
	}
	chat := find(ops, "POST", "/v1/chat/completions")
	bodies := []struct{ name, body string }{
		{"small", `{"model":"service-flint-base","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16,"temperature":0.2}`},
		{"ascii-1MB", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}]}`},
		{"accented-1MB", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("café à ", 1<<20/9) + `"}]}`},
	}
	for _, c := range bodies {
		body := []byte(c.body)
		for _, strict := range []bool{false, true} {
			name := c.name + "/lenient"
			validate := chat.ValidateBody
			if strict {
				name, validate = c.name+"/strict", chat.ValidateBodyStrict
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if err := validate("application/json", body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
