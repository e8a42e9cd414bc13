package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/impl/apierror"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/httpapi"
)

// TestWriteUnavailable: the answer `tollgate serve` gives before its gateway serves is the 503
// of a database outage in each route's envelope (chat-completions, Messages, JSON-RPC), with
// Retry-After and retry-after-ms, a request id (and request-id on Messages), the message as
// given, and no read of the request's body; each answer matches the OpenAPI document. A
// request whose client has gone gets nothing (499 recorded).
func TestWriteUnavailable(t *testing.T) {
	const message = "the gateway is starting; retry in 2 seconds"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteUnavailable(w, r, message, 0) // 0: apierror.DependencyRetryAfter
	}))
	defer srv.Close()
	c := &http.Client{Transport: apitest.NewValidatingTransport(t, http.DefaultTransport)}
	for _, r := range []request{
		{"POST", "/v1/chat/completions", `{"model":"service-flint","stream":true,"messages":[]}`},
		{"POST", "/v1/responses", `{"model":"service-flint","input":"hi"}`},
		{"POST", "/v1/messages", `{"model":"service-sonnet","max_tokens":1,"messages":[]}`},
		{"POST", "/v1/messages/count_tokens", `{"model":"service-sonnet","messages":[]}`},
		{"GET", "/v1/models", ""},
		{"GET", "/v1/models/service-flint", ""},
		{"GET", "/v1/credits", ""},
		{"GET", "/v1/agents", ""},
		{"POST", "/v1/agents", `{"slot":"main"}`},
		{"POST", "/v1/agents/main/messages", `{"text":"hi"}`},
		{"DELETE", "/v1/agents/main", ""},
		{"GET", "/v1/agents/main/events", ""},
		{"POST", "/api/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"GET", "/api/mcp", ""},
	} {
		status, h, body := do(t, c, srv.URL, r, map[string]string{"Authorization": "Bearer tgk_anything"})
		what := r.method + " " + r.path
		checkUnavailable(t, what, r.path, status, h, body)
		if !strings.Contains(string(body), message) {
			t.Errorf("%s: the message is not the one given: %s", what, body)
		}
		id := h.Get("x-request-id")
		if !strings.HasPrefix(id, "req_") {
			t.Errorf("%s: x-request-id %q", what, id)
		}
		if strings.HasPrefix(r.path, "/v1/messages") && (h.Get("request-id") != id || !strings.Contains(string(body), `"request_id":"`+id+`"`)) {
			t.Errorf("%s: request-id %q, body %s; want %s in both", what, h.Get("request-id"), body, id)
		}
	}

	// The client has gone: nothing to write.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	written := httpapi.WriteUnavailable(rec, httptest.NewRequestWithContext(ctx, "GET", "/v1/models", nil), message, apierror.DependencyRetryAfter)
	if written || rec.Flushed || rec.Body.Len() != 0 || rec.Result().Header.Get("Retry-After") != "" {
		t.Errorf("a client that left: written=%v %q, want nothing written", written, rec.Body.String())
	}
}
