package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestRefusedHeadAnswersInTheRoutesEnvelope: a request head the server refuses before any
// route (a bare CR in a header value, both Content-Length and Transfer-Encoding) is answered
// in the envelope of the route its target names, as the route's own errors are: the Messages
// envelope for /v1/messages and below (in origin or absolute form, with a query), a JSON-RPC error with
// a null id for /api/mcp, the chat-completions envelope elsewhere and when there is no target
// to read. Every refused head was answered in the chat-completions envelope, which an
// Anthropic client does not expect (task h6).
func TestRefusedHeadAnswersInTheRoutesEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	const crReason = "the request could not be read as HTTP/1.1: the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"
	const bothReason = "the request could not be read as HTTP/1.1: the request has both Content-Length and Transfer-Encoding"
	withCR := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + tenant.Key + "\r\r\nContent-Length: 2\r\n\r\n{}"
	}
	both := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	}
	cases := []struct {
		name, send, schema, message string
	}{
		{"messages, a CR", withCR("/v1/messages"), "AnthropicError", crReason},
		{"messages, both lengths", both("/v1/messages?beta=true"), "AnthropicError", bothReason},
		{"messages, absolute form", "POST http://x/v1/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", "AnthropicError",
			"the request could not be read as HTTP/1.1: missing required Host header"},
		{"count tokens", withCR("/v1/messages/count_tokens"), "AnthropicError", crReason},
		{"chat", withCR("/v1/chat/completions"), "OpenAIError", crReason},
		{"responses, both lengths", both("/v1/responses"), "OpenAIError", bothReason},
		{"no target", "NOT-HTTP\r\n\r\n", "OpenAIError", "the request could not be read as HTTP/1.1"},
		{"mcp", withCR("/api/mcp"), "", "invalid request: " + crReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := sendRaw(t, g.URL, tc.send)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
				t.Fatalf("got %d %q close=%v %s, want 400 in JSON and Connection: close", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Close, body)
			}
			var env struct {
				Type    string `json:"type"`
				JSONRPC string `json:"jsonrpc"`
				ID      any    `json:"id"`
				Error   struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    any    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatalf("not JSON: %v %s", err, body)
			}
			switch tc.schema {
			case "":
				if env.JSONRPC != "2.0" || env.ID != nil || env.Error.Code != float64(-32600) || env.Error.Message != tc.message {
					t.Errorf("%s, want a JSON-RPC Invalid Request with a null id saying %q", body, tc.message)
				}
			case "AnthropicError":
				apitest.ValidateSchema(t, tc.schema, body)
				if env.Type != "error" || env.Error.Type != "invalid_request_error" || env.Error.Message != tc.message {
					t.Errorf("%s, want the Messages envelope saying %q", body, tc.message)
				}
			default:
				apitest.ValidateSchema(t, tc.schema, body)
				if env.Type != "" || env.Error.Type != "invalid_request_error" || env.Error.Code != "bad_request" || env.Error.Message != tc.message {
					t.Errorf("%s, want the chat-completions envelope saying %q", body, tc.message)
				}
			}
		})
	}
}

// TestAnthropicSDKReadsAHeadTooLarge: the Anthropic SDK, sending a head over the server's limit
// to /v1/messages, surfaces the 431 as an APIError of type invalid_request_error whose body is
// the Messages envelope saying what was wrong (it was the chat-completions envelope, task h6).
func TestAnthropicSDKReadsAHeadTooLarge(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	client := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAuthToken(tenant.Key), aoption.WithAPIKey(""),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}),
		aoption.WithHeader("X-Filler", strings.Repeat("f", 1<<20+16<<10)))
	_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{
		Model: "service-flint-base", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("got %v, want an APIError", err)
	}
	body := []byte(apiErr.RawJSON())
	apitest.ValidateSchema(t, "AnthropicError", body)
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	if apiErr.StatusCode != http.StatusRequestHeaderFieldsTooLarge || apiErr.Type() != "invalid_request_error" || env.Type != "error" ||
		!strings.HasPrefix(env.Error.Message, "the request head (request line and headers) is larger than the server accepts") {
		t.Errorf("APIError %d of type %q, body %s; want 431, invalid_request_error and the Messages envelope", apiErr.StatusCode, apiErr.Type(), body)
	}
}

// sendRaw writes request to the gateway at base on a connection of its own and reads the one
// answer.
func sendRaw(t *testing.T, base, request string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a guard
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}
