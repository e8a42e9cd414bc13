package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/syncbuf"
	"github.com/tollgate/tollgate/impl/store"
)

// usageRecordsOf waits up to 5 s for the account's usage records to reach n, and returns them.
func usageRecordsOf(t *testing.T, g *apitest.Gateway, tenant apitest.Tenant, n int) []store.UsageRecord {
	t.Helper()
	var recs []store.UsageRecord
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if recs, err = g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10); err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n {
			break
		}
	}
	return recs
}

// TestStreamAnsweredWithoutAnEventStream: a streamed request whose upstream answers 200 with
// something other than an event stream (a proxy's HTML page, a JSON error, a whole JSON answer,
// a JSON error with no Content-Type) is a failed try, decided before the client's head: the
// client gets the route's 502 in its envelope, saying so in the gateway's words (the upstream's,
// its key elided, go to the log), the upstream is asked once, nothing is billed (one usage
// record, upstream_malformed, cost 0, the balance as it was), and a model with another expert
// fails over to it unseen. A stream with no Content-Type is still relayed. Before, the client
// got a 200 stream ending with "the upstream stream ended unexpectedly" (trial s15h2), and the
// fusion model's stream came from the second expert only because its events were held.
func TestStreamAnsweredWithoutAnEventStream(t *testing.T) {
	u := newFailingUpstream(t)
	logs := &syncbuf.Buffer{}
	g := apitest.Start(t, apitest.Options{Config: failingConfig(t, u), LogHandler: slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})})
	c := g.Client(t)
	const credit = 50_000_000
	for _, model := range []string{"html_page", "json_error", "json_answer", "bare_json"} {
		for _, route := range []string{"/v1/chat/completions", "/v1/messages"} {
			t.Run(model+route, func(t *testing.T) {
				tenant := g.NewTenant(t, "acme-"+model+strings.ReplaceAll(route, "/", "-"), 0, credit)
				before := u.tries(model)
				var body string
				if route == "/v1/messages" {
					body = `{"model":"up-` + model + `-messages","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
				} else {
					body = chatBody("up-"+model, "hi", true, 64)
				}
				status, h, got := postRaw(t, c, g, tenant.Key, route, body)
				var env struct {
					Type  string
					Error struct{ Type, Message string }
				}
				_ = json.Unmarshal(got, &env)
				wantType, wantEnvelope := "upstream_error", ""
				if route == "/v1/messages" {
					wantType, wantEnvelope = "api_error", "error"
				}
				if status != http.StatusBadGateway || env.Type != wantEnvelope || env.Error.Type != wantType ||
					!strings.Contains(env.Error.Message, "not an event stream") || strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
					t.Errorf("status %d, %s, body %s: want the route's 502 (%s) saying the answer was not an event stream", status, h.Get("Content-Type"), got, wantType)
				}
				if strings.Contains(string(got), standKey) || strings.Contains(string(got), "proxy could not reach") || strings.Contains(string(got), "engine is overloaded") {
					t.Errorf("the client got the upstream's words: %s", got)
				}
				if n := u.tries(model) - before; n != 1 {
					t.Errorf("the upstream was asked %d times, want once", n)
				}
				recs := usageRecordsOf(t, g, tenant, 1)
				if len(recs) != 1 || recs[0].Status != "upstream_malformed" || recs[0].CostMicros != 0 {
					t.Errorf("usage records %+v: want one, upstream_malformed, billing nothing", recs)
				}
				if bal, err := g.Store.Balance(context.Background(), tenant.Account.ID); err != nil || bal != credit {
					t.Errorf("balance %d (%v), want %d", bal, err, credit)
				}
			})
		}
	}
	t.Run("the upstream's words in the log, without its key", func(t *testing.T) {
		l := logs.String()
		if !strings.Contains(l, "The engine is overloaded for key [the upstream key]") || !strings.Contains(l, "The proxy could not reach the model server") ||
			!strings.Contains(l, "The bare server failed") || strings.Contains(l, standKey) {
			t.Errorf("want the upstream's words in the log, its key elided; log:\n%.3000s", l)
		}
	})

	t.Run("fusion fails over", func(t *testing.T) {
		tenant := g.NewTenant(t, "acme-fusion", 0, credit)
		before := u.tries("html_page")
		status, h, got := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-html_page-fusion", "hi", true, 16))
		if status != http.StatusOK || !strings.Contains(h.Get("x-tollgate-expert"), "sim-general") ||
			!strings.Contains(string(got), "data: [DONE]") || strings.Contains(string(got), "error") {
			t.Errorf("status %d, expert %q, body %.500s: want the second expert's whole stream", status, h.Get("x-tollgate-expert"), got)
		}
		if n := u.tries("html_page") - before; n != 1 {
			t.Errorf("the first expert was asked %d times, want once", n)
		}
		if recs := usageRecordsOf(t, g, tenant, 1); len(recs) != 1 || recs[0].Status != "ok" || recs[0].UpstreamModel != "sim-general" {
			t.Errorf("usage records %+v: want one, the second expert's", recs)
		}
	})

	t.Run("a stream without a Content-Type is relayed", func(t *testing.T) {
		tenant := g.NewTenant(t, "acme-bare", 0, credit)
		for _, c2 := range []struct{ route, body, end string }{
			{"/v1/chat/completions", chatBody("up-bare_stream", "hi", true, 16), "data: [DONE]"},
			{"/v1/messages", `{"model":"up-bare_stream-messages","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "message_stop"},
		} {
			status, _, got := postRaw(t, c, g, tenant.Key, c2.route, c2.body)
			if status != http.StatusOK || !strings.Contains(string(got), "Bare hello") || !strings.Contains(string(got), c2.end) {
				t.Errorf("%s: status %d, body %.500s: want the whole stream", c2.route, status, got)
			}
		}
	})

	t.Run("SDKs", func(t *testing.T) {
		tenant := g.NewTenant(t, "acme-sdk", 0, credit)
		ctx := context.Background()
		oc := openAIClient(g, t, tenant.Key)
		stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "up-html_page",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		for stream.Next() {
			t.Errorf("openai-go: got a chunk %s", stream.Current().RawJSON())
		}
		var oe *openai.Error
		if err := stream.Err(); !errors.As(err, &oe) || oe.StatusCode != http.StatusBadGateway || !strings.Contains(oe.Message, "not an event stream") {
			t.Errorf("openai-go: %v: want an *openai.Error 502 saying the answer was not an event stream", err)
		}
		ac := anthropicClient(g, t, tenant.Key)
		ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "up-html_page-messages", MaxTokens: 16,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		for ms.Next() {
			t.Errorf("anthropic-sdk-go: got an event %s", ms.Current().RawJSON())
		}
		var ae *anthropic.Error
		if err := ms.Err(); !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway || !strings.Contains(ae.RawJSON(), "not an event stream") {
			t.Errorf("anthropic-sdk-go: %v: want an *anthropic.Error 502 saying the answer was not an event stream", err)
		}
	})
}

// TestStreamHeldOpeningIsBoundedInBytes: the events a stream holds back while another expert
// could still take over (before its first output) are bounded in bytes (1 MiB) as well as in
// number (64): the first expert's opening of 20 events of 100 KiB each, 2 MiB with no output,
// goes out to the client once past the bound, and its stream is then committed: cut before any
// output, it ends with the in-band error, the expert named in the head, rather than failing
// over to the second expert with 2 MiB held (64 events of up to 32 MiB could be held before,
// 2 GiB a request). The usage record names the first expert, and bills nothing: it produced no
// output.
func TestStreamHeldOpeningIsBoundedInBytes(t *testing.T) {
	u := newFailingUpstream(t)
	g := apitest.Start(t, apitest.Options{Config: failingConfig(t, u)})
	c := g.Client(t)
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	status, h, got := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-big_opening-fusion", "hi", true, 16))
	if status != http.StatusOK || !strings.Contains(h.Get("x-tollgate-expert"), "big_opening") ||
		strings.Count(string(got), "x_padding") != 20 || !strings.Contains(string(got), "the upstream stream ended unexpectedly") {
		t.Errorf("status %d, expert %q, %d padded events, body ends %q: want the first expert's 20 events, then its in-band error",
			status, h.Get("x-tollgate-expert"), strings.Count(string(got), "x_padding"), got[max(0, len(got)-300):])
	}
	recs := usageRecordsOf(t, g, tenant, 1)
	if len(recs) != 1 || recs[0].UpstreamModel != "big_opening" || recs[0].Status != "upstream_cut_off" || recs[0].CostMicros != 0 {
		t.Errorf("usage records %+v: want one, the first expert's cut stream, billing nothing", recs)
	}
}
