package httpapi

import (
	"net/http/httptest"
	"testing"

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
