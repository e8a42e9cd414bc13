package apierror

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestWireNamesRoundTrip(t *testing.T) {
	// Every kind's wire names classify back to the kind (the in-band and envelope paths agree).
	for k := KindInternal; k <= KindGatewayTimeout; k++ {
		typ, code := k.OpenAITypeCode()
		got := KindOfType(code)
		if code == "" || code == "not_found" || code == "forbidden" || code == "upstream_error" || code == "not_implemented" {
			got = KindOfType(typ)
		}
		switch k {
		case KindNotFound, KindForbidden, KindUpstream, KindNotImplemented, KindInvalidRequest,
			KindMethodNotAllowed, KindRequestTooLarge, KindConflict:
			// The chat-completions type of these is shared or tollgate's own.
		case KindUnavailable:
			// Said by an upstream, it means the upstream cannot take the request now.
			if got != KindOverloaded {
				t.Errorf("%v: OpenAI %q/%q classifies as %v, want overloaded", k, typ, code, got)
			}
		default:
			if got != k {
				t.Errorf("%v: OpenAI %q/%q classifies as %v", k, typ, code, got)
			}
		}
		if a := k.AnthropicType(); a == "" {
			t.Errorf("%v: no Messages type", k)
		}
	}
	if KindGatewayTimeout.Status() != 504 || KindGatewayTimeout.AnthropicType() != "timeout_error" || KindOfType("timeout_error") != KindGatewayTimeout {
		t.Error("the gateway timeout is not 504 timeout_error")
	}
	if KindOfType("overloaded_error") != KindOverloaded || KindOfType("429") != KindRateLimited || KindOfType("weird") != KindUpstream {
		t.Error("KindOfType")
	}
}

func TestMessages(t *testing.T) {
	if e := RateLimited(60, 1500*time.Millisecond); e.Kind.Status() != 429 || e.Message != "rate limit exceeded: this key allows 60 requests per minute; retry in 2 seconds" {
		t.Errorf("%+v", e)
	}
	if USD(1_250_000) != "$1.250000" || USD(-5) != "-$0.000005" {
		t.Error("USD")
	}
	if e := InsufficientCredit(10, 3); e.Kind.Status() != 402 || !strings.HasSuffix(e.Message, "hold. "+WorstCaseNote) {
		t.Errorf("402: %q", e.Message)
	}
	if As(nil).Kind != KindInternal {
		t.Error("As of a non-apierror is internal")
	}
}

func TestCodeOverridesTheKindsCode(t *testing.T) {
	e := &Error{Kind: KindInvalidRequest, Param: "input", Code: "context_length_exceeded"}
	if typ, code := e.OpenAITypeCode(); typ != "invalid_request_error" || code != "context_length_exceeded" {
		t.Errorf("with Code: %q %q", typ, code)
	}
	e = &Error{Kind: KindRateLimited}
	if typ, code := e.OpenAITypeCode(); typ != "rate_limit_error" || code != "rate_limit_exceeded" {
		t.Errorf("without Code: %q %q", typ, code)
	}
	if _, code := (&Error{Kind: KindInvalidRequest}).OpenAITypeCode(); code != "" {
		t.Errorf("an invalid request without Code has code %q, want none (null)", code)
	}
}

// Excerpt cuts quoted text to a bounded length, at a character boundary.
func TestExcerpt(t *testing.T) {
	long := strings.Repeat("é", 2000)
	if got := Excerpt(long, MaxQuotedLen); len(got) > MaxQuotedLen+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("excerpt of %d bytes: %d bytes, valid %v", len(long), len(got), utf8.ValidString(got))
	}
	if got := Excerpt("short", MaxQuotedLen); got != "short" {
		t.Errorf("a short message became %q", got)
	}
}

// An upstream's words reach the log text only; errors.As finds the client's error.
func TestWithUpstreamWords(t *testing.T) {
	client := &Error{Kind: KindRateLimited, Message: "the upstream is rate limited"}
	err := WithUpstreamWords(client, "Rate limit reached in organization org-x")
	var got *Error
	if !errors.As(err, &got) || got != client || As(err).Message != "the upstream is rate limited" {
		t.Errorf("errors.As found %v", got)
	}
	if !strings.Contains(err.Error(), "org-x") {
		t.Errorf("the log text %q lost the upstream's words", err.Error())
	}
}

// A dependency failure is a 503 with Retry-After whose client text never quotes the cause; the
// cause stays reachable for the logs and errors.Is.
func TestUnavailable(t *testing.T) {
	cause := errors.New("failed to connect to `host=/tmp/pgs123 user=postgres database=tollgate`: dial error")
	err := Unavailable("the database", cause)
	e := As(err)
	if e.Kind != KindUnavailable || e.Kind.Status() != 503 || e.RetryAfter != DependencyRetryAfter {
		t.Fatalf("%+v", e)
	}
	if strings.Contains(e.Message, "host=") || !strings.Contains(e.Message, "the database") || !strings.Contains(e.Message, "retry in 2 seconds") {
		t.Errorf("client message %q", e.Message)
	}
	if !strings.Contains(err.Error(), "dial error") || !errors.Is(err, cause) {
		t.Errorf("the cause is lost for the logs: %q", err.Error())
	}
	if !IsUnavailable(err) || !IsUnavailable(fmt.Errorf("authenticating: %w", err)) || IsUnavailable(cause) || IsUnavailable(nil) {
		t.Error("IsUnavailable")
	}
	if typ, code := e.OpenAITypeCode(); typ != "service_unavailable_error" || code != "dependency_unavailable" {
		t.Errorf("OpenAI %q %q", typ, code)
	}
	if KindUnavailable.AnthropicType() != "api_error" {
		t.Errorf("Messages %q", KindUnavailable.AnthropicType())
	}
	if As(Unavailable("the database", nil)).Kind != KindUnavailable {
		t.Error("without a cause")
	}
}
