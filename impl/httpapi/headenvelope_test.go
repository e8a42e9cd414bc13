package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestRefusedHeadAnswersInTheRoutesEnvelope: a request head the server refuses before any
// route (a bare CR in a header value, both Content-Length and Transfer-Encoding, an unknown
// transfer coding, another HTTP version) is answered in the envelope of the route its target
// names, as the route's own errors are, with x-should-retry: false (the same head is refused
// again): the Messages envelope for /v1/messages and below (in origin or absolute form, with
// a query), a JSON-RPC error with a null id for /api/mcp, the chat-completions envelope
// elsewhere and when there is no target to read. A path no route serves gets the envelope of
// its 404 (the Messages one for /messages, whose sender is most likely an Anthropic SDK given
// a base URL ending in /v1). Each answer is checked against its operation's documented
// response (an unknown path's and a target-less one's against the envelope's schema). Every
// refused head was answered in the chat-completions envelope once (task h6); the refusals
// carried no x-should-retry, so the SDKs sent a 501 or 505's request three times, a head
// handed to net/http at its request line (absolute form, HTTP/1.0) lost the name of the
// header its CR was in, an unknown path's refusal came in the chat-completions envelope where
// its 404 came in the Messages one, and no operation documented 431, 501 or 505.
func TestRefusedHeadAnswersInTheRoutesEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	const cantRead = "the request could not be read as HTTP/1.1"
	const crReason = cantRead + ": the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"
	const bothReason = cantRead + ": the request has both Content-Length and Transfer-Encoding"
	const codingReason = cantRead + ": unsupported transfer encoding"
	const versionReason = cantRead + ": unsupported protocol version"
	withCR := func(line string) string {
		return line + "\r\nHost: x\r\nX-Api-Key: " + tenant.Key + "\r\r\nContent-Length: 2\r\n\r\n{}"
	}
	both := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	}
	gzipped := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nTransfer-Encoding: gzip\r\n\r\n"
	}
	version := func(target string) string {
		return "POST " + target + " HTTP/3.0\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nContent-Length: 2\r\n\r\n{}"
	}
	cases := []struct {
		name, send string
		status     int
		// envelope is the answer's: "messages", "chat" or "mcp"; op the operation that
		// documents it ("" for a path no route serves: its envelope's schema is checked).
		envelope, op, message string
	}{
		{"messages, a CR", withCR("POST /v1/messages HTTP/1.1"), 400, "messages", "POST /v1/messages", crReason},
		{"messages, a CR, absolute form", withCR("POST http://x/v1/messages HTTP/1.1"), 400, "messages", "POST /v1/messages", crReason},
		{"messages, a CR, HTTP/1.0", withCR("POST /v1/messages HTTP/1.0"), 400, "messages", "POST /v1/messages", crReason},
		{"messages, both lengths", both("/v1/messages?beta=true"), 400, "messages", "POST /v1/messages", bothReason},
		{"messages, absolute form", "POST http://x/v1/messages HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, "messages", "POST /v1/messages",
			cantRead + ": missing required Host header"},
		{"messages, an unknown coding", gzipped("/v1/messages"), 501, "messages", "POST /v1/messages", codingReason},
		{"messages, another version", version("/v1/messages"), 505, "messages", "POST /v1/messages", versionReason},
		{"count tokens", withCR("POST /v1/messages/count_tokens HTTP/1.1"), 400, "messages", "POST /v1/messages/count_tokens", crReason},
		{"count tokens, an unknown coding", gzipped("/v1/messages/count_tokens"), 501, "messages", "POST /v1/messages/count_tokens", codingReason},
		{"chat", withCR("POST /v1/chat/completions HTTP/1.1"), 400, "chat", "POST /v1/chat/completions", crReason},
		{"chat, an unknown coding", gzipped("/v1/chat/completions"), 501, "chat", "POST /v1/chat/completions", codingReason},
		{"chat, another version", version("/v1/chat/completions"), 505, "chat", "POST /v1/chat/completions", versionReason},
		{"responses, both lengths", both("/v1/responses"), 400, "chat", "POST /v1/responses", bothReason},
		{"responses, another version", version("/v1/responses"), 505, "chat", "POST /v1/responses", versionReason},
		{"mcp", withCR("POST /api/mcp HTTP/1.1"), 400, "mcp", "POST /api/mcp", "invalid request: " + crReason},
		{"mcp, an unknown coding", gzipped("/api/mcp"), 501, "mcp", "POST /api/mcp", "invalid request: " + codingReason},
		{"mcp, another version", version("/api/mcp"), 505, "mcp", "POST /api/mcp", "invalid request: " + versionReason},
		{"no target", "NOT-HTTP\r\n\r\n", 400, "chat", "", cantRead},
		{"an unknown path an Anthropic SDK made", withCR("POST /messages HTTP/1.1"), 400, "messages", "", crReason},
		{"an unknown path under another prefix", version("/anthropic/v1/messages"), 505, "messages", "", versionReason},
		{"an unknown path", withCR("POST /v2/nothing HTTP/1.1"), 400, "chat", "", crReason},
	}
	codes := map[int]string{400: "bad_request", 501: "not_implemented", 505: "http_version_not_supported"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := sendRaw(t, g.URL, tc.send)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
				t.Fatalf("got %d %q close=%v %s, want %d in JSON and Connection: close", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Close, body, tc.status)
			}
			if got := resp.Header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("x-should-retry %q, want false: the same head is refused again", got)
			}
			env := readEnvelope(t, body)
			switch tc.envelope {
			case "mcp":
				if env.JSONRPC != "2.0" || env.ID != nil || env.Error.Code != float64(-32600) || env.Error.Message != tc.message {
					t.Errorf("%s, want a JSON-RPC Invalid Request with a null id saying %q", body, tc.message)
				}
			case "messages":
				if env.Type != "error" || env.Error.Type != "invalid_request_error" || env.Error.Message != tc.message {
					t.Errorf("%s, want the Messages envelope saying %q", body, tc.message)
				}
			default:
				if env.Type != "" || env.Error.Type != "invalid_request_error" || env.Error.Code != codes[tc.status] || env.Error.Message != tc.message {
					t.Errorf("%s, want the chat-completions envelope with code %q saying %q", body, codes[tc.status], tc.message)
				}
			}
			if tc.op != "" {
				apitest.ValidateAnswer(t, tc.op, resp, body)
				return
			}
			apitest.ValidateSchema(t, map[string]string{"messages": "AnthropicError", "chat": "OpenAIError"}[tc.envelope], body)
			if tc.send == "NOT-HTTP\r\n\r\n" {
				return
			}
			// The path's own 404, to a head that can be read, comes in the same envelope.
			path := strings.Fields(tc.send)[1]
			resp, body = sendRaw(t, g.URL, "POST "+path+" HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+tenant.Key+"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
			if got := readEnvelope(t, body); resp.StatusCode != http.StatusNotFound || (got.Type == "error") != (tc.envelope == "messages") {
				t.Errorf("the path's 404: %d %s, want it in the refusal's envelope (%s)", resp.StatusCode, body, tc.envelope)
			}
		})
	}
}

// envelopeFields are the fields of the three error envelopes that the head refusals' tests read.
type envelopeFields struct {
	Type    string `json:"type"`
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// readEnvelope reads an error answer's body as one of the three envelopes.
func readEnvelope(t *testing.T, body []byte) envelopeFields {
	t.Helper()
	var env envelopeFields
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not JSON: %v %s", err, body)
	}
	return env
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
	resp, body, _ := sendRawFrom(t, base, request)
	return resp, body
}

// sendRawFrom is sendRaw, and the address it sent from (the server's peer).
func sendRawFrom(t *testing.T, base, request string) (resp *http.Response, body []byte, from string) {
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
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	return resp, body, c.LocalAddr().String()
}

// TestLaterRefusedHeadAnswersInItsRoutesEnvelope: on a connection handed to net/http (its
// first request asked for an upgrade), a later head the server refuses is answered in the
// envelope of its own route, as a first head would be: the Messages envelope for
// /v1/messages, a JSON-RPC error for /api/mcp, whether it follows the first request's body in
// the same packet or comes after its answer. It came in the chat-completions envelope
// whatever its route (the server was told no target for a later head).
func TestLaterRefusedHeadAnswersInItsRoutesEnvelope(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	const crReason = "the request could not be read as HTTP/1.1: the X-Api-Key header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"
	first := "POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\nUpgrade: foo\r\nContent-Type: application/json\r\n" +
		"Content-Length: 83\r\n\r\n" + `{"model":"service-sonnet","messages":[{"role":"user","content":"GET /a HTTP/1.1"}]}`
	withCR := func(target string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + tenant.Key + "\r\r\nContent-Length: 2\r\n\r\n{}"
	}
	cases := []struct {
		name, target string
		pipelined    bool
	}{
		{"messages, after the answer", "/v1/messages", false},
		{"messages, pipelined", "/v1/messages", true},
		{"mcp, after the answer", "/api/mcp", false},
		{"mcp, pipelined", "/api/mcp", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a guard
			r := bufio.NewReader(c)
			send := first
			if tc.pipelined {
				send += withCR(tc.target)
			}
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the first request: %d %s", resp.StatusCode, body)
			}
			if !tc.pipelined {
				if _, err := io.WriteString(c, withCR(tc.target)); err != nil {
					t.Fatal(err)
				}
			}
			if resp, err = http.ReadResponse(r, nil); err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Should-Retry") != "false" {
				t.Fatalf("the later head: %d %s, want 400 with x-should-retry: false", resp.StatusCode, body)
			}
			env := readEnvelope(t, body)
			if tc.target == "/api/mcp" {
				if env.JSONRPC != "2.0" || env.ID != nil || env.Error.Code != float64(-32600) || env.Error.Message != "invalid request: "+crReason {
					t.Errorf("%s, want a JSON-RPC Invalid Request with a null id", body)
				}
			} else if env.Type != "error" || env.Error.Type != "invalid_request_error" || env.Error.Message != crReason {
				t.Errorf("%s, want the Messages envelope", body)
			}
			apitest.ValidateAnswer(t, "POST "+tc.target, resp, body)
		})
	}
}

// TestSDKsDoNotRetryARefusedHead: the official SDKs (anthropic-sdk-go, openai-go, with their
// default two retries), whose request reaches the gateway with a head it refuses with a 5xx (a
// front that adds a transfer coding the server does not implement, 501, or that speaks another
// HTTP version, 505), surface the refusal after ONE request: the answer says x-should-retry:
// false, which their retry logic obeys before the status. Without it they retried every 5xx,
// and the gateway saw the same refused request three times.
func TestSDKsDoNotRetryARefusedHead(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	fronts := []struct {
		name   string
		status int
		// rewrite is what the front does to the head the SDK wrote.
		rewrite func(head []byte) []byte
	}{
		{"a transfer coding", http.StatusNotImplemented, func(head []byte) []byte {
			return bytes.Replace(head, []byte("\r\nContent-Length: "), []byte("\r\nTransfer-Encoding: gzip\r\nX-Length: "), 1)
		}},
		{"another version", http.StatusHTTPVersionNotSupported, func(head []byte) []byte {
			return bytes.Replace(head, []byte(" HTTP/1.1\r\n"), []byte(" HTTP/3.0\r\n"), 1)
		}},
	}
	sdks := []struct {
		name string
		call func(client *http.Client) (status int, err error)
	}{
		{"anthropic-sdk-go", func(client *http.Client) (int, error) {
			c := anthropic.NewClient(aoption.WithBaseURL(g.URL), aoption.WithAPIKey(tenant.Key), aoption.WithHTTPClient(client))
			_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{
				Model: "service-flint-base", MaxTokens: 16,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) {
				return 0, err
			}
			return apiErr.StatusCode, nil
		}},
		{"openai-go", func(client *http.Client) (int, error) {
			c := openai.NewClient(option.WithBaseURL(g.URL+"/v1"), option.WithAPIKey(tenant.Key), option.WithHTTPClient(client))
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "service-flint-base", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				return 0, err
			}
			return apiErr.StatusCode, nil
		}},
	}
	for _, sdk := range sdks {
		for _, front := range fronts {
			t.Run(sdk.name+"/"+front.name, func(t *testing.T) {
				var requests atomic.Int64
				dialer := &net.Dialer{Timeout: 10 * time.Second}
				client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
					DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
						c, err := dialer.DialContext(ctx, network, addr)
						if err != nil {
							return nil, err
						}
						return &rewritingConn{Conn: c, rewrite: front.rewrite, requests: &requests}, nil
					},
				}}
				status, err := sdk.call(client)
				if err != nil {
					t.Fatalf("got %v, want an API error", err)
				}
				if status != front.status || requests.Load() != 1 {
					t.Errorf("status %d after %d requests, want %d after one", status, requests.Load(), front.status)
				}
			})
		}
	}
}

// rewritingConn is a front between a client and the gateway that rewrites each request head
// the client writes (in one write, as net/http's transport does for a small head) and counts
// the requests it passes on.
type rewritingConn struct {
	net.Conn
	rewrite  func(head []byte) []byte
	requests *atomic.Int64
}

func (c *rewritingConn) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(" HTTP/1.1\r\n")) {
		return c.Conn.Write(p)
	}
	c.requests.Add(1)
	if _, err := c.Conn.Write(c.rewrite(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
