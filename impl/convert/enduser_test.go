package convert

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/enduserid"
	"github.com/tollgate/tollgate/impl/jsonview"
	"github.com/tollgate/tollgate/impl/llm"
)

// testEndUser names an end user "u(<raw>)" and the account "acct".
var testEndUser = NewEndUser("acct", func(dst, raw []byte) []byte {
	dst = append(dst, "u("...)
	dst = append(dst, raw...)
	return append(dst, ')')
})

// TestEndUserEdits: a same-format request's end-user identifiers are put in place (each
// value by its own), null and "" are the account's, a request naming none gets the account's
// (AddEndUser, end_user_ids namespaced_always), and the rest of a Messages metadata object
// stays as it came.
func TestEndUserEdits(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    llm.Format
		body string
		want string
	}{
		{"chat without", llm.FormatChat, `{"model":"m","messages":[]}`, `{"safety_identifier":"acct","model":"up","messages":[]}`},
		{"chat both", llm.FormatChat, `{"model":"m","user":"bob","safety_identifier":"al\u0069ce"}`, `{"model":"up","user":"u(bob)","safety_identifier":"u(alice)"}`},
		{"chat user alone", llm.FormatChat, `{"model":"m","user":"bob"}`, `{"model":"up","user":"u(bob)"}`},
		{"chat empty and null", llm.FormatChat, `{"model":"m","user":"","safety_identifier":null}`, `{"model":"up","user":"acct","safety_identifier":"acct"}`},
		{"chat metadata is not an id", llm.FormatChat, `{"model":"m","metadata":{"user_id":"x"}}`, `{"safety_identifier":"acct","model":"up","metadata":{"user_id":"x"}}`},
		{"responses", llm.FormatResponses, `{"model":"m","safety_identifier":"alice","prompt_cache_key":"alice"}`, `{"model":"up","safety_identifier":"u(alice)","prompt_cache_key":"alice"}`},
		{"messages without", llm.FormatMessages, `{"model":"m","max_tokens":5}`, `{"metadata":{"user_id":"acct"},"model":"up","max_tokens":5}`},
		{"messages user_id", llm.FormatMessages, `{"model":"m","metadata":{ "user_id" : "alice", "x": 1 }}`, `{"model":"up","metadata":{ "user_id" : "u(alice)", "x": 1 }}`},
		{"messages empty metadata", llm.FormatMessages, `{"model":"m","metadata":{}}`, `{"model":"up","metadata":{"user_id":"acct"}}`},
		{"messages null metadata", llm.FormatMessages, `{"model":"m","metadata":null}`, `{"model":"up","metadata":{"user_id":"acct"}}`},
		{"messages null user_id", llm.FormatMessages, `{"model":"m","metadata":{"user_id":null}}`, `{"model":"up","metadata":{"user_id":"acct"}}`},
	} {
		got, err := forUpstream(nil, []byte(tc.body), "up", UpstreamEdits{EndUser: testEndUser, AddEndUser: true, Client: tc.f})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v\nwant %s", tc.name, got, err, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", tc.name, got)
		}
		plain, _ := forUpstream(nil, []byte(tc.body), "up", UpstreamEdits{})
		if want, _ := forUpstream(nil, []byte(tc.body), "up", UpstreamEdits{Client: tc.f}); string(plain) != string(want) {
			t.Errorf("%s: without EndUser the identifiers changed: %s", tc.name, want)
		}
	}
}

// TestEndUserNotAdded: without AddEndUser (end_user_ids namespaced, the default for a host
// that may refuse the fields), the identifiers a client sent are put in place as with it, and
// a request gains none it did not send: no safety_identifier, no metadata, no user_id in a
// Messages metadata object without one.
func TestEndUserNotAdded(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    llm.Format
		body string
		want string
	}{
		{"chat without", llm.FormatChat, `{"model":"m","messages":[]}`, `{"model":"up","messages":[]}`},
		{"chat safety_identifier", llm.FormatChat, `{"model":"m","safety_identifier":"alice"}`, `{"model":"up","safety_identifier":"u(alice)"}`},
		{"chat user alone", llm.FormatChat, `{"model":"m","user":"bob"}`, `{"model":"up","user":"u(bob)"}`},
		{"chat empty", llm.FormatChat, `{"model":"m","user":""}`, `{"model":"up","user":"acct"}`},
		{"chat metadata is not an id", llm.FormatChat, `{"model":"m","metadata":{"user_id":"x"}}`, `{"model":"up","metadata":{"user_id":"x"}}`},
		{"responses without", llm.FormatResponses, `{"model":"m","input":"hi"}`, `{"model":"up","input":"hi"}`},
		{"messages without", llm.FormatMessages, `{"model":"m","max_tokens":5}`, `{"model":"up","max_tokens":5}`},
		{"messages user_id", llm.FormatMessages, `{"model":"m","metadata":{"user_id":"alice","x":1}}`, `{"model":"up","metadata":{"user_id":"u(alice)","x":1}}`},
		{"messages empty metadata", llm.FormatMessages, `{"model":"m","metadata":{}}`, `{"model":"up","metadata":{}}`},
		{"messages null metadata", llm.FormatMessages, `{"model":"m","metadata":null}`, `{"model":"up","metadata":null}`},
	} {
		got, err := forUpstream(nil, []byte(tc.body), "up", UpstreamEdits{EndUser: testEndUser, Client: tc.f})
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s, %v\nwant %s", tc.name, got, err, tc.want)
		}
	}
}

// TestDropEndUserIDs: end_user_ids off removes the members that name the end user, of the
// request's own format only, and names those that were not null.
func TestDropEndUserIDs(t *testing.T) {
	for _, tc := range []struct {
		f       llm.Format
		body    string
		want    string
		dropped []string
	}{
		{llm.FormatChat, `{"model":"m","user":"bob","safety_identifier":"alice","metadata":{"user_id":"x"},"messages":[{"role":"user","content":"hi"}]}`, `{"model":"m","metadata":{"user_id":"x"},"messages":[{"role":"user","content":"hi"}]}`, []string{"user", "safety_identifier"}},
		{llm.FormatResponses, `{"model":"m","safety_identifier":null,"input":"hi"}`, `{"model":"m","input":"hi"}`, nil},
		{llm.FormatMessages, `{"model":"m","metadata":{"user_id":"alice"},"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, []string{"metadata"}},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"user":"bob","messages":[{"role":"user","content":"hi"}]}`, `{"model":"m","max_tokens":5,"user":"bob","messages":[{"role":"user","content":"hi"}]}`, nil},
	} {
		var v jsonview.View
		if err := v.Parse([]byte(tc.body)); err != nil {
			t.Fatal(err)
		}
		var edits jsonview.Edits
		dropped := DropEndUserIDs(tc.f, &v, &edits)
		if got := edits.AppendTo(nil, &v); string(got) != tc.want || !slices.Equal(dropped, tc.dropped) {
			t.Errorf("%s %s: %s, dropped %q\nwant %s, %q", tc.f, tc.body, got, dropped, tc.want, tc.dropped)
		}
		req, err := DecodeRequest(tc.f, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		out, names := WithoutEndUserIDs(*req)
		if _, ok := ClientEndUser(&out); ok || len(names) != len(tc.dropped) {
			t.Errorf("%s %s: WithoutEndUserIDs left %v, named %q", tc.f, tc.body, out.Extra, names)
		}
	}
}

// TestEndUserTranslated: a translated request is sent Request.EndUser in its target's field,
// the client's own value is neither carried nor named; none is sent when it is empty, and the
// client's is then dropped and named (an upstream sent none: end_user_ids namespaced for a
// host that may refuse the target's field, or off).
func TestEndUserTranslated(t *testing.T) {
	for _, tc := range []struct {
		src  llm.Format
		body string
		raw  string
	}{
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"bob","safety_identifier":"alice"}`, "alice"},
		{llm.FormatChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"bob"}`, "bob"},
		{llm.FormatResponses, `{"model":"m","input":"hi","safety_identifier":"alice"}`, "alice"},
		{llm.FormatMessages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"alice"}}`, "alice"},
	} {
		req, err := DecodeRequest(tc.src, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if raw, ok := ClientEndUser(req); !ok || raw != tc.raw {
			t.Errorf("%s %s: ClientEndUser %q, %v, want %q", tc.src, tc.body, raw, ok, tc.raw)
		}
		for _, dst := range []llm.Format{llm.FormatChat, llm.FormatResponses, llm.FormatMessages} {
			if dst == tc.src {
				continue
			}
			req.MaxTokens = 5
			for _, id := range []string{"tg_x", ""} {
				req.EndUser = id
				body, dropped, err := EncodeRequest(dst, req, "up")
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					SafetyIdentifier *string `json:"safety_identifier"`
					User             *string `json:"user"`
					Metadata         *struct {
						UserID string `json:"user_id"`
					} `json:"metadata"`
				}
				_ = json.Unmarshal(body, &got)
				sent := ""
				switch {
				case dst == llm.FormatMessages && got.Metadata != nil:
					sent = got.Metadata.UserID
				case got.SafetyIdentifier != nil:
					sent = *got.SafetyIdentifier
				}
				if sent != id || got.User != nil || (dst != llm.FormatMessages && got.Metadata != nil) {
					t.Errorf("%s to %s, EndUser %q: sent %s", tc.src, dst, id, body)
				}
				named := map[string]bool{}
				for _, d := range dropped {
					named[d] = true
				}
				for k := range req.Extra {
					beside := k == "user" && tc.raw == "alice" // a user beside a safety_identifier
					if want := id == "" || beside; named[k] != want {
						t.Errorf("%s to %s, EndUser %q: %q named dropped: %v, want %v", tc.src, dst, id, k, named[k], want)
					}
				}
			}
		}
	}
}

// BenchmarkForUpstreamEndUser measures the same-format rewrite of a small chat request without
// the end-user edit (pass_through), with the account's identifier added (no end user named,
// namespaced_always), with nothing added (namespaced, another host), and with a client's value
// put through the account's HMAC.
func BenchmarkForUpstreamEndUser(b *testing.B) {
	keys, err := enduserid.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		b.Fatal(err)
	}
	acct := keys.Account(uuid.New())
	eu := NewEndUser(acct.ID(), acct.AppendUser)
	plain := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"Say hello in one short sentence."}]}`)
	named := []byte(`{"model":"m","stream":true,"safety_identifier":"alice@example.com","messages":[{"role":"user","content":"Say hello in one short sentence."}]}`)
	for _, bc := range []struct {
		name string
		body []byte
		eu   *EndUser
		add  bool
	}{{"pass_through", plain, nil, false}, {"account", plain, eu, true}, {"not_added", plain, eu, false}, {"end_user", named, eu, true}} {
		b.Run(bc.name, func(b *testing.B) {
			var v jsonview.View
			if err := v.Parse(bc.body); err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				var edits jsonview.Edits
				out, err := ForUpstream(dst[:0], &v, "sim-general", UpstreamEdits{IncludeUsage: true, BoundKey: "max_completion_tokens", DefaultBound: 4096, EndUser: bc.eu, AddEndUser: bc.add, Client: llm.FormatChat}, &edits)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
