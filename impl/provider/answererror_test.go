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

// TestErrorInPlaceOfTheAnswerIsJudgedByItsKind: an error an upstream answers with a 2xx status in
// place of its answer is read for its kind (a numeric code, then the code, then the type) and
// judged as the status that kind stands for, whether it answered a streamed request or not: the
// request's fault is a 400 whose words (the key elided) the client gets, not tried elsewhere; an
// overload, a rate limit, a server error or a kind not known is a failed try, asked once of the
// upstream, another upstream to be tried, the client's error a 502 in the gateway's words; an
// account's own key refused is the refusal of that key. A body that is no error is not one.
// Before, a streamed request's error was "not an event stream" whatever its kind, a 502 tried
// elsewhere (an invalid request included).
func TestErrorInPlaceOfTheAnswerIsJudgedByItsKind(t *testing.T) {
	const key = "sk-test-0123456789"
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"error":{"message":"bad","type":"invalid_request_error","param":"temperature","code":null}}`, 400},
		{`{"error":{"message":"long","type":"invalid_request_error","code":"context_length_exceeded"}}`, 400},
		{`{"error":{"message":"no key","type":"invalid_request_error","code":"invalid_api_key"}}`, 401},
		{`{"error":{"message":"rl","type":"requests","code":"rate_limit_exceeded"}}`, 429},
		{`{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-day"}}`, 429},
		{`{"error":{"code":"502","message":"Provider returned error"}}`, 502},
		{`{"error":{"message":"busy","type":"server_error"}}`, 500},
		{`{"error":{"message":"what"}}`, 500},
		{`{"error":"Internal error"}`, 500},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529},
		{`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`, 400},
		{`{"type":"error","error":{"type":"not_found_error","message":"model"}}`, 404},
		{`{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}`, 400},
		{`{"id":"r1","object":"response","status":"failed","error":{"code":"server_error","message":"x"}}`, 500},
		{`{"id":"r1","object":"response","status":"failed","error":{"code":"invalid_prompt","message":"x"}}`, 400},
	} {
		if got, ok := errorStatus([]byte(c.body)); !ok || got != c.status {
			t.Errorf("%s: %d %v, want %d", c.body, got, ok, c.status)
		}
	}
	for _, body := range []string{
		`{"id":"c1","object":"chat.completion","choices":[]}`,
		`{"id":"r1","object":"response","status":"completed","error":null}`,
		`{"error":null,"choices":[]}`, `[1]`, `<html></html>`, ``,
	} {
		if s, ok := errorStatus([]byte(body)); ok {
			t.Errorf("%s: taken for an error standing for %d", body, s)
		}
	}

	start := func(t *testing.T, body string) (*Upstream, *int) {
		n := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n++
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return &Upstream{Name: "a", Kind: llm.FormatChat, BaseURL: srv.URL + "/v1", APIKey: key, OpeningWait: 20 * time.Millisecond,
			Retry: RetryPolicy{Sleep: func(context.Context, time.Duration) error { return nil }}}, &n
	}
	ctx := context.Background()
	invalid := `{"error":{"message":"Invalid 'temperature' for key ` + key + `","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	overloaded := `{"error":{"code":503,"message":"No instances for key ` + key + `"}}`

	t.Run("streamed, the request's fault", func(t *testing.T) {
		u, n := start(t, invalid)
		_, attempts, err := u.Call(ctx, []byte(`{}`), true, nil)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Kind != apierror.KindInvalidRequest || e.Param != "temperature" || e.Code != "invalid_value" ||
			!strings.Contains(e.Message, "the upstream refused the request: Invalid 'temperature' for key [the upstream key]") ||
			Retryable(err) || attempts != 1 || *n != 1 || !ErrorInAnswer(err) || JudgedStatus(err) != 400 {
			t.Fatalf("%d attempts, %d asked, %v (%+v): want the request's 400 with the upstream's words, not tried elsewhere", attempts, *n, err, e)
		}
	})
	t.Run("streamed, the upstream's fault", func(t *testing.T) {
		u, n := start(t, overloaded)
		_, attempts, err := u.Call(ctx, []byte(`{}`), true, nil)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Kind != apierror.KindUpstream || e.Message != "the upstream answered the streamed request with an error (an overload), not an event stream" ||
			!Retryable(err) || attempts != 1 || *n != 1 || ErrorType(err) != NotAStream || JudgedStatus(err) != 503 {
			t.Fatalf("%d attempts, %d asked, %v (%+v, error.type %q): want one failed try judged as a 503, a 502 in the gateway's words", attempts, *n, err, e, ErrorType(err))
		}
		if !strings.Contains(err.Error(), "No instances for key [the upstream key]") || strings.Contains(err.Error(), key) {
			t.Errorf("error text %q: want the upstream's words, its key elided", err.Error())
		}
	})
	t.Run("whole answers", func(t *testing.T) {
		u, _ := start(t, "")
		err := u.AnswerError(200, []byte(invalid), nil)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Kind != apierror.KindInvalidRequest || strings.Contains(e.Message, key) || Retryable(err) {
			t.Errorf("invalid: %v (%+v): want the request's 400, the key elided", err, e)
		}
		err = u.AnswerError(200, []byte(overloaded), nil)
		if !errors.As(err, &e) || e.Kind != apierror.KindUpstream || e.Message != "the upstream answered with an error (an overload) in place of the answer" || !Retryable(err) {
			t.Errorf("overloaded: %v (%+v): want a failed try, a 502 in the gateway's words", err, e)
		}
		cred := u.Credential("sk-account-0123456789")
		err = u.AnswerError(200, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-account-0123456789"}}`), cred)
		if !AccountKeyRefused(err) || strings.Contains(err.Error(), "sk-account-0123456789") {
			t.Errorf("the account's key refused: %v: want its refusal, the key elided", err)
		}
		if err := u.AnswerError(200, []byte(`{"id":"c1","object":"chat.completion","choices":[]}`), nil); err != nil {
			t.Errorf("an answer: %v", err)
		}
	})
}
