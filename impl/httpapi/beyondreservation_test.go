package httpapi_test

import (
	"testing"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/price"
)

// TestBillBeyondTheReservationIsCharged: an upstream that bills far more input than the
// reservation's estimate (three bytes a token) assumed, as a provider does for text made to be
// dense (docs/billing.md: digits and punctuation in turn are one token a byte), is charged its
// whole bill out of the gateway's credit hold on an account with credit to spare, on a JSON
// answer and a stream: the record holds the provider's counts at their price with nothing
// waived. Before, the charge was clamped to the reservation and the rest waived: 780 of the
// 804 micro-units billed.
func TestBillBeyondTheReservationIsCharged(t *testing.T) {
	usage := `"usage":{"prompt_tokens":2000,"completion_tokens":2,"total_tokens":2002}`
	for _, stream := range []bool{false, true} {
		body, contentType := `{"id":"chatcmpl-d1","object":"chat.completion","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],`+usage+`}`, "application/json"
		if stream {
			contentType = "text/event-stream"
			body = `data: {"id":"chatcmpl-d1","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}

data: {"id":"chatcmpl-d1","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"chatcmpl-d1","object":"chat.completion.chunk","created":1764777600,"model":"gpt-4.1-mini","choices":[],` + usage + `}

data: [DONE]

`
		}
		g, tenant := standInGatewayWith(t, "dense", config.KindOpenAIChat, cannedUpstream(t, contentType, body), apitest.Options{ShortReservations: true})
		// Six bytes of digits and punctuation, which the reservation estimates at two tokens.
		req := `{"model":"dense-chat","max_tokens":2,"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `,"messages":[{"role":"user","content":"1!2@3#"}]}`
		if status, out := post(t, g, tenant.Key, "/v1/chat/completions", req); status != 200 {
			t.Fatalf("stream %v: status %d: %s", stream, status, out)
		}
		rec := latestUsage(t, g, tenant.Account, 1)
		checkReproducible(t, rec)
		full := price.Cost(rec.Tokens(), *rec.Price).Total()
		if rec.InputTokens != 2000 || rec.CostMicros != full || rec.WaivedMicros != 0 {
			t.Errorf("stream %v: input %d, cost %d, waived %d; want 2,000 tokens billed whole, %d", stream, rec.InputTokens, rec.CostMicros, rec.WaivedMicros, full)
		}
		if s := g.Meter.CreditStats(); s.BeyondReservationRequests != 1 || s.WaivedRequests != 0 {
			t.Errorf("stream %v: credit stats %+v, want one request charged beyond its reservation", stream, s)
		}
	}
}
