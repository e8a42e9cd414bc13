package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/llm"
)

// hungDial is a transport whose connections are never made: each round trip waits until its
// request's context ends and fails as a dial does (an upstream host that drops SYNs).
type hungDial struct{}

func (hungDial) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: r.Context().Err()}
}

// TestPromptSent: a call none of whose tries could connect has sent no prompt, whether its
// tries were refused or the caller went away while a connection was being made (the review of
// trial D6: a dial that hung until the client left was billed as a prompt sent); once a try
// reached the upstream, the call has.
func TestPromptSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	noSleep := RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}
	refused := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: "http://" + closed + "/v1", Retry: noSleep}
	_, _, err = refused.Call(context.Background(), []byte(`{}`), false, nil)
	if err == nil || PromptSent(err) {
		t.Errorf("every connection refused: %v, PromptSent %v; want an error and false", err, PromptSent(err))
	}

	hung := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: "http://upstream.example/v1", Transport: hungDial{}, Retry: noSleep}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err = hung.Call(ctx, []byte(`{}`), false, nil)
	if !errors.Is(err, context.DeadlineExceeded) || PromptSent(err) {
		t.Errorf("the caller gone while connecting: %v, PromptSent %v; want the context's error and false", err, PromptSent(err))
	}

	srv, _ := silentUpstream(t)
	sent := &Upstream{Name: "p", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", Transport: &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond}, Retry: noSleep}
	if _, _, err = sent.Call(context.Background(), []byte(`{}`), false, nil); err == nil || !PromptSent(err) {
		t.Errorf("a request the upstream took: %v, PromptSent %v; want an error and true", err, PromptSent(err))
	}
}
