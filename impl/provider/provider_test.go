package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/llm"
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone(); io.WriteString(w, "{}") }))
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
