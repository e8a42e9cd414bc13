package h1server

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchHandler is the trivial handler of the benchmarks: a small typed body.
var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok":true}`))
})

var benchRequest = []byte("GET /v1/ping HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")

// benchServers starts each server kind on a loopback port and returns its address.
var benchServers = []struct {
	name  string
	start func(b *testing.B) string
}{
	{"net-http", func(b *testing.B) string {
		ln := listen(b)
		s := &http.Server{Handler: benchHandler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
		go func() { _ = s.Serve(ln) }()
		b.Cleanup(func() { _ = s.Close() })
		return ln.Addr().String()
	}},
	{"h1server", func(b *testing.B) string {
		ln := listen(b)
		s := &Server{Handler: benchHandler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
		go func() { _ = s.Serve(ln) }()
		b.Cleanup(func() { _ = s.Close() })
		return ln.Addr().String()
	}},
}

func listen(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// rawClient is a minimal keep-alive HTTP/1.1 client that allocates nothing per request, so that
// the allocations a benchmark reports are the server's.
type rawClient struct {
	c   net.Conn
	buf []byte
}

func newRawClient(b *testing.B, addr string) *rawClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &rawClient{c: c, buf: make([]byte, 0, 8<<10)}
}

var errBadResponse = errors.New("bad response")

// roundTrip sends the request and reads one response framed by Content-Length.
func (rc *rawClient) roundTrip(req []byte) error {
	if _, err := rc.c.Write(req); err != nil {
		return err
	}
	buf := rc.buf[:0]
	for {
		n, err := rc.c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return err
		}
		end := bytes.Index(buf, []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		i := bytes.Index(buf[:end], []byte("\r\nContent-Length: "))
		if i < 0 {
			return errBadResponse
		}
		v := buf[i+len("\r\nContent-Length: "):]
		v = v[:bytes.IndexByte(v, '\r')]
		clen, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		if len(buf) >= end+4+clen {
			if len(buf) > end+4+clen {
				return errBadResponse // nothing is pipelined here
			}
			return nil
		}
	}
}

// BenchmarkPacedRoundTrip measures one client sending one request per millisecond on a
// keep-alive connection, the gateway's typical load: between requests the server's goroutines
// park, so each request pays for waking them, as in production. The pauses would dominate the
// framework's mean, so ns/op reports the median round trip instead (with p90-ns and p99-ns
// beside it); allocs/op and B/op are the framework's, per request (the client allocates
// nothing).
func BenchmarkPacedRoundTrip(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			rc := newRawClient(b, srv.start(b))
			for range 50 { // warm up buffers and pools
				if err := rc.roundTrip(benchRequest); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				time.Sleep(time.Millisecond)
				t0 := time.Now()
				if err := rc.roundTrip(benchRequest); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			quantile := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) }
			b.ReportMetric(quantile(0.50), "ns/op")
			b.ReportMetric(quantile(0.90), "p90-ns")
			b.ReportMetric(quantile(0.99), "p99-ns")
		})
	}
}

// BenchmarkThroughput measures back-to-back requests from several keep-alive connections at
// once; ns/op is wall time per request with both cores busy.
func BenchmarkThroughput(b *testing.B) {
	for _, srv := range benchServers {
		b.Run(srv.name, func(b *testing.B) {
			addr := srv.start(b)
			b.ReportAllocs()
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				rc := newRawClient(b, addr)
				for pb.Next() {
					if err := rc.roundTrip(benchRequest); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
