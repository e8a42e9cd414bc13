package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// OTLPSink is a local OTLP/HTTP trace receiver that takes every export and discards it: what
// `tollgate bench -tracing sink` points the gateway's exporter at, so that tracing at 100 %
// sampling costs the gateway all it costs against a collector (the spans built, batched,
// encoded and sent) while nothing else competes for the machine's cores.
type OTLPSink struct {
	// URL is the endpoint to give OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string
	srv *http.Server
	// Exports and Bytes count the export requests taken and their body bytes.
	Exports, Bytes atomic.Int64
}

// StartOTLPSink serves a sink on a free loopback port until Close.
func StartOTLPSink() (*OTLPSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &OTLPSink{URL: "http://" + ln.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		s.Exports.Add(1)
		s.Bytes.Add(n)
		// An empty ExportTraceServiceResponse: everything accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the sink.
func (s *OTLPSink) Close() error { return s.srv.Close() }

// String reports what the sink took.
func (s *OTLPSink) String() string {
	return fmt.Sprintf("%d exports, %.1f MB", s.Exports.Load(), float64(s.Bytes.Load())/1e6)
}

// processCPU is the CPU time (user and system) process pid has used so far, from
// /proc/<pid>/stat (in clock ticks of 10 ms).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command (which may hold spaces) start after its closing ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unreadable CPU times", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
