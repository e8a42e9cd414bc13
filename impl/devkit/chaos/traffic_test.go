package chaos

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/sim"
)

// TestSendRecordsWhatTheClientReceived sends the run's request mix to the upstream simulator
// (the same one the replicas serve) and checks what the client side records of each route and
// mode: a whole answer, the usage it was shown (one output token a word), and for streams the
// words received and, for a long stream, when each arrived.
func TestSendRecordsWhatTheClientReceived(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{}))
	defer srv.Close()
	key := &apiKey{secret: "k", name: "test-key", account: "test"}
	for seq := range 4 {
		for _, stream := range []bool{false, true} {
			for _, fl := range []string{flowSteady, flowLong} {
				if fl == flowLong && !stream {
					continue
				}
				route, body := request(fl, seq, stream, "words=37", 64)
				t.Run(fmt.Sprintf("%s stream=%t %s", route, stream, fl), func(t *testing.T) {
					o := outcome{key: key, flow: fl, route: route, stream: stream}
					send(http.DefaultClient, srv.URL, body, &o)
					o.end = time.Now()
					if !o.ok() || o.head.IsZero() {
						t.Fatalf("not a whole answer: %+v", o)
					}
					if !o.usage.seen || o.usage.output != 37 || o.usage.input < 1 {
						t.Errorf("usage shown %+v; want 37 output tokens and some input", o.usage)
					}
					if stream && o.words != 37 {
						t.Errorf("%d words received; want 37", o.words)
					}
					if fl == flowLong && (len(o.progress) == 0 || o.progress[len(o.progress)-1].words != 37 || o.wordsBy(o.end) != 37) {
						t.Errorf("progress %+v; want it to reach 37 words", o.progress)
					}
				})
			}
		}
	}
}

// TestSendRecordsACutStream: a stream whose connection drops after 5 words is recorded as a 200
// cut short, with the 5 words its client received and no usage.
func TestSendRecordsACutStream(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{}))
	defer srv.Close()
	key := &apiKey{secret: "k", name: "test-key", account: "test"}
	for seq := range 4 {
		route, body := request(flowLong, seq, true, "words=40 fault=drop after=5", 64)
		o := outcome{key: key, flow: flowLong, route: route, stream: true}
		send(http.DefaultClient, srv.URL, body, &o)
		o.end = time.Now()
		if o.status != 200 || o.complete || o.inBand || o.kind() != "200, cut short" {
			t.Errorf("%s: %+v; want a 200 cut short", route, o)
		}
		if o.words != 5 || o.wordsBy(o.end) != 5 {
			t.Errorf("%s: %d words received (%d by the end); want 5", route, o.words, o.wordsBy(o.end))
		}
		if o.usage.seen && o.usage.output >= 40 {
			t.Errorf("%s: a cut stream showed the whole answer's usage %+v", route, o.usage)
		}
	}
}

func TestWordStarts(t *testing.T) {
	var n, total int
	after := true
	for _, s := range []string{"Hello", " wor", "ld", " and", " more ", "", "words\n", "end"} {
		n, after = wordStarts(s, after)
		total += n
	}
	if total != 6 {
		t.Errorf("%d words; want 6 (Hello world and more words end)", total)
	}
}
