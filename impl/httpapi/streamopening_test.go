package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// openingKey is the key the gateway sends the opening stand-in; its refusals quote it.
const openingKey = "sk-opening-0123456789abcdef"

// openingStandIn is an upstream whose streams, all 200 text/event-stream, end before any
// output, in the format of the path asked (chat, Responses, Messages), the case chosen by the
// request's model: "empty" sends no byte, "comments" only comments and blank lines, "opening"
// a format's opening and no content (chat a role-only chunk, Responses response.created, Messages
// message_start and a ping), and "refuses" the opening and then the format's in-band error
// refusing the request (invalid_request_error; Responses context_length_exceeded), quoting
// the key. It counts the requests of each case and path.
type openingStandIn struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

func newOpeningStandIn(t *testing.T) *openingStandIn {
	u := &openingStandIn{hits: map[string]int{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		format := "chat"
		switch {
		case strings.HasSuffix(r.URL.Path, "/responses"):
			format = "responses"
		case strings.HasSuffix(r.URL.Path, "/messages"):
			format = "messages"
		}
		u.mu.Lock()
		u.hits[req.Model+" "+format]++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		opening := map[string]string{
			"chat": `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
			"responses": "event: response.created\n" +
				`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"model":"up","status":"in_progress","output":[]}}` + "\n\n",
			"messages": "event: message_start\n" +
				`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"up","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}` + "\n\n" +
				"event: ping\ndata: {\"type\": \"ping\"}\n\n",
		}
		refusal := map[string]string{
			"chat":      `data: {"error":{"message":"Invalid 'temperature': out of range for key ` + openingKey + `","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}` + "\n\n",
			"responses": "event: error\n" + `data: {"type":"error","sequence_number":1,"code":"context_length_exceeded","message":"Your input exceeds the context window of this model (key ` + openingKey + `).","param":"input"}` + "\n\n",
			"messages":  "event: error\n" + `data: {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long for key ` + openingKey + `"}}` + "\n\n",
		}
		switch req.Model {
		case "empty":
		case "comments":
			_, _ = io.WriteString(w, ": hello\n\n\n: keep-alive\n\n")
		case "opening":
			_, _ = io.WriteString(w, opening[format])
		case "refuses":
			_, _ = io.WriteString(w, opening[format]+refusal[format])
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// asked is how many requests for case c in format the stand-in has had.
func (u *openingStandIn) asked(c, format string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[c+" "+format]
}

// openingCases are the stand-in's cases.
var openingCases = []string{"empty", "comments", "opening", "refuses"}

// openingConfig is moneyConfig with, for each of the stand-in's cases c, "open-<c>-chat" (a
// chat upstream), "open-<c>-responses" (a Responses upstream) and "open-<c>-messages" (a
// Messages upstream), each of one expert, and "open-<c>-fusion", a chat model whose first
// expert is the stand-in's c and whose second is the simulator.
func openingConfig(t *testing.T, u *openingStandIn) *config.Config {
	t.Helper()
	cfg := moneyConfig(t)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "open-chat", Kind: config.KindOpenAIChat, BaseURL: u.srv.URL + "/v1", APIKey: openingKey},
		config.Provider{Name: "open-responses", Kind: config.KindOpenAIResponses, BaseURL: u.srv.URL + "/v1", APIKey: openingKey},
		config.Provider{Name: "open-messages", Kind: config.KindAnthropicMessages, BaseURL: u.srv.URL, APIKey: openingKey},
		config.Provider{Name: "open-expert", Kind: config.KindOpenAIChat, BaseURL: u.srv.URL + "/v1", APIKey: openingKey})
	add := func(m config.Model) {
		m.OwnedBy, m.MaxOutputTokens = "test", 4096
		m.Price = config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}
		cfg.Models = append(cfg.Models, m)
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, m.ID)
	}
	for _, c := range openingCases {
		add(config.Model{ID: "open-" + c + "-chat", Family: config.FamilyChat, Backend: &config.Upstream{Provider: "open-chat", Model: c}})
		add(config.Model{ID: "open-" + c + "-responses", Family: config.FamilyChat, Backend: &config.Upstream{Provider: "open-responses", Model: c}})
		add(config.Model{ID: "open-" + c + "-messages", Family: config.FamilyMessages, Backend: &config.Upstream{Provider: "open-messages", Model: c}})
		add(config.Model{ID: "open-" + c + "-fusion", Family: config.FamilyChat, Experts: []config.Upstream{
			{Provider: "open-expert", Model: c, Strengths: []string{"general", "fast"}},
			{Provider: "sim-openai-chat", Model: "sim-general", Strengths: []string{"general"}},
		}})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestStreamEndingBeforeItsFirstOutputIsAFailedTry: an upstream that answers a streamed
// request 200 text/event-stream and then ends the stream before any output (no byte, only
// comments, or its opening alone: a role-only chat chunk, a Responses response.created,
// Messages' message_start and a ping) is a failed try, as an answer that is not an event
// stream is: a model of one expert answers the route's 502 in the gateway's words ("the
// upstream stream ended before its first output"), which openai-go (chat and Responses) and
// anthropic-sdk-go (Messages) return as a 502 API error from their streams with no event before
// it, the upstream asked once, one usage record upstream_cut_off at cost 0 and the reservation
// released (the credit holds one request's reservation, not two: one left held would make the
// next request a 402); a fusion model fails over unseen to its next expert, whose stream the
// client gets whole, its head naming that expert. An upstream that refuses the request in its
// stream before any output (an in-band invalid_request_error, or context_length_exceeded) is
// the 400 the same refusal before its head gets: its words (the key elided), no other expert
// asked, no usage record, the reservation released. Before, every one of them was a 200
// stream ending with the in-band error ("the upstream stream ended unexpectedly", or the
// refusal) for a model of one expert, whose head was committed at once, and for the fusion
// model's refusal.
func TestStreamEndingBeforeItsFirstOutputIsAFailedTry(t *testing.T) {
	u := newOpeningStandIn(t)
	g := apitest.Start(t, apitest.Options{Config: openingConfig(t, u)})
	ctx := context.Background()
	// One request's reservation (max tokens 1000 at 2 USD per million output tokens: about
	// 2,050 micro-units) and not two.
	const credit = 3_000
	const maxTokens = 1000
	for _, c := range openingCases {
		refused := c == "refuses"
		t.Run(c, func(t *testing.T) {
			tenant := g.NewTenant(t, "open-"+c, 0, credit)
			oc := openAIClient(g, t, tenant.Key)
			ac := anthropicClient(g, t, tenant.Key)
			// check asserts what a one-expert model's client got: err from the SDK's stream,
			// after events events.
			check := func(format string, events int, err error) {
				t.Helper()
				var status int
				var message string
				var oe *openai.Error
				var ae *anthropic.Error
				switch {
				case errors.As(err, &oe):
					status, message = oe.StatusCode, oe.Message
				case errors.As(err, &ae):
					status, message = ae.StatusCode, ae.RawJSON()
				}
				want, words := http.StatusBadGateway, "the upstream stream ended before its first output"
				if refused {
					want, words = http.StatusBadRequest, "the upstream refused the request"
				}
				if events != 0 || status != want || !strings.Contains(message, words) {
					t.Errorf("%s: %d events, then %v: want no event and the SDK's %d API error saying %q", format, events, err, want, words)
				}
				if strings.Contains(message, openingKey) {
					t.Errorf("%s: the client got the key the upstream was sent: %s", format, message)
				}
				if n := u.asked(c, format); n != 1 {
					t.Errorf("%s: the upstream was asked %d times, want once", format, n)
				}
			}

			stream := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "open-" + c + "-chat",
				MaxTokens: openai.Int(maxTokens), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			n := 0
			for stream.Next() {
				n++
			}
			check("chat", n, stream.Err())

			params := responsesParams("open-"+c+"-responses", "hi")
			params.MaxOutputTokens = openai.Int(maxTokens)
			rs := oc.Responses.NewStreaming(ctx, params)
			n = 0
			for rs.Next() {
				n++
			}
			check("responses", n, rs.Err())

			ms := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "open-" + c + "-messages", MaxTokens: maxTokens,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			n = 0
			for ms.Next() {
				n++
			}
			check("messages", n, ms.Err())

			// The fusion model: the next expert serves the stream, unless the request was refused.
			simBefore := g.Sim.TotalRequests()
			var raw *http.Response
			fs := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "open-" + c + "-fusion",
				MaxTokens: openai.Int(maxTokens), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}},
				option.WithResponseInto(&raw))
			var text strings.Builder
			for fs.Next() {
				for _, ch := range fs.Current().Choices {
					text.WriteString(ch.Delta.Content)
				}
			}
			var oe *openai.Error
			switch {
			case refused:
				if err := fs.Err(); !errors.As(err, &oe) || oe.StatusCode != http.StatusBadRequest || text.Len() != 0 || g.Sim.TotalRequests() != simBefore {
					t.Errorf("fusion: %q, then %v, the next expert asked %d times: want the 400 and no other expert asked", text.String(), err, g.Sim.TotalRequests()-simBefore)
				}
			default:
				if err := fs.Err(); err != nil || text.Len() == 0 || raw == nil || raw.Header.Get("x-tollgate-expert") != "sim-openai-chat/sim-general" {
					var expert string
					if raw != nil {
						expert = raw.Header.Get("x-tollgate-expert")
					}
					t.Errorf("fusion: %q, then %v, expert %q: want the next expert's whole stream, its head naming it", text.String(), err, expert)
				}
			}
			if n := u.asked(c, "chat"); n != 2 {
				t.Errorf("fusion: the first expert was asked %d times, want once", n-1)
			}

			recs := usageRecordsOf(t, g, tenant, 4)
			var cutOff, served int
			for _, r := range recs {
				switch {
				case r.Status == "upstream_cut_off" && r.CostMicros == 0 && r.UpstreamModel == c:
					cutOff++
				case r.Status == "ok" && r.UpstreamModel == "sim-general":
					served++
				default:
					t.Errorf("usage record %s by %s at %d micro-units", r.Status, r.UpstreamModel, r.CostMicros)
				}
			}
			if refused && len(recs) != 0 || !refused && (cutOff != 3 || served != 1) {
				t.Errorf("%d usage records (%d cut off at no cost, %d served): want none for a refusal, else three upstream_cut_off at cost 0 and the fusion model's", len(recs), cutOff, served)
			}
			checkBooks(t, g, tenant.Account, credit)
		})
	}
}
