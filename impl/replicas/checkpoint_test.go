package replicas_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/price"
	"github.com/tollgate/tollgate/impl/store"
)

// clientStream is one streamed answer as its client received it: when each part of the text
// arrived, so that a test can tell how much had arrived by a given time.
type clientStream struct {
	route, body string
	// id is the request id (x-request-id), set once the stream has begun.
	id      string
	begun   chan struct{}
	ended   chan error
	mu      sync.Mutex
	arrived []time.Time // when the text so far grew
	chars   []int       // the text's length (bytes) at each of those times
}

func newClientStream(route, body string) *clientStream {
	return &clientStream{route: route, body: body, begun: make(chan struct{}), ended: make(chan error, 1)}
}

// run sends the request to the process at base and reads the stream until it ends, noting the
// text of each delta of its route's format as it arrives. begun is closed at the first text.
func (s *clientStream) run(base, key string) {
	defer func() {
		select {
		case <-s.begun:
		default:
			close(s.begun)
		}
	}()
	req, _ := http.NewRequest("POST", base+s.route, strings.NewReader(s.body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	// The client's own transport: the stream's connection dies with the process.
	res, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		s.ended <- err
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.ended <- fmt.Errorf("status %d", res.StatusCode)
		return
	}
	s.id = res.Header.Get("x-request-id")
	sc := bufio.NewScanner(res.Body)
	total := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		text := deltaText(data)
		if text == "" {
			continue
		}
		total += len(text)
		s.mu.Lock()
		s.arrived = append(s.arrived, time.Now())
		s.chars = append(s.chars, total)
		s.mu.Unlock()
		select {
		case <-s.begun:
		default:
			close(s.begun)
		}
	}
	if sc.Err() == nil {
		s.ended <- errors.New("the stream ended normally")
		return
	}
	s.ended <- sc.Err()
}

// deltaText is the answer text an SSE data line of any of the three formats carries: a
// Messages text_delta, a chat chunk's delta content, a Responses output_text delta.
func deltaText(data string) string {
	var ev struct {
		Type    string          `json:"type"`
		Delta   json.RawMessage `json:"delta"`
		Choices []struct {
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &ev) != nil {
		return ""
	}
	switch ev.Type {
	case "content_block_delta":
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(ev.Delta, &d)
		return d.Text
	case "response.output_text.delta":
		var d string
		_ = json.Unmarshal(ev.Delta, &d)
		return d
	}
	if len(ev.Choices) > 0 {
		return ev.Choices[0].Delta.Content
	}
	return ""
}

// charsAt is how much text had arrived by t.
func (s *clientStream) charsAt(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.arrived, t, func(a, t time.Time) int { return a.Compare(t) })
	for i < len(s.arrived) && !s.arrived[i].After(t) {
		i++
	}
	if i == 0 {
		return 0
	}
	return s.chars[i-1]
}

// outputEstimate is the gateway's estimate of the output tokens of chars characters of text
// when the upstream has not said (impl/httpapi: one token per four characters, rounded up).
func outputEstimate(chars int) int64 { return int64((chars + 3) / 4) }

// TestKilledStreamsBilledFromTheirCheckpoints kills, with SIGKILL, a process relaying three long
// streams (Messages, relayed as it is; a chat completion, relayed; a Responses stream translated
// from a chat upstream) after several checkpoint intervals. Once the killed process's lease has
// expired, the surviving process bills each stream from its last checkpoint: one usage record
// each, status process_lost, whose output is at least what the client had received one
// checkpoint interval (and one write) before the kill and at most what it received in all, and
// whose cost is the price arithmetic of its tokens; the books balance, and neither the killed
// process's hold nor any checkpoint is left. Before checkpoints these streams were never
// billed. `tollgate serve` runs with a checkpoint interval of 500 ms, a lease of 3 s and a
// reap interval of 500 ms (TOLLGATE_TEST_BILLING_*), so the test takes seconds, not a 40 s lease.
func TestKilledStreamsBilledFromTheirCheckpoints(t *testing.T) {
	const (
		interval = 500 * time.Millisecond
		lease    = 3 * time.Second
		// writeSlack allows for the checkpoint write that carries a stream's progress (one
		// statement) and for the scheduling of a loaded test machine.
		writeSlack = 400 * time.Millisecond
	)
	c := startClusterEnv(t, 2, "TOLLGATE_TEST_BILLING_LEASE="+lease.String(),
		"TOLLGATE_TEST_BILLING_REAP_INTERVAL=500ms", "TOLLGATE_TEST_BILLING_CHECKPOINT_INTERVAL="+interval.String())
	acct, key := c.newAccount("killed-streams", 10_000_000, 0)
	victim := c.procs[0]
	ctx := context.Background()

	const prompt = "tell me everything [[sim words=4000 tps=25]]"
	streams := []*clientStream{
		newClientStream("/v1/messages", `{"model":"service-sonnet","max_tokens":5000,"stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`),
		newClientStream("/v1/chat/completions", `{"model":"service-flint-base","max_tokens":5000,"stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`),
		newClientStream("/v1/responses", `{"model":"service-flint-base","max_output_tokens":5000,"stream":true,"input":"`+prompt+`"}`),
	}
	for _, s := range streams {
		go s.run(victim.url, key.Plain)
	}
	for _, s := range streams {
		<-s.begun
		if s.id == "" || s.charsAt(time.Now()) == 0 {
			t.Fatalf("%s did not stream: %v", s.route, <-s.ended)
		}
	}
	time.Sleep(6 * interval)
	killed := time.Now()
	victim.kill()
	for _, s := range streams {
		if err := <-s.ended; err == nil || err.Error() == "the stream ended normally" {
			t.Fatalf("%s through the killed process: %v", s.route, err)
		}
	}

	// The survivor reaps the killed process's hold once its lease has expired, billing its
	// streams from their checkpoints first.
	byID := map[string]store.UsageRecord{}
	deadline := killed.Add(lease + 20*time.Second)
	for {
		recs, err := c.store.UsageRecords(ctx, acct, 100)
		if err != nil {
			t.Fatal(err)
		}
		clear(byID)
		for _, r := range recs {
			if _, dup := byID[r.RequestID]; dup {
				t.Fatalf("request %s has two usage records", r.RequestID)
			}
			byID[r.RequestID] = r
		}
		if len(byID) >= len(streams) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d killed streams billed %v after the kill", len(byID), len(streams), time.Since(killed).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	billedAfter := time.Since(killed)
	if billedAfter < lease-time.Second {
		t.Errorf("the streams were billed %v after the kill, before the lease of %v could expire", billedAfter, lease)
	}
	for _, s := range streams {
		r, ok := byID[s.id]
		if !ok {
			t.Errorf("%s (%s) has no usage record; the account has %v", s.route, s.id, slices.Collect(maps.Keys(byID)))
			continue
		}
		received := s.charsAt(killed.Add(time.Second)) // all of it: nothing arrives after the kill
		floor := s.charsAt(killed.Add(-interval - writeSlack))
		t.Logf("%s: billed %d output tokens; the client had %d by the kill (estimate %d), %d one interval and a write before it (%d); cost %d",
			s.route, r.OutputTokens, received, outputEstimate(received), floor, outputEstimate(floor), r.CostMicros)
		if r.Status != "process_lost" {
			t.Errorf("%s: status %q, want process_lost", s.route, r.Status)
		}
		if r.OutputTokens < outputEstimate(floor) || r.OutputTokens > outputEstimate(received)+4 {
			t.Errorf("%s: billed %d output tokens; want at least %d (received one interval and a write before the kill) and at most %d (received in all)",
				s.route, r.OutputTokens, outputEstimate(floor), outputEstimate(received))
		}
		if r.Price == nil {
			t.Errorf("%s: the record has no price", s.route)
			continue
		}
		if want := price.Cost(r.Tokens(), *r.Price).Total(); r.CostMicros != want || r.WaivedMicros != 0 || r.CostMicros == 0 {
			t.Errorf("%s: cost %d (waived %d) for %+v at %+v; the price arithmetic says %d", s.route, r.CostMicros, r.WaivedMicros, r.Tokens(), *r.Price, want)
		}
	}
	c.checkBooks(acct)
	var holds, checkpoints int
	if err := c.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM credit_holds WHERE starts_with(holder, $1)),
		(SELECT count(*) FROM stream_checkpoints)`, victim.holder()).Scan(&holds, &checkpoints); err != nil {
		t.Fatal(err)
	}
	if holds != 0 || checkpoints != 0 {
		t.Errorf("after the reap: %d holds of the killed process, %d checkpoints", holds, checkpoints)
	}
}
