package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/llm"
)

// TestStreamHeadIsChecked: a chat upstream's 2xx answer to a streamed request is a stream when
// its Content-Type says text/event-stream (any case, with parameters), and when it has none and
// its first byte that is not blank can begin an event stream, or has not come within the wait (a
// long prefill: the call returns while the upstream holds its first event back, and the body
// then reads every byte). One with no Content-Type that begins as JSON, or one of another
// Content-Type, is a failed try that is not asked again of the same upstream, its error.type
// upstream_malformed, with the upstream's words (the key elided) in its error text only.
func TestStreamHeadIsChecked(t *testing.T) {
	const key = "sk-test-0123456789"
	const chunk = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}` + "\n\ndata: [DONE]\n\n"
	start := func(t *testing.T, contentType []string, release <-chan struct{}, parts ...string) (*Upstream, *int) {
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n++
			w.Header()["Content-Type"] = contentType
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for _, p := range parts {
				if p == "" {
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
					continue
				}
				io.WriteString(w, p)
				w.(http.Flusher).Flush()
			}
		}))
		t.Cleanup(srv.Close)
		return &Upstream{Name: "a", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: key, OpeningWait: 20 * time.Millisecond,
			Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}, &n
	}
	ctx := context.Background()

	for _, c := range []struct {
		name        string
		contentType []string
		parts       []string
	}{
		{"event stream", []string{"TEXT/Event-Stream ; charset=utf-8"}, []string{chunk}},
		{"none, a stream", nil, []string{"\r\n", ": ok\n\n" + chunk}},
		{"none, a slow stream", nil, []string{"", chunk}},
		{"text/plain, a stream", []string{"text/plain; charset=utf-8"}, []string{chunk}},
		{"octet-stream, a stream", []string{"application/octet-stream"}, []string{"\n" + chunk}},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			u, _ := start(t, c.contentType, release, c.parts...)
			res, attempts, err := u.Call(ctx, []byte(`{}`), true, nil)
			close(release)
			if err != nil || attempts != 1 {
				t.Fatalf("call: %d attempts, %v", attempts, err)
			}
			if body := readAll(t, res); body != strings.Join(c.parts, "") {
				t.Errorf("the answer handed over:\n%q\nwant\n%q", body, strings.Join(c.parts, ""))
			}
		})
	}
	for _, c := range []struct {
		name        string
		contentType []string
		parts       []string
	}{
		{"none, JSON", nil, []string{"\n", `{"error":{"message":"bad key ` + key + `","type":"server_error"}}`}},
		{"JSON", []string{"application/json"}, []string{`{"error":{"message":"bad key ` + key + `","type":"server_error"}}`}},
		{"HTML", []string{"text/html"}, []string{`<html>bad key ` + key + `</html>`}},
		{"problem JSON", []string{"application/problem+json"}, []string{`{"title":"bad key ` + key + `"}`}},
		{"text/plain, a page", []string{"text/plain"}, []string{`bad key ` + key}},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, n := start(t, c.contentType, nil, c.parts...)
			_, attempts, err := u.Call(ctx, []byte(`{}`), true, nil)
			var e *apierror.Error
			if !errors.As(err, &e) || e.Kind != apierror.KindUpstream || !strings.Contains(e.Message, "not an event stream") ||
				attempts != 1 || *n != 1 || !Retryable(err) || ErrorType(err) != "upstream_malformed" {
				t.Fatalf("%d attempts, %d asked, %v (%+v, error.type %q): want one failed try, upstream_malformed, another upstream to be tried", attempts, *n, err, e, ErrorType(err))
			}
			if !strings.Contains(err.Error(), "bad key [the upstream key]") || strings.Contains(err.Error(), key) || strings.Contains(e.Message, "bad key") {
				t.Errorf("error text %q, client's message %q: want the upstream's words, its key elided, in the text only", err.Error(), e.Message)
			}
		})
	}
}
