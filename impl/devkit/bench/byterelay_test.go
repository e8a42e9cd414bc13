package bench

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/sim"
)

// TestByteRelay: whole and streamed answers come through the byte relay as the simulator sent
// them, several requests share one client connection, a streamed event is forwarded before the
// stream ends, and Close ends Serve.
func TestByteRelay(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes while the client waits
	}))
	defer slow.Close()

	start := func(upstream string) (string, *ByteRelay, chan error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := &ByteRelay{Upstream: strings.TrimPrefix(upstream, "http://")}
		served := make(chan error, 1)
		go func() { served <- r.Serve(ln) }()
		return "http://" + ln.Addr().String(), r, served
	}
	base, relay, served := start(up.URL)

	dials := 0
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	post := func(body string) (*http.Response, string) {
		t.Helper()
		res, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return res, string(b)
	}
	for range 3 {
		res, b := post(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}],"max_tokens":8}`)
		if res.StatusCode != 200 || !strings.Contains(b, `"chat.completion"`) {
			t.Fatalf("%d: %s", res.StatusCode, b)
		}
	}
	res, b := post(`{"model":"sim-general","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}`)
	if res.StatusCode != 200 || !strings.HasSuffix(b, "data: [DONE]\n\n") || !strings.Contains(b, `"chat.completion.chunk"`) {
		t.Fatalf("stream %d: %q", res.StatusCode, b)
	}
	res, b = post(`{"model":"no-such-model","messages":[]}`)
	if res.StatusCode < 400 || !strings.Contains(b, "error") {
		t.Fatalf("an upstream error came through as %d: %s", res.StatusCode, b)
	}
	if dials != 1 {
		t.Errorf("%d client connections for five requests, want one", dials)
	}

	// The first event of a stream whose upstream then falls silent still arrives.
	slowBase, slowRelay, _ := start(slow.URL)
	defer slowRelay.Close()
	sres, err := http.Post(slowBase+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(sres.Body).ReadString('\n')
	sres.Body.Close()
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event %q, %v", line, err)
	}

	relay.Close()
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v after Close", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still running after Close")
	}
}

// TestRunMeasuresEverySide runs the whole bench briefly against in-process stand-ins (bare
// relays in the gateway's place) and checks that every side was measured and reported.
func TestRunMeasuresEverySide(t *testing.T) {
	if testing.Short() {
		t.Skip("drives load for several seconds")
	}
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	gateway := httptest.NewServer(Relay(up.URL))
	defer gateway.Close()
	relay := httptest.NewServer(Relay(up.URL))
	defer relay.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	floor := &ByteRelay{Upstream: strings.TrimPrefix(up.URL, "http://")}
	go func() { _ = floor.Serve(ln) }()
	defer floor.Close()

	r, err := Run(context.Background(), Config{
		DirectURL: up.URL, GatewayURL: gateway.URL, RelayURL: relay.URL, FloorURL: "http://" + ln.Addr().String(),
		DirectModel: "sim-general", GatewayModel: "sim-general", SlowModel: "sim-general",
		GatewayPID: os.Getpid(), Rate: 100, Phase: 300 * time.Millisecond, Rounds: 2, Streams: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.DirectSuccess != 1 || r.GatewaySuccess != 1 {
		t.Errorf("success %v / %v", r.DirectSuccess, r.GatewaySuccess)
	}
	for name, v := range map[string]float64{
		"direct p50": r.DirectP50us, "gateway p50": r.GatewayP50us, "direct first byte p50": r.StreamDirectP50us,
		"gateway first byte p50": r.StreamGatewayP50us, "direct rate": r.MaxDirectRPS, "gateway rate": r.MaxGatewayRPS,
		"relay added p50": r.RelayAddedP50us, "byte relay added p50": r.FloorAddedP50us,
		"relay added first byte p50": r.RelayAddedTTFBP50us, "byte relay added first byte p50": r.FloorAddedTTFBP50us,
		"peak RSS": r.RSSPeakMB,
	} {
		if v == 0 {
			t.Errorf("%s not measured", name)
		}
	}
	if len(r.Rounds) != 2 || r.Rounds[0].RelayAddedP50us == 0 || r.Rounds[1].FloorAddedP50us == 0 {
		t.Errorf("rounds: %+v", r.Rounds)
	}
	if r.StreamsCompleted != 5 {
		t.Errorf("%d of 5 streams completed", r.StreamsCompleted)
	}
}
