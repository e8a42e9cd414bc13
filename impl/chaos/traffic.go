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

// outcome is what the client saw of one request.
type outcome struct {
	id       string // x-request-id
	account  int
	replica  int
	route    string
	stream   bool
	fault    string // the simulator fault the request asked for, "" for none
	start    time.Time
	end      time.Time
	status   int    // 0: no HTTP answer (connection refused, reset, ...)
	inBand   bool   // a 200 stream that carried the format's error event
	complete bool   // the answer was whole: a parsed JSON body, or a stream that ended properly
	err      string // for a transport error
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

// request is one request of the mix: its route, model and body.
func request(seq int, stream bool, fault string) (route string, body []byte) {
	prompt := fmt.Sprintf("chaos request %d", seq)
	if fault != "" {
		prompt += fmt.Sprintf(" [[sim %s tag=c%d]]", fault, seq)
	}
	p, _ := json.Marshal(prompt)
	switch seq % 4 {
	case 0, 1:
		return "/v1/chat/completions", fmt.Appendf(nil, `{"model":"service-flint-base","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":%s}]}`, stream, p)
	case 2:
		return "/v1/messages", fmt.Appendf(nil, `{"model":"service-sonnet","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":%s}]}`, stream, p)
	}
	return "/v1/responses", fmt.Appendf(nil, `{"model":"service-flint","max_output_tokens":64,"stream":%t,"input":%s}`, stream, p)
}

// traffic sends requests at rate per second, round robin over the replicas and the keys, until
// ctx ends, and returns what every request got.
func traffic(ctx context.Context, replicas []*replica, keys []string, rate int, faultEvery int) []outcome {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var (
		mu   sync.Mutex
		out  []outcome
		wg   sync.WaitGroup
		tick = time.NewTicker(time.Second / time.Duration(rate))
	)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return out
		case <-tick.C:
		}
		fault := ""
		if faultEvery > 0 && seq%faultEvery == faultEvery-1 {
			fault = simFaults[(seq/faultEvery)%len(simFaults)]
		}
		o := outcome{account: seq % len(keys), replica: seq % len(replicas), stream: seq%3 != 0, fault: fault}
		base := replicas[o.replica].url()
		route, body := request(seq, o.stream, fault)
		o.route = route
		wg.Go(func() {
			o.start = time.Now()
			send(client, base, keys[o.account], body, &o)
			o.end = time.Now()
			mu.Lock()
			out = append(out, o)
			mu.Unlock()
		})
	}
}

// send makes one request and records what came back in o.
func send(client *http.Client, base, key string, body []byte, o *outcome) {
	req, _ := http.NewRequest("POST", base+o.route, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		o.err = err.Error()
		return
	}
	defer res.Body.Close()
	o.status, o.id = res.StatusCode, res.Header.Get("x-request-id")
	if res.StatusCode != 200 {
		_, _ = io.Copy(io.Discard, res.Body)
		return
	}
	if !o.stream {
		var v map[string]any
		o.complete = json.NewDecoder(res.Body).Decode(&v) == nil && v["error"] == nil
		return
	}
	o.complete, o.inBand = readStream(res.Body, o.route)
}

// readStream reads a stream to its end: complete when it ended with its format's terminal
// event, inBand when it carried an error event.
func readStream(r io.Reader, route string) (complete, inBand bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "event: error", strings.HasPrefix(line, "data: {\"error\""), strings.Contains(line, `"type":"error"`):
			inBand = true
		case route == "/v1/chat/completions" && line == "data: [DONE]",
			route == "/v1/messages" && line == "event: message_stop",
			route == "/v1/responses" && (line == "event: response.completed" || line == "event: response.incomplete"):
			complete = true
		case route == "/v1/responses" && line == "event: response.failed":
			inBand = true
		}
	}
	return complete && sc.Err() == nil, inBand
}
