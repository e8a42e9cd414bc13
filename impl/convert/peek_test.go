package convert

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

func TestPeekRequest(t *testing.T) {
	cases := []struct {
		name   string
		f      llm.Format
		body   string
		model  string
		stream bool
		max    int
	}{
		{"plain", llm.FormatChat, `{"model":"gpt","stream":true,"max_tokens":10}`, "gpt", true, 10},
		{"nested model first", llm.FormatChat, `{"messages":[{"role":"user","content":"x","model":"inner"}],"metadata":{"model":"meta","stream":true},"model":"outer"}`, "outer", false, 0},
		{"model in a string", llm.FormatChat, `{"messages":[{"role":"user","content":"\"model\":\"evil\", {\"stream\":true}"}],"model":"m"}`, "m", false, 0},
		{"escaped model value", llm.FormatChat, `{"model":"a\"b\\c\u00e9\/d"}`, "a\"b\\cé/d", false, 0},
		{"escaped key", llm.FormatChat, `{"mod\u0065l":"m","str\u0065am":true}`, "m", true, 0},
		{"whitespace", llm.FormatChat, " \n\t{ \"model\" :\r\n \"m\" , \"stream\"\t:\tfalse ,\"max_completion_tokens\" : 7 }\n ", "m", false, 7},
		{"completion tokens win", llm.FormatChat, `{"max_completion_tokens":20,"model":"m","max_tokens":10}`, "m", false, 20},
		{"null bounds", llm.FormatChat, `{"model":"m","max_tokens":null,"stream":null}`, "m", false, 0},
		{"responses bound", llm.FormatResponses, `{"model":"m","input":[{"max_output_tokens":1}],"max_output_tokens":64,"max_tokens":5}`, "m", false, 64},
		{"messages bound", llm.FormatMessages, `{"model":"claude","max_tokens":1024,"max_output_tokens":5,"stream":true}`, "claude", true, 1024},
		{"repeated key", llm.FormatChat, `{"model":"a","model":"b"}`, "b", false, 0},
		{"brackets in strings", llm.FormatChat, `{"x":{"a":"}]{[","b":[1,{"c":"\\"}]},"model":"m"}`, "m", false, 0},
		{"integral float bound", llm.FormatChat, `{"model":"m","max_tokens":100.0}`, "m", false, 100},
		{"unicode", llm.FormatChat, `{"model":"模型-✓","stream":true}`, "模型-✓", true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pk, err := peek(c.f, []byte(c.body))
			model, stream, max := pk.Model, pk.Stream, pk.MaxTokens
			if err != nil {
				t.Fatal(err)
			}
			if model != c.model || stream != c.stream || max != c.max {
				t.Errorf("got (%q, %v, %d), want (%q, %v, %d)", model, stream, max, c.model, c.stream, c.max)
			}
			// The peek agrees with the full decoder on the model.
			var full struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(c.body), &full); err != nil || full.Model != model {
				t.Errorf("encoding/json says %q (%v)", full.Model, err)
			}
		})
	}
}

// The number of choices is read for chat only; absent or null is one.
func TestPeekRequestChoices(t *testing.T) {
	cases := []struct {
		f    llm.Format
		body string
		want int
	}{
		{llm.FormatChat, `{"model":"m","n":3}`, 3},
		{llm.FormatChat, `{"model":"m","n":null}`, 1},
		{llm.FormatChat, `{"model":"m"}`, 1},
		{llm.FormatChat, `{"model":"m","messages":[{"n":9}],"n":2}`, 2},
		{llm.FormatResponses, `{"model":"m","n":3}`, 1},
		{llm.FormatMessages, `{"model":"m","n":3}`, 1},
	}
	for _, c := range cases {
		pk, err := peek(c.f, []byte(c.body))
		if err != nil || pk.Choices != c.want {
			t.Errorf("%s %s: %d choices (%v), want %d", c.f, c.body, pk.Choices, err, c.want)
		}
	}
	if _, err := peek(llm.FormatChat, []byte(`{"model":"m","n":"2"}`)); err == nil {
		t.Error("a string n was accepted")
	}
}

func TestPeekRequestErrors(t *testing.T) {
	cases := []struct {
		body, param string
	}{
		{``, ""},
		{`[]`, ""},
		{`{"model":"m"`, ""},
		{`{"model":"m",}`, ""},
		{`{"model":"m"} x`, ""},
		{`{"model":"m","x":[1,2}`, ""},
		{`{"model":"m","x":"unterminated}`, ""},
		{`{"model":"m","x":tru}`, ""},
		{`{"model" "m"}`, ""},
		{`{"stream":true}`, "model"},
		{`{"model":null}`, "model"},
		{`{"model":["m"]}`, "model"},
		{`{"model":"m","stream":"true"}`, "stream"},
		{`{"model":"m","max_tokens":"10"}`, "max_tokens"},
		{`{"model":"m","max_tokens":-1}`, "max_tokens"},
		{`{"model":"m","max_tokens":1.5}`, "max_tokens"},
	}
	for _, c := range cases {
		_, err := peek(llm.FormatChat, []byte(c.body))
		invalid(t, err, c.param)
	}
}

func TestSetModel(t *testing.T) {
	cases := []struct {
		name, body, model, want string
	}{
		{"simple", `{"model":"a","stream":true}`, "b", `{"model":"b","stream":true}`},
		{"keeps every other byte", "{ \"messages\" : [ {\"model\":\"inner\", \"content\" : \"\\u00e9 \\\"model\\\"\" } ],\n  \"model\" :  \"old\"  , \"x\":1.50 }",
			"new", "{ \"messages\" : [ {\"model\":\"inner\", \"content\" : \"\\u00e9 \\\"model\\\"\" } ],\n  \"model\" :  \"new\"  , \"x\":1.50 }"},
		{"escaped key", `{"mod\u0065l":"a","n":1}`, "b", `{"mod\u0065l":"b","n":1}`},
		{"every repeat", `{"model":"a","model":"c"}`, "b", `{"model":"b","model":"b"}`},
		{"absent", `{"stream":true}`, "m", `{"model":"m","stream":true}`},
		{"absent, empty", ` { } `, "m", ` {"model":"m" } `},
		{"model needing escapes", `{"model":"a"}`, "x\"y</z>\n", `{"model":"x\"y</z>\n"}`},
		{"non-string model", `{"model":42,"a":[]}`, "m", `{"model":"m","a":[]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SetModel(nil, []byte(c.body), c.model)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			var v struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal(got, &v); err != nil || v.Model != c.model {
				t.Errorf("result decodes to %q (%v)", v.Model, err)
			}
		})
	}
	if _, err := SetModel(nil, []byte(`{"model":`), "m"); err == nil {
		t.Error("SetModel accepted a broken body")
	}
}

func TestSetModelOnFixtures(t *testing.T) {
	for _, fm := range formats {
		body := fixture(t, "requests", fm.name+".json")
		out, err := SetModel(nil, body, "upstream-x")
		if err != nil {
			t.Fatal(err)
		}
		in, got := topLevel(t, body), topLevel(t, out)
		for k, v := range in {
			if k != "model" && !bytes.Equal(got[k], v) {
				t.Errorf("%s: %s changed", fm.name, k)
			}
		}
		if pk, _ := peek(fm.f, out); pk.Model != "upstream-x" {
			t.Errorf("%s: model %q", fm.name, pk.Model)
		}
	}
}

func TestPeekRequestAllocations(t *testing.T) {
	v, err := ReadRequest(fixture(t, "requests", "chat.json"))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := PeekRequest(llm.FormatChat, v); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 { // the model string itself
		t.Errorf("%v allocations per peek", allocs)
	}
}

func BenchmarkPeekRequest(b *testing.B) {
	body := []byte(`{"model":"service-flint","stream":true,"max_tokens":256,"messages":[` +
		strings.Repeat(`{"role":"user","content":"Tell me about the history of the Roman empire, in detail, with dates."},`, 200) +
		`{"role":"user","content":"go"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := peek(llm.FormatChat, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRequest(b *testing.B) {
	body := []byte(`{"model":"service-flint","stream":true,"max_tokens":256,"messages":[` +
		strings.Repeat(`{"role":"user","content":"Tell me about the history of the Roman empire, in detail, with dates."},`, 200) +
		`{"role":"user","content":"go"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(llm.FormatChat, body); err != nil {
			b.Fatal(err)
		}
	}
}

// estimatedRequest is a request with a part of each kind the estimates count: 30 bytes of text
// (system 6, text 5, a tool call 3, a tool result 3, a tool definition 4, unmodelled 9), three
// messages, one image, one tool call and one tool definition.
func estimatedRequest() *llm.Request {
	return &llm.Request{
		System: "abcdef", // 6 bytes
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hello"}, {Kind: llm.PartImage, ImageURL: "https://x"}}}, // 5 bytes, 1 image
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "f", Arguments: `{}`}}},                                         // 3 bytes, 1 call
			{Role: llm.RoleTool, ToolCallID: "c", Parts: []llm.Part{{Kind: llm.PartText, Text: "ok"}}},                                 // 3 bytes
		},
		Tools:      []llm.Tool{{Name: "f", Description: "d", Parameters: json.RawMessage(`{}`)}}, // 4 bytes
		Unmodelled: []llm.Unmodelled{{Size: 9}},
	}
}

func TestEstimateInputTokens(t *testing.T) {
	req := estimatedRequest()
	// bytes = 6+5+3+3+4+9 = 30 -> 10; 3 messages -> 12; request 3; image 2000; call + tool 20.
	if got, want := EstimateInputTokens(req, 2000), 10+12+3+2000+20; got != want {
		t.Errorf("estimate %d, want %d", got, want)
	}
	// The image counts the model's bound (gpt-4o-mini's 48,169).
	if got, want := EstimateInputTokens(req, 48169), 10+12+3+48169+20; got != want {
		t.Errorf("estimate at gpt-4o-mini's image bound %d, want %d", got, want)
	}
	if EstimateInputTokens(&llm.Request{}, 2000) != RequestOverheadTokens {
		t.Error("empty request")
	}
	// The rich fixtures are estimated above a real tokenizer's count (about 4 bytes a token).
	for _, fm := range formats {
		body := fixture(t, "requests", fm.name+".json")
		req := mustDecode(t, fm.f, body)
		if est := EstimateInputTokens(req, 2000); est < len(body)/8 || est < 2000 {
			t.Errorf("%s: estimate %d for %d bytes", fm.name, est, len(body))
		}
	}
}

// TestPeekHugeBound: an output bound too large for any integer type is the largest bound
// (clamped later to the model's limit), not a type error; a fraction still is one.
func TestPeekHugeBound(t *testing.T) {
	for body, want := range map[string]int{
		`{"model":"m","max_tokens":99999999999999999999}`: math.MaxInt32,
		`{"model":"m","max_tokens":1e30}`:                 math.MaxInt32,
		`{"model":"m","max_tokens":16.0}`:                 16,
	} {
		p, err := peek(llm.FormatMessages, []byte(body))
		if err != nil || p.MaxTokens != want {
			t.Errorf("%s: %d %v, want %d", body, p.MaxTokens, err, want)
		}
	}
	for _, body := range []string{`{"model":"m","max_tokens":16.5}`, `{"model":"m","max_tokens":-1e30}`} {
		if _, err := peek(llm.FormatMessages, []byte(body)); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}

// TestBilledInputTokens: the input billed when the upstream never said it counts four bytes a
// token, 3 tokens a message and 3 for the reply (OpenAI's rule of thumb and its cookbook's
// message framing), and is below the reservation's cautious estimate of the same request.
func TestBilledInputTokens(t *testing.T) {
	req := estimatedRequest()
	// bytes = 30 -> 8; 3 messages -> 9; reply 3; image 2000; call + tool 20.
	if got, want := BilledInputTokens(req, 2000), 8+9+3+2000+20; got != want {
		t.Errorf("billed %d, want %d", got, want)
	}
	// OpenAI's cookbook counts a one-message chat "hello world" (2 tokens) as 2 + 3 + 3 = 8
	// (num_tokens_from_messages); at four bytes a token: ceil(11/4) + 3 + 3 = 9.
	hello := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hello world"}}}}}
	if got := BilledInputTokens(hello, 2000); got != 9 {
		t.Errorf("hello world billed %d, want 9", got)
	}
	for _, fm := range formats {
		req := mustDecode(t, fm.f, fixture(t, "requests", fm.name+".json"))
		if billed, cautious := BilledInputTokens(req, 2000), EstimateInputTokens(req, 2000); billed > cautious {
			t.Errorf("%s: billed %d above the reservation's estimate %d", fm.name, billed, cautious)
		}
	}
}

// TestImageMarkers: a request may hold an image when its body holds its format's image marker
// or a \u escape (which could spell one: "\u0069mage"), and not otherwise; the markers count at
// least the image parts.
func TestImageMarkers(t *testing.T) {
	for _, c := range []struct {
		f    llm.Format
		body string
		may  bool
	}{
		{llm.FormatChat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`, true},
		{llm.FormatChat, `{"messages":[{"role":"user","content":"an image"}]}`, false},
		{llm.FormatResponses, `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]}`, true},
		{llm.FormatMessages, `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`, true},
		{llm.FormatMessages, `{"messages":[{"role":"user","content":[{"type":"\u0069mage","source":{"type":"url","url":"u"}}]}]}`, true},
		{llm.FormatMessages, `{"messages":[{"role":"user","content":"image/png"}]}`, false},
	} {
		v, err := ReadRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := MayHoldImages(c.f, v); got != c.may {
			t.Errorf("%s %s: may hold images %v, want %v", c.f, c.body, got, c.may)
		}
	}
	if n := ImageMarkers(llm.FormatChat, []byte(`[{"type":"image_url","image_url":{}},{"type":"image_url","image_url":{}}]`)); n < 2 {
		t.Errorf("two chat images counted %d", n)
	}
}
