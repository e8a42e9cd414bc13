package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// apiKey is one key the run's traffic uses.
type apiKey struct {
	// secret is the bearer token; name the key's name in api_keys; account its account's name.
	secret, name, account string
	// capped is set for a key with a credit cap, which the run drives to its cap.
	capped bool
	// capMicros is the cap of a capped key.
	capMicros int64
}

// outcome is what the client saw of one request.
type outcome struct {
	id       string // x-request-id
	key      *apiKey
	flow     string // the flow that sent it: flowSteady, flowCapped, flowProbe or flowLong
	replica  int
	route    string
	stream   bool
	fault    string // the simulator fault the request asked for, "" for none
	start    time.Time
	head     time.Time // when the response head arrived; zero when none did
	end      time.Time
	status   int    // 0: no HTTP answer (connection refused, reset, timeout, ...)
	inBand   bool   // a 200 stream that carried the format's error event
	complete bool   // the answer was whole: a parsed JSON body, or a stream that ended properly
	err      string // for a transport error
	// usage is the usage the answer showed its client.
	usage shownUsage
	// words counts the words of text a stream delivered (the simulator's output token is one
	// word); progress, kept for long streams only, says when each arrived.
	words    int
	progress []progressMark
}

// The flows of the run's traffic.
const (
	flowSteady = "steady"
	flowCapped = "capped"
	flowProbe  = "probe"
	flowLong   = "long"
)

// progressMark is a long stream's count of words received by a time.
type progressMark struct {
	at    time.Time
	words int
}

// wordsBy is how many words the stream had delivered to its client by t.
func (o outcome) wordsBy(t time.Time) int {
	n := 0
	for _, p := range o.progress {
		if p.at.After(t) {
			break
		}
		n = p.words
	}
	return n
}

// shownUsage is the usage an answer showed its client, in the terms of a usage record: every
// input token (cache reads and writes included) and every output token.
type shownUsage struct {
	seen          bool
	input, output int64
}

// kind is the outcome's class in the report.
func (o outcome) kind() string {
	switch {
	case o.status == 0:
		return "no answer (transport error)"
	case o.status == 200 && o.inBand:
		return "200, in-band error"
	case o.status == 200 && !o.complete:
		return "200, cut short"
	case o.status == 200:
		return "200"
	}
	return fmt.Sprintf("%d", o.status)
}

// ok reports whether the client got a whole answer.
func (o outcome) ok() bool { return o.status == 200 && o.complete && !o.inBand }

// simFaults are what a share of the requests ask of the simulator; the gateway's answer to
// them may be a refusal or an in-band error, which are then not held against it. Each tag
// makes the times= counter of the directive its own.
var simFaults = []string{
	"fault=429",
	"fault=502",
	"fault=529",
	"fault=502 times=1", // the gateway's retry succeeds
	"fault=midstream after=3",
	"fault=drop after=2",
	"fault=drop_before",
	"fault=stall_before ms=400",
}

// request is one request of the mix: its route and body. The prompt carries directive (without
// its brackets) for the simulator when it is not empty; maxTokens bounds the answer. A streamed
// chat completion asks for the usage chunk, so that every whole answer shows its usage.
func request(flow string, seq int, stream bool, directive string, maxTokens int) (route string, body []byte) {
	prompt := fmt.Sprintf("chaos %s request %d", flow, seq)
	if directive != "" {
		prompt += fmt.Sprintf(" [[sim %s tag=%s%d]]", directive, flow, seq)
	}
	p, _ := json.Marshal(prompt)
	switch seq % 4 {
	case 0, 1:
		usage := ""
		if stream {
			usage = `,"stream_options":{"include_usage":true}`
		}
		return "/v1/chat/completions", fmt.Appendf(nil, `{"model":"service-flint-base","max_tokens":%d,"stream":%t%s,"messages":[{"role":"user","content":%s}]}`, maxTokens, stream, usage, p)
	case 2:
		return "/v1/messages", fmt.Appendf(nil, `{"model":"service-sonnet","max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":%s}]}`, maxTokens, stream, p)
	}
	return "/v1/responses", fmt.Appendf(nil, `{"model":"service-flint","max_output_tokens":%d,"stream":%t,"input":%s}`, maxTokens, stream, p)
}

// load is the run's traffic: every request its flows sent and what each client saw.
type load struct {
	mu  sync.Mutex
	out []outcome
	wg  sync.WaitGroup
}

func (l *load) record(o outcome) {
	l.mu.Lock()
	l.out = append(l.out, o)
	l.mu.Unlock()
}

// outcomes waits for every request sent to end and returns what they got.
func (l *load) outcomes() []outcome {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out
}

// flow is a steady stream of requests: rate per second, round robin over replicas and keys.
type flow struct {
	name     string
	replicas []*replica
	keys     []*apiKey
	rate     int
	// faultEvery makes every n-th request ask the simulator for a fault (0: none).
	faultEvery int
	// timeout bounds each request (the client then gives up).
	timeout time.Duration
}

// run sends the flow's requests until ctx ends; the requests in flight then run to their end
// (load.outcomes waits for them).
func (l *load) run(ctx context.Context, f flow) {
	client := &http.Client{Timeout: f.timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	tick := time.NewTicker(time.Second / time.Duration(f.rate))
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fault := ""
		if f.faultEvery > 0 && seq%f.faultEvery == f.faultEvery-1 {
			fault = simFaults[(seq/f.faultEvery)%len(simFaults)]
		}
		o := outcome{key: f.keys[seq%len(f.keys)], flow: f.name, replica: f.replicas[seq%len(f.replicas)].n,
			stream: seq%3 != 0, fault: fault}
		base := f.replicas[seq%len(f.replicas)].url()
		route, body := request(f.name, seq, o.stream, fault, 64)
		o.route = route
		l.wg.Go(func() {
			o.start = time.Now()
			send(client, base, body, &o)
			o.end = time.Now()
			l.record(o)
		})
	}
}

// launchLong starts n long streams, round robin over replicas and keys, each asking the
// simulator for words words at tps words a second, and returns once all are sent (each runs to
// its end, or until its replica dies).
func (l *load) launchLong(replicas []*replica, keys []*apiKey, n, words int, tps float64) {
	client := &http.Client{Timeout: time.Duration(float64(words)/tps*float64(time.Second)) + 2*time.Minute}
	for i := range n {
		r := replicas[i%len(replicas)]
		o := outcome{key: keys[i%len(keys)], flow: flowLong, replica: r.n, stream: true}
		route, body := request(flowLong, i, true, fmt.Sprintf("words=%d tps=%g", words, tps), words+64)
		o.route = route
		l.wg.Go(func() {
			o.start = time.Now()
			send(client, r.url(), body, &o)
			o.end = time.Now()
			l.record(o)
		})
	}
}

// send makes one request and records what came back in o.
func send(client *http.Client, base string, body []byte, o *outcome) {
	req, _ := http.NewRequest("POST", base+o.route, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+o.key.secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		o.err = err.Error()
		return
	}
	defer res.Body.Close()
	o.head = time.Now()
	o.status, o.id = res.StatusCode, res.Header.Get("x-request-id")
	if res.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, res.Body)
		return
	}
	if !o.stream {
		var v map[string]any
		o.complete = json.NewDecoder(res.Body).Decode(&v) == nil && v["error"] == nil
		if u, ok := v["usage"].(map[string]any); ok {
			o.usage = shown(o.route, u)
		}
		return
	}
	readStream(res.Body, o)
}

// readStream reads a stream to its end and records in o whether it was complete (it ended with
// its format's terminal event), whether it carried an error event, the words of text it
// delivered (and when, for a long stream) and the usage it showed.
func readStream(r io.Reader, o *outcome) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	usage := map[string]any{}
	afterSpace := true
	complete := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "event: error", strings.HasPrefix(line, "data: {\"error\""), strings.Contains(line, `"type":"error"`):
			o.inBand = true
		case o.route == "/v1/chat/completions" && line == "data: [DONE]",
			o.route == "/v1/messages" && line == "event: message_stop",
			o.route == "/v1/responses" && (line == "event: response.completed" || line == "event: response.incomplete"):
			complete = true
		case o.route == "/v1/responses" && line == "event: response.failed":
			o.inBand = true
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.HasPrefix(data, "{") {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if text := deltaText(o.route, ev); text != "" {
			var n int
			n, afterSpace = wordStarts(text, afterSpace)
			o.words += n
			if o.flow == flowLong {
				o.progress = append(o.progress, progressMark{at: time.Now(), words: o.words})
			}
		}
		mergeUsage(ev, usage)
	}
	o.complete = complete && sc.Err() == nil
	if len(usage) > 0 {
		o.usage = shown(o.route, usage)
	}
}

// deltaText is the text a stream event of route adds to the answer ("" for any other event).
func deltaText(route string, ev map[string]any) string {
	switch route {
	case "/v1/chat/completions":
		if choices, ok := ev["choices"].([]any); ok && len(choices) > 0 {
			if c, ok := choices[0].(map[string]any); ok {
				if d, ok := c["delta"].(map[string]any); ok {
					s, _ := d["content"].(string)
					return s
				}
			}
		}
	case "/v1/messages":
		if ev["type"] == "content_block_delta" {
			if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "text_delta" {
				s, _ := d["text"].(string)
				return s
			}
		}
	case "/v1/responses":
		if ev["type"] == "response.output_text.delta" {
			s, _ := ev["delta"].(string)
			return s
		}
	}
	return ""
}

// wordStarts counts the words that start in s, given whether the text before it ended with
// a blank (or there was none), and reports whether s ends with one.
func wordStarts(s string, afterSpace bool) (int, bool) {
	n := 0
	for _, c := range s {
		space := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if !space && afterSpace {
			n++
		}
		afterSpace = space
	}
	return n, afterSpace
}

// mergeUsage copies the usage an event carries (at its top level, or in its message or
// response, as Messages and Responses streams carry it) into into, later values winning:
// Messages streams spread it over message_start and message_delta.
func mergeUsage(ev map[string]any, into map[string]any) {
	copyUsage := func(u any) {
		if m, ok := u.(map[string]any); ok {
			for k, v := range m {
				into[k] = v
			}
		}
	}
	copyUsage(ev["usage"])
	for _, k := range []string{"message", "response"} {
		if inner, ok := ev[k].(map[string]any); ok {
			copyUsage(inner["usage"])
		}
	}
}

// shown reads a usage object of route in the terms of a usage record: the OpenAI routes count
// cached input in their input counts; Messages counts cache reads and writes apart.
func shown(route string, u map[string]any) shownUsage {
	n := func(k string) int64 {
		v, _ := u[k].(float64)
		return int64(v)
	}
	switch route {
	case "/v1/chat/completions":
		return shownUsage{seen: true, input: n("prompt_tokens"), output: n("completion_tokens")}
	case "/v1/messages":
		return shownUsage{seen: true, input: n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"),
			output: n("output_tokens")}
	}
	return shownUsage{seen: true, input: n("input_tokens"), output: n("output_tokens")}
}
