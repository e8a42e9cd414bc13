package convert

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/impl/llm"
)

// TestResponseUsageAgreesWithDecodeResponse: the usage-only reader gives what the full decoder
// gives, on the simulator's recorded answers of every format.
func TestResponseUsageAgreesWithDecodeResponse(t *testing.T) {
	files := map[string]llm.Format{"chat": llm.FormatChat, "responses": llm.FormatResponses, "messages": llm.FormatMessages}
	n := 0
	for prefix, f := range files {
		matches, _ := filepath.Glob(filepath.Join("..", "sim", "testdata", prefix+"*.json"))
		for _, path := range matches {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			full, err := DecodeResponse(f, body)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			u, err := ResponseUsage(f, body)
			if err != nil || u != full.Usage || u.OutputTokens == 0 {
				t.Errorf("%s: usage %+v (%v), full decode %+v", path, u, err, full.Usage)
			}
			n++
		}
	}
	if n < 3 {
		t.Fatalf("only %d recorded answers found", n)
	}
	if _, err := ResponseUsage(llm.FormatMessages, []byte(`{"type":"error"}`)); err == nil {
		t.Error("a non-message must be an error")
	}
}

// TestMessagesCompactionIsBilled: the compaction iterations of an Anthropic usage (server-side
// compaction, whose tokens the top-level counts leave out) are added to the top level's, kind by
// kind, by the usage-only reader and the full decoder alike, their output named as compaction's
// (CompactionOutputTokens, which max_tokens does not bound); the message iterations (in the top
// level already) are not. Anthropic's own example: 23,000 and 1,000 at the top level, a
// compaction of 180,000 and 3,500.
func TestMessagesCompactionIsBilled(t *testing.T) {
	const head = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"compaction","content":"Summary"},{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":`
	for _, c := range []struct {
		usage string
		want  llm.Usage
	}{
		{`{"input_tokens":23000,"output_tokens":1000,"iterations":[{"type":"compaction","input_tokens":180000,"output_tokens":3500},{"type":"message","input_tokens":23000,"output_tokens":1000}]}`,
			llm.Usage{InputTokens: 203000, OutputTokens: 4500, CompactionOutputTokens: 3500}},
		{`{"input_tokens":100,"cache_read_input_tokens":20000,"output_tokens":1000,"iterations":[{"type":"compaction","input_tokens":500,"cache_read_input_tokens":170000,"cache_creation_input_tokens":9000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":9000},"output_tokens":3500}]}`,
			llm.Usage{InputTokens: 199600, CachedInputTokens: 190000, CacheWrite1hTokens: 9000, OutputTokens: 4500, CompactionOutputTokens: 3500}},
		{`{"input_tokens":100,"output_tokens":10,"iterations":[{"type":"message","input_tokens":100,"output_tokens":10}]}`,
			llm.Usage{InputTokens: 100, OutputTokens: 10}},
		{`{"input_tokens":100,"output_tokens":10,"iterations":null}`, llm.Usage{InputTokens: 100, OutputTokens: 10}},
	} {
		body := []byte(head + c.usage + "}")
		u, err := ResponseUsage(llm.FormatMessages, body)
		if err != nil || u != c.want {
			t.Errorf("%s: usage %+v (%v), want %+v", c.usage, u, err, c.want)
		}
		full, err := DecodeResponse(llm.FormatMessages, body)
		if err != nil || full.Usage != c.want {
			t.Errorf("%s: full decode %+v (%v), want %+v", c.usage, full, err, c.want)
		}
	}
}

func TestForUpstream(t *testing.T) {
	cases := []struct {
		in         string
		forceUsage bool
		want       string
	}{
		{`{"model":"a","messages":[{"model":"nested"}]}`, false, `{"model":"up","messages":[{"model":"nested"}]}`},
		{`{"messages":[]}`, false, `{"model":"up","messages":[]}`},
		{`{}`, true, `{"model":"up","stream_options":{"include_usage":true}}`},
		{`{"model":"a","stream":true,"x":{"y":1}}`, true, `{"stream_options":{"include_usage":true},"model":"up","stream":true,"x":{"y":1}}`},
		{`{"model":"a","stream_options":{"include_obfuscation":false}}`, true, `{"model":"up","stream_options":{"include_obfuscation":false,"include_usage":true}}`},
		{`{"model":"a","stream_options":null}`, true, `{"model":"up","stream_options":{"include_usage":true}}`},
	}
	for _, c := range cases {
		got, err := forUpstream(nil, []byte(c.in), "up", UpstreamEdits{IncludeUsage: c.forceUsage})
		if err != nil || string(got) != c.want {
			t.Errorf("forUpstream(%s, %v) = %s, %v; want %s", c.in, c.forceUsage, got, err, c.want)
		}
	}
	for _, c := range cases { // appending to a buffer that holds something already
		prefix := []byte("kept:")
		got, err := forUpstream(prefix[:len(prefix):len(prefix)], []byte(c.in), "up", UpstreamEdits{IncludeUsage: c.forceUsage})
		if err != nil || string(got) != "kept:"+c.want {
			t.Errorf("forUpstream(%s, %v) = %s, %v; want kept:%s", c.in, c.forceUsage, got, err, c.want)
		}
	}
	if _, err := forUpstream(nil, []byte(`{"model":"a","stream_options":7}`), "up", UpstreamEdits{IncludeUsage: true}); err == nil {
		t.Error("a stream_options that is not an object must be refused")
	}
	if !includeUsage([]byte(`{"stream_options":{"include_usage":true}}`)) || includeUsage([]byte(`{"stream_options":{"include_usage":false}}`)) || includeUsage([]byte(`{"messages":[{"stream_options":{"include_usage":true}}]}`)) {
		t.Error("IncludeUsage")
	}
}

// A bound below the upstream's minimum is raised; others, and a null or absent one, stay.
func TestForUpstreamMinBound(t *testing.T) {
	ed := UpstreamEdits{BoundKey: "max_output_tokens", MinBound: 16}
	cases := []struct{ in, want string }{
		{`{"model":"a","max_output_tokens":3}`, `{"model":"up","max_output_tokens":16}`},
		{`{"model":"a","max_output_tokens":16}`, `{"model":"up","max_output_tokens":16}`},
		{`{"model":"a","max_output_tokens":400}`, `{"model":"up","max_output_tokens":400}`},
		{`{"model":"a","max_output_tokens":null}`, `{"model":"up","max_output_tokens":null}`},
		{`{"model":"a","input":[{"max_output_tokens":1}]}`, `{"model":"up","input":[{"max_output_tokens":1}]}`},
		{`{"max_output_tokens":2.0,"model":"a"}`, `{"max_output_tokens":16,"model":"up"}`},
	}
	for _, c := range cases {
		got, err := forUpstream(nil, []byte(c.in), "up", ed)
		if err != nil || string(got) != c.want {
			t.Errorf("forUpstream(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := forUpstream(nil, []byte(`{"model":"a","max_output_tokens":"3"}`), "up", ed); err == nil {
		t.Error("a bound that is not a number must be refused")
	}
}

// SetMemberModel rewrites the model of one top-level member's object only.
func TestSetMemberModel(t *testing.T) {
	cases := []struct{ in, member, want string }{
		{`{"type":"message_start","message":{"id":"m","model":"up","content":[]}}`, "message", `{"type":"message_start","message":{"id":"m","model":"pub","content":[]}}`},
		{`{"type":"response.created","sequence_number":0,"response":{"id":"r","model":"up","tools":[{"model":"x"}]},"model":"top"}`, "response", `{"type":"response.created","sequence_number":0,"response":{"id":"r","model":"pub","tools":[{"model":"x"}]},"model":"top"}`},
		{`{"type":"ping"}`, "message", `{"type":"ping"}`},
		{`{"message":null}`, "message", `{"message":null}`},
	}
	for _, c := range cases {
		got, err := SetMemberModel([]byte("kept:"), []byte(c.in), c.member, "pub")
		if err != nil || string(got) != "kept:"+c.want {
			t.Errorf("SetMemberModel(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := SetMemberModel(nil, []byte(`{"message":`), "message", "pub"); err == nil {
		t.Error("a truncated body must be refused")
	}
}

// A default bound is set where the body has none, or null, and leaves one the client gave.
func TestForUpstreamDefaultBound(t *testing.T) {
	ed := UpstreamEdits{BoundKey: "max_completion_tokens", DefaultBound: 4096}
	cases := []struct{ in, want string }{
		{`{"model":"a","messages":[]}`, `{"max_completion_tokens":4096,"model":"up","messages":[]}`},
		{`{"model":"a","max_completion_tokens":null}`, `{"model":"up","max_completion_tokens":4096}`},
		{`{"model":"a","max_completion_tokens":20}`, `{"model":"up","max_completion_tokens":20}`},
		{`{}`, `{"model":"up","max_completion_tokens":4096}`},
	}
	for _, c := range cases {
		got, err := forUpstream(nil, []byte(c.in), "up", ed)
		if err != nil || string(got) != c.want {
			t.Errorf("forUpstream(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	both := UpstreamEdits{BoundKey: "max_output_tokens", MinBound: 16, DefaultBound: 512, NoStore: true}
	got, err := forUpstream(nil, []byte(`{"model":"a","input":"hi"}`), "up", both)
	if want := `{"store":false,"max_output_tokens":512,"model":"up","input":"hi"}`; err != nil || string(got) != want {
		t.Errorf("Responses: %s, %v; want %s", got, err, want)
	}
}
