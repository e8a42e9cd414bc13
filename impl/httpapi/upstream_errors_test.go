package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/store"
)

// failingUpstream is a stand-in provider whose answer is chosen by the request's upstream model
// (upstreamFailures); it counts the requests of each.
type failingUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits map[string]int
}

// upstreamFailures are the stand-in's models and what each answers.
var upstreamFailures = map[string]func(w http.ResponseWriter, r *http.Request){
	// endless_line starts a chat stream with one delta, then sends one data line without its
	// end, up to 100 MiB or until the gateway hangs up, and endless_event data lines of 1 KiB
	// that never end their event (no blank line); endlessEventWritten counts what they wrote
	// after the delta.
	"endless_line": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"endless_line","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there"},"finish_reason":null}]}`+"\n\ndata: ")
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent := 0; sent < 100<<20; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			endlessEventWritten.Add(int64(len(chunk)))
		}
	},
	"endless_event": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"endless_event","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello there"},"finish_reason":null}]}`+"\n\n")
		line := []byte("data: " + strings.Repeat("x", 1017) + "\n")
		for sent := 0; sent < 100<<20; sent += len(line) {
			if _, err := w.Write(line); err != nil {
				return
			}
			endlessEventWritten.Add(int64(len(line)))
		}
	},
	// silent takes the request and never answers it (until the gateway hangs up).
	"silent": func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
	// hourly answers 429 asking for an hour's wait (an hourly quota).
	"hourly": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests per hour","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	},
	// exhausted answers 429 with x-should-retry: false (an exhausted quota).
	"exhausted": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-should-retry", "false")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	},
	// html_page, json_error, json_answer and bare_json answer a stream's request 200 with
	// something other than an event stream: a proxy's page (text/html), a JSON error quoting
	// the key it was sent, a whole JSON answer (a server that ignored "stream"), and a JSON error
	// with no Content-Type at all. bare_stream is a good stream with no Content-Type (in the
	// format its route asks for).
	"html_page": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/HTML; charset=utf-8")
		_, _ = io.WriteString(w, "<html><head><title>Bad Gateway</title></head><body><h1>The proxy could not reach the model server</h1></body></html>")
	},
	"json_error": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"error":{"message":"The engine is overloaded for key `+standKey+`","type":"server_error"}}`)
	},
	"json_answer": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"json_answer","choices":[{"index":0,"message":{"role":"assistant","content":"A whole answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
	},
	"bare_json": func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // net/http would name one by sniffing the body
		_, _ = io.WriteString(w, "\n  "+`{"error":{"message":"The bare server failed","type":"server_error"}}`)
	},
	"bare_stream": func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		if strings.HasSuffix(r.URL.Path, "/messages") {
			_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"bare_stream\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"+
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Bare hello\"}}\n\n"+
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"+
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"bare_stream","choices":[{"index":0,"delta":{"role":"assistant","content":"Bare hello"},"finish_reason":null}]}`+"\n\n"+
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"bare_stream","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	},
	// big_opening opens a chat stream with 20 events of some 100 KiB each and no output (a
	// role-only chunk padded with a field of its own), 2 MiB in all, then cuts the stream.
	"big_opening": func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"big_opening","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}],"x_padding":"` + strings.Repeat("p", 100<<10) + `"}` + "\n\n"
		for range 20 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	},
}

// standKey is the key the gateway sends the stand-in's providers.
const standKey = "sk-stand-0123456789abcdef"

// endlessEventWritten counts the bytes of the endless event the stand-in has written.
var endlessEventWritten atomic.Int64

func newFailingUpstream(t *testing.T) *failingUpstream {
	u := &failingUpstream{hits: map[string]int{}}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		u.mu.Lock()
		u.hits[req.Model]++
		u.mu.Unlock()
		if answer, ok := upstreamFailures[req.Model]; ok {
			answer(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// tries is how many requests for model the stand-in has had.
func (u *failingUpstream) tries(model string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[model]
}

// failingConfig serves, beside moneyConfig's models, "up-<m>" (Chat) and "up-<m>-messages"
// (Messages) for each of the stand-in's models m, and "up-silent-fusion",
// "up-html_page-fusion" and "up-big_opening-fusion", whose first expert is the stand-in's
// silent, html_page or big_opening and whose second is the simulator.
func failingConfig(t *testing.T, u *failingUpstream) *config.Config {
	t.Helper()
	cfg := moneyConfig(t)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: "stand-chat", Kind: config.KindOpenAIChat, BaseURL: u.srv.URL + "/v1", APIKey: standKey},
		config.Provider{Name: "stand-messages", Kind: config.KindAnthropicMessages, BaseURL: u.srv.URL, APIKey: standKey},
		// The fusion model's expert has a provider of its own, so that the router has not seen
		// it fail for the other models.
		config.Provider{Name: "stand-expert", Kind: config.KindOpenAIChat, BaseURL: u.srv.URL + "/v1"})
	add := func(m config.Model) {
		m.OwnedBy, m.MaxOutputTokens = "test", 4096
		m.Price = config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}
		cfg.Models = append(cfg.Models, m)
		cfg.Plans[0].Models = append(cfg.Plans[0].Models, m.ID)
	}
	for model := range upstreamFailures {
		add(config.Model{ID: "up-" + model, Family: config.FamilyChat, Backend: &config.Upstream{Provider: "stand-chat", Model: model}})
		add(config.Model{ID: "up-" + model + "-messages", Family: config.FamilyMessages, Backend: &config.Upstream{Provider: "stand-messages", Model: model}})
	}
	add(config.Model{ID: "up-silent-fusion", Family: config.FamilyChat, Experts: []config.Upstream{
		{Provider: "stand-expert", Model: "silent", Strengths: []string{"general", "fast"}},
		{Provider: "sim-openai-chat", Model: "sim-general", Strengths: []string{"general"}},
	}})
	for _, first := range []string{"html_page", "big_opening"} {
		add(config.Model{ID: "up-" + first + "-fusion", Family: config.FamilyChat, Experts: []config.Upstream{
			{Provider: "stand-expert", Model: first, Strengths: []string{"general", "fast"}},
			{Provider: "sim-openai-chat", Model: "sim-general", Strengths: []string{"general"}},
		}})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// postRaw sends body to route with key through c and returns the status, headers and body.
func postRaw(t *testing.T, c *http.Client, g *apitest.Gateway, key, route, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URL+route, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// TestUpstreamHeadTimeout: an upstream that takes the request and sends no head within the
// gateway's header timeout is asked once, not three times (trial D4: each try waited the whole
// timeout, 10 minutes, and sent the prompt again), and the client gets a 504 timeout in its
// route's envelope, not a 502 saying the upstream could not be reached. A model with another
// expert fails over to it.
func TestUpstreamHeadTimeout(t *testing.T) {
	u := newFailingUpstream(t)
	g := apitest.Start(t, apitest.Options{Config: failingConfig(t, u), UpstreamHeaderTimeout: 300 * time.Millisecond})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)

	t.Run("chat completions", func(t *testing.T) {
		before := u.tries("silent")
		status, _, body := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-silent", "hi", false, 16))
		var env struct {
			Error struct{ Message, Type, Code string }
		}
		_ = json.Unmarshal(body, &env)
		if status != http.StatusGatewayTimeout || env.Error.Type != "timeout_error" || env.Error.Code != "upstream_timeout" ||
			!strings.Contains(env.Error.Message, "timed out") {
			t.Errorf("status %d, body %s: want 504 timeout_error / upstream_timeout saying it timed out", status, body)
		}
		if n := u.tries("silent") - before; n != 1 {
			t.Errorf("the upstream was asked %d times, want once", n)
		}
	})
	t.Run("messages", func(t *testing.T) {
		before := u.tries("silent")
		status, _, body := postRaw(t, c, g, tenant.Key, "/v1/messages",
			`{"model":"up-silent-messages","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(body, &env)
		if status != http.StatusGatewayTimeout || env.Type != "error" || env.Error.Type != "timeout_error" || !strings.Contains(env.Error.Message, "timed out") {
			t.Errorf("status %d, body %s: want 504 with error.type timeout_error", status, body)
		}
		if n := u.tries("silent") - before; n != 1 {
			t.Errorf("the upstream was asked %d times, want once", n)
		}
	})
	t.Run("fusion fails over", func(t *testing.T) {
		before := u.tries("silent")
		status, h, body := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-silent-fusion", "hi", false, 16))
		if status != http.StatusOK {
			t.Fatalf("status %d %s: want the second expert's answer", status, body)
		}
		if n := u.tries("silent") - before; n != 1 || !strings.Contains(h.Get("x-tollgate-expert"), "sim-general") {
			t.Errorf("silent expert asked %d times (want once), answered by %q", n, h.Get("x-tollgate-expert"))
		}
	})
}

// TestUpstreamRetryAdvice: what an upstream says of retrying reaches the client within the
// bounds of wire-protocols.md §4.2 (trial D5). An upstream's Retry-After: 3600 went out as it
// was, with retry-after-ms 3600000 and no x-should-retry, so SDKs that honour Retry-After
// without a bound slept an hour; now the client gets Retry-After: 60 and x-should-retry: false.
// A 429 with x-should-retry: false (an exhausted quota) was asked three times and the header
// was dropped; now it is asked once and the client gets the header.
func TestUpstreamRetryAdvice(t *testing.T) {
	u := newFailingUpstream(t)
	g := apitest.Start(t, apitest.Options{Config: failingConfig(t, u)})
	tenant := g.NewTenant(t, "acme", 0, 50_000_000)
	c := g.Client(t)
	cases := []struct {
		model, route, body                    string
		retryAfter, retryAfterMs, shouldRetry string
		message                               string
	}{
		{"hourly", "/v1/chat/completions", chatBody("up-hourly", "hi", false, 16), "60", "60000", "false",
			"the upstream is rate limited; it asks for a wait of 60 minutes: retry later"},
		{"hourly", "/v1/messages", `{"model":"up-hourly-messages","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, "60", "60000", "false",
			"the upstream is rate limited; it asks for a wait of 60 minutes: retry later"},
		{"exhausted", "/v1/chat/completions", chatBody("up-exhausted", "hi", false, 16), "", "", "false",
			"the upstream is rate limited; its quota will not allow the request soon: retry later"},
		{"exhausted", "/v1/messages", `{"model":"up-exhausted-messages","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "", "", "false",
			"the upstream is rate limited; its quota will not allow the request soon: retry later"},
	}
	for _, tc := range cases {
		t.Run(tc.model+" "+tc.route, func(t *testing.T) {
			before := u.tries(tc.model)
			status, h, body := postRaw(t, c, g, tenant.Key, tc.route, tc.body)
			if status != http.StatusTooManyRequests || !strings.Contains(string(body), tc.message) {
				t.Errorf("status %d, body %s: want 429 saying %q", status, body, tc.message)
			}
			if h.Get("Retry-After") != tc.retryAfter || h.Get("retry-after-ms") != tc.retryAfterMs || h.Get("x-should-retry") != tc.shouldRetry {
				t.Errorf("Retry-After %q, retry-after-ms %q, x-should-retry %q; want %q, %q, %q",
					h.Get("Retry-After"), h.Get("retry-after-ms"), h.Get("x-should-retry"), tc.retryAfter, tc.retryAfterMs, tc.shouldRetry)
			}
			if n := u.tries(tc.model) - before; n != 1 {
				t.Errorf("the upstream was asked %d times, want once", n)
			}
		})
	}
}

// TestUpstreamEndlessEventIsCutOff: an upstream stream whose event never ends (data lines and no
// blank line) is read only up to the event bound (32 MiB), then cut off: the client gets what
// came before and the in-band error, and what was produced is billed. Before, the gateway
// gathered the event for as long as the upstream kept sending (a stream may stay without an
// event for 40 heartbeats, 10 minutes): it took all 100 MiB the stand-in sends, its memory
// growing with each line, and a faster or longer upstream would have taken the process's memory.
// A line that never ends was bounded already, and is checked beside it.
func TestUpstreamEndlessEventIsCutOff(t *testing.T) {
	u := newFailingUpstream(t)
	g := apitest.Start(t, apitest.Options{Config: failingConfig(t, u)})
	c := g.Client(t)
	for _, model := range []string{"endless_event", "endless_line"} {
		t.Run(model, func(t *testing.T) {
			tenant := g.NewTenant(t, "acme-"+model, 0, 50_000_000)
			endlessEventWritten.Store(0)
			status, _, body := postRaw(t, c, g, tenant.Key, "/v1/chat/completions", chatBody("up-"+model, "hi", true, 64))
			if status != http.StatusOK || !strings.Contains(string(body), "Hello there") ||
				!strings.Contains(string(body), "the upstream stream ended unexpectedly") {
				t.Errorf("status %d, body %.500s: want the stream's delta then its in-band error", status, body)
			}
			if n := endlessEventWritten.Load(); n > 40<<20 {
				t.Errorf("the gateway took %d MiB of the endless event; want it cut off at the 32 MiB bound", n>>20)
			}
			var recs []store.UsageRecord
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				var err error
				if recs, err = g.Store.UsageRecords(context.Background(), tenant.Account.ID, 10); err != nil {
					t.Fatal(err)
				}
				if len(recs) > 0 {
					break
				}
			}
			if len(recs) != 1 || recs[0].OutputTokens <= 0 {
				t.Fatalf("usage records %+v: want one, billing the delta the client received", recs)
			}
		})
	}
}
