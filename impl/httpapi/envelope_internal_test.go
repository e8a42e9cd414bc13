package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/apierror"
)

// TestEnvelopeCarriesParamAndCode: an error's Param and Code reach the chat-completions envelope
// (Code in place of the kind's code); the Messages envelope, which has neither, is unchanged.
func TestEnvelopeCarriesParamAndCode(t *testing.T) {
	refusal := &apierror.Error{Kind: apierror.KindInvalidRequest, Param: "input", Code: "context_length_exceeded",
		Message: "the upstream refused the request: too long"}
	cases := []struct {
		name string
		fam  family
		err  error
		want string
	}{
		{"openai with code", familyOpenAI, refusal,
			`{"error":{"message":"the upstream refused the request: too long","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`},
		{"openai without code", familyOpenAI, &apierror.Error{Kind: apierror.KindInvalidRequest, Message: "bad"},
			`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`},
		{"openai, the kind's code", familyOpenAI, &apierror.Error{Kind: apierror.KindRateLimited, Message: "the upstream is rate limited"},
			`{"error":{"message":"the upstream is rate limited","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`},
		{"anthropic ignores param and code", familyAnthropic, refusal,
			`{"type":"error","error":{"type":"invalid_request_error","message":"the upstream refused the request: too long"},"request_id":"req_1"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set(headerRequestID, "req_1")
			writeErrorFamily(w, tc.fam, tc.err)
			if got := w.Body.String(); got != tc.want+"\n" {
				t.Errorf("body %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRetryAfterIsBounded: a client is sent Retry-After (and retry-after-ms) of at most
// apierror.MaxClientRetryAfter, with x-should-retry: false when the wait was longer or retrying
// cannot help (trial D5: an upstream's Retry-After: 3600 went out as it was, with no
// x-should-retry, and SDKs without a bound would sleep an hour). wire-protocols.md §4.2.
func TestRetryAfterIsBounded(t *testing.T) {
	cases := []struct {
		name                        string
		err                         *apierror.Error
		retryAfter, ms, shouldRetry string
	}{
		{"a short wait is sent as it is", &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: 1500 * time.Millisecond}, "2", "1500", ""},
		{"the bound itself", &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: time.Minute}, "60", "60000", ""},
		{"an hour", &apierror.Error{Kind: apierror.KindRateLimited, RetryAfter: time.Hour}, "60", "60000", "false"},
		{"overload, 61 s", &apierror.Error{Kind: apierror.KindOverloaded, RetryAfter: 61 * time.Second}, "60", "60000", "false"},
		{"no retry, no wait", &apierror.Error{Kind: apierror.KindRateLimited, NoRetry: true}, "", "", "false"},
		{"no retry with a wait", &apierror.Error{Kind: apierror.KindRateLimited, NoRetry: true, RetryAfter: 5 * time.Second}, "5", "5000", "false"},
	}
	for _, tc := range cases {
		for _, fam := range []family{familyOpenAI, familyAnthropic, familyJSONRPC} {
			w := httptest.NewRecorder()
			writeErrorFamily(w, fam, tc.err)
			h := w.Header()
			if h.Get("Retry-After") != tc.retryAfter || h.Get("retry-after-ms") != tc.ms || h.Get("x-should-retry") != tc.shouldRetry {
				t.Errorf("%s (family %d): Retry-After %q, retry-after-ms %q, x-should-retry %q; want %q, %q, %q", tc.name, fam,
					h.Get("Retry-After"), h.Get("retry-after-ms"), h.Get("x-should-retry"), tc.retryAfter, tc.ms, tc.shouldRetry)
			}
		}
	}
}
