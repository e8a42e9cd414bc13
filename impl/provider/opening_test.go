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

// The opening of a streamed Messages answer and its events, as Anthropic's "Streaming Messages"
// page shows them.
const (
	messageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
	ping         = "event: ping\ndata: {\"type\": \"ping\"}\n\n"
	blockStart   = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	textDelta    = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
	overloaded   = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"
	invalid      = "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"invalid_request_error\", \"message\": \"prompt is too long\"}}\n\n"
	messageStop  = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

// streamingUpstream is a Messages upstream whose n-th answer (from 0) is answers[n] (the last
// repeats), sent in parts: each part is written and flushed, and a part "" waits for release.
func streamingUpstream(t *testing.T, release <-chan struct{}, answers ...[]string) (*Upstream, *int) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := answers[min(n, len(answers)-1)]
		n++
		w.Header().Set("Content-Type", "text/event-stream")
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
	return &Upstream{Name: "a", Kind: llm.FormatMessages, BaseURL: srv.URL + "/v1", OpeningWait: 5 * time.Second,
		Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}, &n
}

// TestOpeningErrorIsAFailedTry: an overloaded_error before any content is a failed try,
// retried, and the answer that follows is handed over byte for byte; when every try opens with
// it, the call fails as a 529 would. An error the request caused, or one after content, is the
// answer's, handed over as it came.
func TestOpeningErrorIsAFailedTry(t *testing.T) {
	ctx := context.Background()
	good := []string{messageStart, ping, blockStart, textDelta, messageStop}
	u, n := streamingUpstream(t, nil, []string{messageStart, overloaded}, []string{messageStart, ping, blockStart, overloaded}, good)
	res, attempts, err := u.Call(ctx, []byte(`{}`), true, nil)
	if err != nil || attempts != 3 {
		t.Fatalf("call: %d attempts, %v", attempts, err)
	}
	if body := readAll(t, res); body != strings.Join(good, "") {
		t.Errorf("the answer handed over:\n%s\nwant\n%s", body, strings.Join(good, ""))
	}

	u, n = streamingUpstream(t, nil, []string{messageStart, overloaded})
	_, attempts, err = u.Call(ctx, []byte(`{}`), true, nil)
	var e *apierror.Error
	if !errors.As(err, &e) || e.Kind != apierror.KindOverloaded || attempts != 3 || *n != 3 {
		t.Errorf("every try overloaded: %d attempts, %v (%+v)", attempts, err, e)
	}

	for _, parts := range [][]string{{messageStart, invalid}, {messageStart, blockStart, textDelta, overloaded}} {
		u, n = streamingUpstream(t, nil, parts)
		res, attempts, err = u.Call(ctx, []byte(`{}`), true, nil)
		if err != nil || attempts != 1 {
			t.Fatalf("call: %d attempts, %v", attempts, err)
		}
		if body := readAll(t, res); body != strings.Join(parts, "") {
			t.Errorf("the answer handed over:\n%s\nwant\n%s", body, strings.Join(parts, ""))
		}
	}
}

// TestSlowOpeningIsHandedOver: an answer whose first content takes longer than OpeningWait (a
// long prompt's prefill) is handed over when the wait ends, with what was read and the read in
// flight: the call returns while the upstream still holds its content back, and the body then
// reads every byte.
func TestSlowOpeningIsHandedOver(t *testing.T) {
	release := make(chan struct{})
	parts := []string{messageStart, ping, "", textDelta, messageStop}
	u, _ := streamingUpstream(t, release, parts)
	u.OpeningWait = 20 * time.Millisecond
	type result struct {
		res *http.Response
		err error
	}
	called := make(chan result, 1)
	go func() {
		res, _, err := u.Call(context.Background(), []byte(`{}`), true, nil)
		called <- result{res, err}
	}()
	var r result
	select {
	case r = <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the call waited for the upstream's content")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	close(release)
	if body := readAll(t, r.res); body != strings.Join(parts, "") {
		t.Errorf("the answer handed over:\n%s\nwant\n%s", body, strings.Join(parts, ""))
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
