package h1server

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"reflect"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzHead checks the lean head parser against net/http: whatever the lean path accepts,
// http.ReadRequest and net/http's server-side checks must accept too, with the same method,
// target, URL, Host, header, Content-Length, Connection: close and head length. It also checks
// that no prefix of an accepted head is handed off, so a head arriving in pieces stays lean.
func FuzzHead(f *testing.F) {
	for _, tc := range conformanceCases() {
		for _, st := range tc.steps {
			if len(st.send) <= readBufferSize {
				f.Add([]byte(st.send))
			}
		}
	}
	f.Add([]byte("GET /a?b=c HTTP/1.1\r\nHost: h\r\nX-Y: z\r\n\r\n"))
	f.Add([]byte("POST /v1/messages HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\nPragma: no-cache\r\n\r\nhello"))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > readBufferSize {
			data = data[:readBufferSize]
		}
		var sc headScan
		v := scanHead(data, &sc)
		// Scanning as the bytes arrive one at a time, resuming each time, must come to the same
		// verdict at the same point.
		var inc headScan
		for k := 1; k <= len(data); k++ {
			iv := scanHead(data[:k], &inc)
			if iv == needMore {
				continue
			}
			if iv != v || iv == serveLean && (k != sc.n || !reflect.DeepEqual(inc, sc)) {
				t.Fatalf("scanning byte by byte: verdict %d after %d bytes; at once: %d (head %d)", iv, k, v, sc.n)
			}
			break
		}
		if v != serveLean {
			return
		}
		head := sc.n
		var ph parsedHead
		if !buildRequest(data, &sc, &ph) {
			return
		}

		br := bufio.NewReaderSize(bytes.NewReader(data), 2*readBufferSize)
		req, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("lean path accepts %q; http.ReadRequest: %v", data[:head], err)
		}
		// net/http's server-side checks (conn.readRequest).
		if !req.ProtoAtLeast(1, 1) || req.ProtoMajor != 1 {
			t.Fatalf("protocol %s", req.Proto)
		}
		// http.ReadRequest removes the Host header; count its lines the way net/http reads them.
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(data[:head])))
		_, _ = tp.ReadLine()
		mime, err := tp.ReadMIMEHeader()
		if err != nil {
			t.Fatalf("textproto: %v", err)
		}
		if hosts := mime["Host"]; len(hosts) != 1 || !httpguts.ValidHostHeader(hosts[0]) {
			t.Fatalf("Host %q", hosts)
		}
		for k, vv := range req.Header {
			if !httpguts.ValidHeaderFieldName(k) {
				t.Fatalf("header name %q", k)
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Fatalf("header value %q", v)
				}
			}
		}

		if consumed := len(data) - br.Buffered(); consumed != head {
			t.Errorf("head length %d, net/http read %d", head, consumed)
		}
		if ph.method != req.Method || ph.requestURI != req.RequestURI || ph.host != req.Host {
			t.Errorf("request line: lean %q %q host %q, net/http %q %q host %q", ph.method, ph.requestURI, ph.host, req.Method, req.RequestURI, req.Host)
		}
		if !reflect.DeepEqual(ph.url, req.URL) {
			t.Errorf("URL: lean %#v, net/http %#v", ph.url, req.URL)
		}
		if !reflect.DeepEqual(ph.header, req.Header) {
			t.Errorf("header: lean %q, net/http %q", ph.header, req.Header)
		}
		if ph.contentLength != req.ContentLength || ph.close != req.Close {
			t.Errorf("length/close: lean %d %v, net/http %d %v", ph.contentLength, ph.close, req.ContentLength, req.Close)
		}
		if req.TransferEncoding != nil || req.Trailer != nil {
			t.Errorf("net/http sees transfer encoding %v, trailer %v", req.TransferEncoding, req.Trailer)
		}
	})
}
