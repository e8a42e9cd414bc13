package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
	"github.com/tollgate/tollgate/impl/devkit/bench"
	"github.com/tollgate/tollgate/impl/h1server"
)

// BenchmarkPacedLatency sends one request a millisecond (the bench's rate, one at a time) on a
// kept-alive connection, straight to the simulator, through the gateway and through a bare relay
// (bench.Relay, served the same way), and reports the medians: whole answers for non-streamed
// requests, the first body byte for streams. Between
// requests the machine goes idle as it does under the bench's paced load, so the numbers
// include the wake-ups that a back-to-back benchmark hides. The client is a minimal HTTP/1.1
// writer and reader so that its own costs stay small and equal on both sides.
func BenchmarkPacedLatency(b *testing.B) {
	g := apitest.Start(b, apitest.Options{})
	tenant := g.NewTenant(b, "paced", 1_000_000_000, 1_000_000_000_000)
	relayLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	relay := &h1server.Server{Handler: bench.Relay(g.SimURL)}
	go func() { _ = relay.Serve(relayLn) }()
	b.Cleanup(func() { _ = relay.Close() })
	relayURL := "http://" + relayLn.Addr().String()
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			direct := pacedClient(b, g.SimURL, "", "sim-general", stream)
			gateway := pacedClient(b, g.URL, tenant.Key, "service-flint-base", stream)
			relayed := pacedClient(b, relayURL, "", "sim-general", stream)
			var ds, gs, rs []time.Duration
			for range 200 { // warm every path
				direct.once(b)
				gateway.once(b)
				relayed.once(b)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Alternate in blocks so that a drift in the machine's load weighs on both.
				for range 50 {
					ds = append(ds, direct.once(b))
					time.Sleep(time.Millisecond)
				}
				for range 50 {
					gs = append(gs, gateway.once(b))
					time.Sleep(time.Millisecond)
				}
				for range 50 {
					rs = append(rs, relayed.once(b))
					time.Sleep(time.Millisecond)
				}
			}
			b.StopTimer()
			slices.Sort(ds)
			slices.Sort(gs)
			slices.Sort(rs)
			p := func(s []time.Duration, q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Microseconds()) }
			b.ReportMetric(p(ds, 0.5), "direct-p50-µs")
			b.ReportMetric(p(gs, 0.5), "gateway-p50-µs")
			b.ReportMetric(p(gs, 0.5)-p(ds, 0.5), "added-p50-µs")
			b.ReportMetric(p(gs, 0.99)-p(ds, 0.99), "added-p99-µs")
			b.ReportMetric(p(rs, 0.5)-p(ds, 0.5), "relay-added-p50-µs")
		})
	}
}

// pacedConn is one kept-alive connection that sends the same request again and again.
type pacedConn struct {
	c      net.Conn
	br     *bufio.Reader
	req    []byte
	stream bool
}

func pacedClient(b *testing.B, base, key, model string, stream bool) *pacedConn {
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s := ""
	if stream {
		s = `,"stream":true`
	}
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":16%s}`, model, s)
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", u.Host, len(body))
	if key != "" {
		fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", key)
	}
	req.WriteString("\r\n" + body)
	return &pacedConn{c: c, br: bufio.NewReaderSize(c, 64<<10), req: req.Bytes(), stream: stream}
}

// once sends the request and returns the time to the whole answer (or, for a stream, to its
// first body byte, after which the rest is read untimed).
func (p *pacedConn) once(b *testing.B) time.Duration {
	start := time.Now()
	if _, err := p.c.Write(p.req); err != nil {
		b.Fatal(err)
	}
	length, chunked := -1, false
	status := ""
	for {
		line, err := p.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if status == "" {
			status = string(line)
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok {
			v = bytes.TrimSpace(v)
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				length, _ = strconv.Atoi(string(v))
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				chunked = bytes.EqualFold(v, []byte("chunked"))
			}
		}
	}
	if !bytes.Contains([]byte(status), []byte(" 200 ")) {
		b.Fatalf("status line %q", status)
	}
	if !chunked {
		if _, err := p.br.Discard(length); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	if _, err := p.br.Peek(1); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	for { // the chunks, to the last one
		line, err := p.br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil {
			b.Fatalf("chunk size %q", line)
		}
		if _, err := io.CopyN(io.Discard, p.br, n+2); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			return d
		}
	}
}
