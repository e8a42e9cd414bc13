package convert

import (
	"bytes"
	"encoding/json"
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
// value by its own), null and "" are the account's, a request naming none gets the account's,
// and the rest of a Messages metadata object stays as it came.
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
		got, err := forUpstream(nil, []byte(tc.body), "up", UpstreamEdits{EndUser: testEndUser, Client: tc.f})
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

// TestEndUserTranslated: a translated request is sent Request.EndUser in its target's field,
// the client's own value is neither carried nor named, and none is sent when it is empty.
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
				for _, d := range dropped {
					if d == "safety_identifier" || d == "metadata" || (d == "user" && tc.raw != "alice") {
						t.Errorf("%s to %s: named %q dropped", tc.src, dst, d)
					}
				}
			}
		}
	}
}

// BenchmarkForUpstreamEndUser measures the same-format rewrite of a small chat request without
// the end-user edit (pass_through), with the account's identifier added (no end user named),
// and with a client's value put through the account's HMAC.
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
	}{{"pass_through", plain, nil}, {"account", plain, eu}, {"end_user", named, eu}} {
		b.Run(bc.name, func(b *testing.B) {
			var v jsonview.View
			if err := v.Parse(bc.body); err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				var edits jsonview.Edits
				out, err := ForUpstream(dst[:0], &v, "sim-general", UpstreamEdits{IncludeUsage: true, BoundKey: "max_completion_tokens", DefaultBound: 4096, EndUser: bc.eu, Client: llm.FormatChat}, &edits)
				if err != nil || len(out) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
