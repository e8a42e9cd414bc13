package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
	"github.com/tollgate/tollgate/impl/upstreamconn"
)

// upstream answers with the given statuses in turn (the last one repeats) and records delays.
func upstream(t *testing.T, statuses []int, header http.Header) (*Upstream, *atomic.Int32, *[]time.Duration) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		status := statuses[min(i, len(statuses)-1)]
		for k, v := range header {
			w.Header()[k] = v
		}
		if status != 200 {
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"nope","type":"x"}}`)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	var slept []time.Duration
	u := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", Retry: RetryPolicy{
		Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	}}
	return u, &n, &slept
}

func TestRetryThenSuccess(t *testing.T) {
	u, n, slept := upstream(t, []int{429, 502, 200}, nil)
	res, attempts, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	if err != nil || attempts != 3 || n.Load() != 3 {
		t.Fatalf("attempts %d, calls %d, err %v", attempts, n.Load(), err)
	}
	res.Body.Close()
	if len(*slept) != 2 || (*slept)[0] > 250*time.Millisecond || (*slept)[0] < 187*time.Millisecond || (*slept)[1] < 375*time.Millisecond {
		t.Errorf("backoff %v: want ~250ms then ~500ms, minus up to a quarter", *slept)
	}
}

func TestRetryAfterHonouredAndStatusKept(t *testing.T) {
	u, n, slept := upstream(t, []int{429}, http.Header{"Retry-After": {"2"}})
	_, attempts, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Kind != apierror.KindRateLimited || e.RetryAfter != 2*time.Second || attempts != 3 || n.Load() != 3 {
		t.Fatalf("err %#v attempts %d", err, attempts)
	}
	if (*slept)[0] != 2*time.Second || !Retryable(err) {
		t.Errorf("slept %v", *slept)
	}
	// A Retry-After longer than the policy allows is not waited for.
	u2, n2, _ := upstream(t, []int{529}, http.Header{"Retry-After": {"60"}})
	_, _, err = u2.Call(context.Background(), []byte(`{}`), false, nil)
	if !errors.As(err, &e) || e.Kind != apierror.KindOverloaded || n2.Load() != 1 {
		t.Fatalf("long Retry-After: %v after %d calls", err, n2.Load())
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	u, n, _ := upstream(t, []int{400}, nil)
	_, _, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Kind != apierror.KindInvalidRequest || n.Load() != 1 || Retryable(err) {
		t.Fatalf("400: %v after %d calls", err, n.Load())
	}
	u, n, _ = upstream(t, []int{401}, nil)
	_, _, err = u.Call(context.Background(), []byte(`{}`), false, nil)
	if !errors.As(err, &e) || e.Kind != apierror.KindUpstream || n.Load() != 1 {
		t.Fatalf("401 from the upstream is the gateway's problem, a 502: %v", err)
	}
}

func TestConnectionFailureIsRetried(t *testing.T) {
	u := &Upstream{Kind: llm.FormatChat, BaseURL: "http://127.0.0.1:1/v1", Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}
	_, attempts, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	var e *apierror.Error
	if attempts != 3 || !errors.As(err, &e) || e.Kind != apierror.KindUpstream {
		t.Fatalf("attempts %d err %v", attempts, err)
	}
}

func TestEndpointsAndHeaders(t *testing.T) {
	cfg := config.Default()
	ups := FromConfig(cfg, "http://127.0.0.1:9", nil)
	want := map[string]string{
		"sim-openai-chat":      "http://127.0.0.1:9/v1/chat/completions",
		"sim-openai-responses": "http://127.0.0.1:9/v1/responses",
		"sim-anthropic":        "http://127.0.0.1:9/v1/messages",
	}
	for name, url := range want {
		if got := ups[name].Endpoint(); got != url {
			t.Errorf("%s: %s, want %s", name, got, url)
		}
	}
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", r.Header.Get("Accept")) // a stream's answer is one (checkStreamHead)
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	a := &Upstream{Kind: llm.FormatMessages, BaseURL: srv.URL, APIKey: "sk-ant"}
	res, _, err := a.Call(context.Background(), []byte(`{}`), true, http.Header{"Anthropic-Beta": {"b1"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got.Get("x-api-key") != "sk-ant" || got.Get("anthropic-version") != "2023-06-01" || got.Get("anthropic-beta") != "b1" || got.Get("Authorization") != "" {
		t.Errorf("anthropic headers %v", got)
	}
	// The headers every call shares are built once: one call's forwarded headers must not reach
	// the next call.
	res, _, err = a.Call(context.Background(), []byte(`{}`), true, http.Header{"Anthropic-Version": {"2023-01-01"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got.Get("anthropic-version") != "2023-01-01" || got.Get("anthropic-beta") != "" || got.Get("Accept") != "text/event-stream" {
		t.Errorf("second anthropic call's headers %v", got)
	}
	o := &Upstream{Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: "sk-oa"}
	res, _, err = o.Call(context.Background(), []byte(`{}`), false, http.Header{"Anthropic-Beta": {"b1"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got.Get("Authorization") != "Bearer sk-oa" || got.Get("anthropic-beta") != "" || got.Get("Accept") != "application/json" ||
		got.Get("Content-Type") != "application/json" {
		t.Errorf("openai headers %v", got)
	}
}

// TestAccountCredential: a call with an account's credential carries the account's key in the
// provider kind's header (x-api-key for Messages, Authorization: Bearer otherwise) in place of
// the operator's, streamed or not; the operator's calls before and after keep the operator's.
// The upstream's 401 of the account's key is its own error (AccountKeyRefused: the provider
// named, the operator's key not tried), not retried; the same 401 of the operator's key is not
// one.
func TestAccountCredential(t *testing.T) {
	var got http.Header
	status := 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", r.Header.Get("Accept")) // a stream's answer is one (checkStreamHead)
		w.WriteHeader(status)
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	call := func(u *Upstream, stream bool, cred *Credential) error {
		t.Helper()
		res, _, err := u.CallObserved(context.Background(), []byte(`{}`), stream, nil, nil, cred)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	a := &Upstream{Name: "anthropic", Kind: llm.FormatMessages, BaseURL: srv.URL, APIKey: "sk-operator", OpeningWait: -1}
	o := &Upstream{Name: "openai", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: "sk-operator"}
	for _, stream := range []bool{false, true} {
		for _, c := range []struct {
			u      *Upstream
			header string
			own    string
		}{{a, "X-Api-Key", "sk-account"}, {o, "Authorization", "Bearer sk-account"}} {
			cred := c.u.Credential("sk-account")
			if err := call(c.u, stream, cred); err != nil {
				t.Fatal(err)
			}
			if got.Get(c.header) != c.own || len(got.Values("X-Api-Key"))+len(got.Values("Authorization")) != 1 {
				t.Errorf("%s (stream %v) with the account's credential: %v", c.u.Name, stream, got)
			}
			if err := call(c.u, stream, nil); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(got.Get(c.header), "sk-operator") {
				t.Errorf("%s (stream %v), the operator's call after the account's: %v", c.u.Name, stream, got)
			}
		}
	}
	status = http.StatusUnauthorized
	err := call(o, false, o.Credential("sk-account"))
	var e *apierror.Error
	if !AccountKeyRefused(err) || !errors.As(err, &e) || !strings.Contains(e.Message, "the provider openai refused this account's own upstream credential (HTTP 401)") {
		t.Errorf("the account's key refused: %v", err)
	}
	if err := call(o, false, nil); err == nil || AccountKeyRefused(err) {
		t.Errorf("the operator's key refused: %v", err)
	}
}

// TestRefusalNeverQuotesTheKey: an upstream that quotes the key it was sent back in its error
// (some OpenAI-compatible servers do; OpenAI masks it) does not put it in the call's error,
// whose text the gateway logs and traces and whose message a refused request's client gets:
// not an account's own key on its refusal (401), nor the operator's in a refusal of the
// request (400, whose words the client gets).
func TestRefusalNeverQuotesTheKey(t *testing.T) {
	status := http.StatusUnauthorized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"the key %s is not valid here","type":"invalid_request_error","param":%q,"code":"invalid_api_key"}}`, key, key)
	}))
	defer srv.Close()
	o := &Upstream{Name: "openai", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: "sk-operator-secret"}
	_, _, err := o.CallObserved(context.Background(), []byte(`{}`), false, nil, nil, o.Credential("sk-account-secret"))
	if err == nil || !AccountKeyRefused(err) || strings.Contains(err.Error(), "sk-account-secret") || !strings.Contains(err.Error(), "[the upstream key] is not valid") {
		t.Errorf("the account's key refused: %v", err)
	}
	status = http.StatusBadRequest
	_, _, err = o.CallObserved(context.Background(), []byte(`{}`), false, nil, nil, nil)
	var e *apierror.Error
	if err == nil || !errors.As(err, &e) || strings.Contains(err.Error(), "sk-operator-secret") || strings.Contains(e.Message+e.Param, "sk-operator-secret") {
		t.Errorf("the operator's key quoted in a refusal of the request: %v (%+v)", err, e)
	}
}

// TestUpstreamWordsNeverQuoteTheKey: what an upstream says when it quotes back the key it was
// sent never holds the key, nor its beginning: a body in neither envelope whose excerpt (200
// bytes) would cut the key (the account's refused with a 401, the operator's in a 400's
// message to the client), and a Messages stream that opens with an error event (the try's
// failure, logged and traced). The review of s15h6: the excerpt was cut before the key was
// looked for, and the opening's error event was not looked at at all.
func TestUpstreamWordsNeverQuoteTheKey(t *testing.T) {
	status := http.StatusUnauthorized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if k := r.Header.Get("X-Api-Key"); k != "" {
			key = k
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n")
			fmt.Fprintf(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"overloaded for the key %s\"}}\n\n", key)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s the key %s is not valid here", strings.Repeat("x", 171), key) // the excerpt ends 20 bytes into the key
	}))
	defer srv.Close()
	const account, operator = "sk-account-0123456789abcdefghijklmnopqrstuvwxyz", "sk-operator-0123456789abcdefghijklmnopqrstuvwxyz"
	leaks := func(text, key string) bool { return strings.Contains(text, key[:len("sk-account-01")]) }
	o := &Upstream{Name: "openai", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: operator}
	_, _, err := o.CallObserved(context.Background(), []byte(`{}`), false, nil, nil, o.Credential(account))
	if err == nil || !AccountKeyRefused(err) || leaks(err.Error(), account) {
		t.Errorf("the account's key refused in a plain body: %v", err)
	}
	status = http.StatusBadRequest
	_, _, err = o.CallObserved(context.Background(), []byte(`{}`), false, nil, nil, nil)
	var e *apierror.Error
	if err == nil || !errors.As(err, &e) || leaks(err.Error(), operator) || leaks(e.Message, operator) {
		t.Errorf("the operator's key quoted in a plain refusal of the request: %v (%+v)", err, e)
	}
	m := &Upstream{Name: "anthropic", Kind: llm.FormatMessages, BaseURL: srv.URL, APIKey: operator, Retry: RetryPolicy{MaxAttempts: 1}}
	for _, cred := range []*Credential{m.Credential(account), nil} {
		_, _, err = m.CallObserved(context.Background(), []byte(`{}`), true, nil, nil, cred)
		if err == nil || leaks(err.Error(), account) || leaks(err.Error(), operator) || !strings.Contains(err.Error(), "overloaded for the key [the upstream key]") {
			t.Errorf("a stream's opening error quoting the key (account's: %v): %v", cred != nil, err)
		}
	}
}

// TestRedirectIsNotFollowed: an upstream's redirect is a failed answer; the request and its key
// never go to the address it names.
func TestRedirectIsNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	u := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: "secret", Transport: NewTransport()}
	_, _, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Kind != apierror.KindUpstream {
		t.Fatalf("got %v, want an upstream error", err)
	}
	if elsewhere.Load() != 0 {
		t.Error("the redirect was followed")
	}
}

// TestUpstreamErrorsReachingTheClient: a refusal of the client's request (400, 413, 422) passes
// the upstream's message, param and code on; every other status is told in the gateway's own
// words, while the error's log text keeps what the upstream said.
func TestUpstreamErrorsReachingTheClient(t *testing.T) {
	const leaky = `Rate limit reached for gpt-4o in organization org-abc123 on tokens per min (TPM): Limit 30000, Used 29000`
	openAIBody := func(typ, param, code string) string {
		return `{"error":{"message":"` + leaky + `","type":"` + typ + `","param":"` + param + `","code":"` + code + `"}}`
	}
	const contextOverflow = `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`
	cases := []struct {
		name        string
		kind        llm.Format
		status      int
		body        string
		wantKind    apierror.Kind
		wantMessage string
		wantParam   string
		wantCode    string
	}{
		{"429", llm.FormatChat, 429, openAIBody("tokens", "", "rate_limit_exceeded"), apierror.KindRateLimited, "the upstream is rate limited", "", ""},
		{"503", llm.FormatChat, 503, openAIBody("server_error", "", "slow_down"), apierror.KindOverloaded, "the upstream is overloaded", "", ""},
		{"529 from Anthropic", llm.FormatMessages, 529, `{"type":"error","error":{"type":"overloaded_error","message":"` + leaky + `"}}`, apierror.KindOverloaded, "the upstream is overloaded", "", ""},
		{"500", llm.FormatChat, 500, openAIBody("server_error", "", "server_error"), apierror.KindUpstream, "the upstream failed (HTTP 500)", "", ""},
		{"502 in HTML", llm.FormatChat, 502, `<html>` + leaky + `</html>`, apierror.KindUpstream, "the upstream failed (HTTP 502)", "", ""},
		{"401", llm.FormatChat, 401, openAIBody("invalid_request_error", "", "invalid_api_key"), apierror.KindUpstream, "the upstream refused the gateway's credentials", "", ""},
		{"403", llm.FormatMessages, 403, `{"type":"error","error":{"type":"permission_error","message":"` + leaky + `"}}`, apierror.KindUpstream, "the upstream refused the gateway's credentials", "", ""},
		{"404", llm.FormatChat, 404, openAIBody("invalid_request_error", "model", "model_not_found"), apierror.KindUpstream, "the upstream does not know the configured model", "", ""},
		{"402 is the operator's", llm.FormatMessages, 402, `{"type":"error","error":{"type":"billing_error","message":"` + leaky + `"}}`, apierror.KindUpstream, "the upstream failed (HTTP 402)", "", ""},
		{"409", llm.FormatChat, 409, openAIBody("invalid_request_error", "x", "conflict"), apierror.KindUpstream, "the upstream failed (HTTP 409)", "", ""},
		{"504", llm.FormatMessages, 504, `{"type":"error","error":{"type":"timeout_error","message":"` + leaky + `"}}`, apierror.KindGatewayTimeout, "the upstream timed out (HTTP 504)", "", ""},
		{"400 context overflow", llm.FormatResponses, 400, contextOverflow, apierror.KindInvalidRequest,
			"the upstream refused the request: This model's maximum context length is 128000 tokens.", "input", "context_length_exceeded"},
		{"400 field path", llm.FormatChat, 400, `{"error":{"message":"bad name","type":"invalid_request_error","param":"tools[0].function.name","code":"invalid_value"}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad name", "tools[0].function.name", "invalid_value"},
		{"400 with null param and code", llm.FormatChat, 400, `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad", "", ""},
		{"400 from vLLM: numeric code", llm.FormatChat, 400, `{"error":{"message":"bad","type":"BadRequestError","param":null,"code":400}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad", "", ""},
		{"400 from LiteLLM: status string and None", llm.FormatChat, 400, `{"error":{"message":"bad","type":"None","param":"None","code":"400"}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad", "", ""},
		{"400 with junk param and code", llm.FormatChat, 400, `{"error":{"message":"bad","type":"invalid_request_error","param":"see http://x.example/ now","code":"a\nb"}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad", "", ""},
		{"400 with an overlong code", llm.FormatChat, 400, `{"error":{"message":"bad","type":"invalid_request_error","param":"` + strings.Repeat("p", maxErrorParamLen+1) + `","code":"` + strings.Repeat("c", maxErrorCodeLen+1) + `"}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: bad", "", ""},
		{"413 from Anthropic", llm.FormatMessages, 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: Request exceeds the maximum allowed number of bytes.", "", "request_too_large"},
		{"400 from Anthropic", llm.FormatMessages, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`, apierror.KindInvalidRequest,
			"the upstream refused the request: prompt is too long", "", ""},
		{"422 without an envelope", llm.FormatChat, 422, `unprocessable`, apierror.KindInvalidRequest, "the upstream refused the request: unprocessable", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			u := &Upstream{Name: "p", Kind: tc.kind, BaseURL: srv.URL + "/v1",
				Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}
			_, _, err := u.Call(context.Background(), []byte(`{}`), false, nil)
			var e *apierror.Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *apierror.Error", err)
			}
			if e.Kind != tc.wantKind || e.Message != tc.wantMessage || e.Param != tc.wantParam || e.Code != tc.wantCode {
				t.Errorf("got kind %v message %q param %q code %q\nwant kind %v message %q param %q code %q",
					e.Kind, e.Message, e.Param, e.Code, tc.wantKind, tc.wantMessage, tc.wantParam, tc.wantCode)
			}
			// Traces and metrics say what the upstream answered, not what the client gets
			// (trial h8 D21: a provider's 401 and 500 read as 502, its 503 as 529).
			if got := ErrorType(err); got != strconv.Itoa(tc.status) {
				t.Errorf("ErrorType %q, want the upstream's %d", got, tc.status)
			}
			if strings.Contains(tc.body, leaky) {
				if strings.Contains(e.Message, "org-abc123") {
					t.Errorf("the upstream's text reached the client: %q", e.Message)
				}
				if !strings.Contains(err.Error(), "org-abc123") {
					t.Errorf("the log text %q lost what the upstream said", err.Error())
				}
			}
		})
	}
}

// TestErrorTypeOfAConnectionFailure: an upstream that closes the connection without answering is
// error.type "connection"; an error that is no upstream call's has none.
func TestErrorTypeOfAConnectionFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	}))
	t.Cleanup(srv.Close)
	u := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1",
		Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}
	_, _, err := u.Call(context.Background(), []byte(`{}`), false, nil)
	if err == nil || ErrorType(err) != "connection" || apierror.As(err).Kind != apierror.KindUpstream {
		t.Errorf("a dropped connection: %v, error.type %q", err, ErrorType(err))
	}
	if got := ErrorType(apierror.Invalid("x", "y")); got != "" {
		t.Errorf("ErrorType of a gateway error: %q", got)
	}
}

// TestTraceContextReachesEveryTransport: a traced call carries the attempt span's traceparent,
// and never the caller's tracestate, to the upstream through every transport: net/http as
// such, the gateway's transport for a plain http:// upstream (impl/upstreamconn writes the
// header itself) and for an https:// one (net/http, the header added by the dispatch); an
// untraced call carries none, and the configured headers are not changed for the next call.
func TestTraceContextReachesEveryTransport(t *testing.T) {
	var got []string
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Traceparent")+"|"+r.Header.Get("Tracestate"))
		io.WriteString(w, "{}")
	})
	plain := httptest.NewServer(answer)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(answer)
	defer tlsSrv.Close()
	state, err := trace.ParseTraceState("vendor=caller-secret")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, TraceState: state,
	})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	gatewayTransport := NewTransport()
	for _, c := range []struct {
		name      string
		url       string
		transport http.RoundTripper
	}{
		{"net/http", plain.URL, http.DefaultTransport},
		{"the gateway's, http://", plain.URL, gatewayTransport},
		{"the gateway's, https://", tlsSrv.URL, &upstreamconn.SchemeDispatch{Plain: &upstreamconn.Transport{}, Other: tlsSrv.Client().Transport}},
	} {
		got = nil
		up := &Upstream{Kind: llm.FormatChat, BaseURL: c.url, APIKey: "sk", Transport: c.transport}
		for _, ctx := range []context.Context{traced, context.Background(), traced} {
			res, _, err := up.Call(ctx, []byte(`{}`), false, nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		want := []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01|", "|", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01|"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the upstream got traceparent|tracestate %q, want %q", c.name, got, want)
		}
	}
}

// statusObserver records each try's status and whether it failed.
type statusObserver struct{ tries []string }

func (o *statusObserver) StartTry(ctx context.Context, _ int) context.Context { return ctx }
func (o *statusObserver) EndTry(_ context.Context, n int, status int, err error) {
	o.tries = append(o.tries, fmt.Sprintf("%d:%d:%t", n, status, err != nil))
}

// TestTryStatusReachesTheObserverOnEveryTransport: each try's HTTP status is told to the
// observer (which puts it on the try's span as http.response.status_code) whichever transport
// made it: net/http, the gateway's for an http:// upstream, and net/http under the dispatch
// for an https:// one, which every hosted provider is (before, only the gateway's own
// transport noted it on the span: the tries of https upstreams had no status). A try that got
// no answer has none (0).
func TestTryStatusReachesTheObserverOnEveryTransport(t *testing.T) {
	calls := 0
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls%2 == 1 {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"error":{"message":"upstream down"}}`)
			return
		}
		io.WriteString(w, "{}")
	})
	plain := httptest.NewServer(answer)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(answer)
	defer tlsSrv.Close()
	noRetryWait := RetryPolicy{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, c := range []struct {
		name      string
		url       string
		transport http.RoundTripper
	}{
		{"net/http", plain.URL, http.DefaultTransport},
		{"the gateway's, http://", plain.URL, NewTransport()},
		{"the gateway's, https://", tlsSrv.URL, &upstreamconn.SchemeDispatch{Plain: &upstreamconn.Transport{}, Other: tlsSrv.Client().Transport}},
	} {
		calls = 0
		obs := &statusObserver{}
		up := &Upstream{Kind: llm.FormatChat, BaseURL: c.url, APIKey: "sk", Transport: c.transport, Retry: noRetryWait}
		res, _, err := up.CallObserved(context.Background(), []byte(`{}`), false, nil, obs, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if want := []string{"1:502:true", "2:200:false"}; !slices.Equal(obs.tries, want) {
			t.Errorf("%s: the observer was told %q, want %q", c.name, obs.tries, want)
		}
	}
	// No answer: the connection is refused.
	obs := &statusObserver{}
	up := &Upstream{Kind: llm.FormatChat, BaseURL: "http://127.0.0.1:1", APIKey: "sk", Transport: NewTransport(), Retry: RetryPolicy{MaxAttempts: 1}}
	if _, _, err := up.CallObserved(context.Background(), []byte(`{}`), false, nil, obs, nil); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if want := []string{"1:0:true"}; !slices.Equal(obs.tries, want) {
		t.Errorf("no answer: the observer was told %q, want %q", obs.tries, want)
	}
}
