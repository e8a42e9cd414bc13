package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

// TestUpstreamHeadTooLarge: an upstream whose answer has a head of over 10 MiB (net/http's
// Transport's limit) gets the client a 502 in the gateway's words, with none of the transport's,
// and the gateway closes every connection on which such a head came.
func TestUpstreamHeadTooLarge(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted, closedByGateway atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a guard, not a measurement
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				// A good answer, but for its head: net/http's Transport refuses it.
				const completion = `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
				filler := "X-Filler: " + strings.Repeat("f", 8<<10) + "\r\n"
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"+strings.Repeat(filler, (11<<20)/len(filler))+fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(completion), completion))
				if _, err := io.Copy(io.Discard, c); !os.IsTimeout(err) {
					closedByGateway.Add(1) // the gateway ended (or reset) the connection, not the guard
				}
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })

	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "hostile", Kind: "openai-chat", BaseURL: "http://" + ln.Addr().String()})
	cfg.Models = append(cfg.Models, config.Model{ID: "hostile-chat", Family: config.FamilyChat, OwnedBy: "test",
		Price: config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}, MaxOutputTokens: 4096,
		Backend: &config.Upstream{Provider: "hostile", Model: "up"}})
	cfg.Plans[0].Models = append(cfg.Plans[0].Models, "hostile-chat")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := apitest.Start(t, apitest.Options{Config: cfg})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"hostile-chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+tenant.Key)
	res, err := g.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", res.StatusCode, body)
	}
	for _, internal := range []string{"upstreamconn", "head", "bytes", "X-Filler"} {
		if strings.Contains(string(body), internal) {
			t.Errorf("the answer shows internal text (%q): %s", internal, body)
		}
	}
	t.Logf("the client got %d %s", res.StatusCode, body)
	_ = ln.Close()
	wg.Wait()
	if n, c := accepted.Load(), closedByGateway.Load(); n == 0 || c != n {
		t.Errorf("the gateway closed %d of the %d connections that sent an oversized head", c, n)
	}
}

// TestStalledUploadsHoldLittleMemory: 100 authenticated requests announce 32 MiB bodies (the
// largest accepted), send 4 KiB of them and stall. While they stall, the gateway's heap holds
// about what arrived, not what was announced: its peak grows by far less than one announced
// body, let alone 100 (3.2 GiB when buffers were sized by Content-Length). At the body read
// deadline each gets its answer and its connection is closed. The heap is the Go runtime's own
// count (HeapAlloc, sampled during the stall); the bound is generous, as other work of the test
// process also allocates.
func TestStalledUploadsHoldLittleMemory(t *testing.T) {
	const (
		uploads   = 100
		announced = 32 << 20
		sent      = 4 << 10
		deadline  = 3 * time.Second
		bound     = 256 << 20
	)
	g := apitest.Start(t, apitest.Options{BodyReadTimeout: deadline})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	addr := strings.TrimPrefix(g.URL, "http://")
	prefix := `{"model":"service-flint-base","messages":[{"role":"user","content":"`
	part := prefix + strings.Repeat("a", sent-len(prefix))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, baseRSS := ms.HeapAlloc, rss()

	conns := make([]net.Conn, uploads)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(deadline + 20*time.Second)) // a guard
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tenant.Key, announced, part)
		conns[i] = c
	}

	// Sample the heap while the uploads stall, until the first answer comes (at the deadline).
	answered := make(chan struct{})
	var peak, peakRSS uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak, peakRSS = max(peak, ms.HeapAlloc), max(peakRSS, rss())
			select {
			case <-answered:
				return
			case <-tick.C:
			}
		}
	}()

	statuses := map[string]int{}
	var once sync.Once
	for _, c := range conns {
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		once.Do(func() { close(answered) })
		if err != nil {
			statuses[fmt.Sprintf("no answer (timed out: %v)", os.IsTimeout(err))]++
			continue
		}
		body, _ := io.ReadAll(res.Body)
		_, err = br.ReadByte()
		closed := err == io.EOF || err != nil && !os.IsTimeout(err)
		statuses[fmt.Sprintf("%d %s, connection closed: %v", res.StatusCode, strings.TrimSpace(string(body)), closed)]++
	}
	<-sampled
	growth := int64(peak) - int64(base)
	t.Logf("%d uploads announcing %d MiB, %d bytes sent each: heap %d MiB before, peak %d MiB during the stall (growth %d MiB); RSS %d MiB before, peak %d MiB",
		uploads, announced>>20, sent, base>>20, peak>>20, growth>>20, baseRSS>>20, peakRSS>>20)
	t.Logf("at the deadline: %v", statuses)
	if growth > bound {
		t.Errorf("the heap grew by %d MiB during the stall, over the bound of %d MiB", growth>>20, bound>>20)
	}
	if len(statuses) != 1 {
		t.Fatalf("the uploads ended in different ways: %v", statuses)
	}
	for s := range statuses {
		if !strings.HasPrefix(s, "400 ") || !strings.HasSuffix(s, "connection closed: true") {
			t.Errorf("at the deadline: %s, want a 400 and the connection closed", s)
		}
	}
}

// rss is the process's resident set size, in bytes (0 where /proc is not there).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestSmuggledRequestIsRefused: a request with both Content-Length and Transfer-Encoding is
// refused 400 in the chat-completions envelope and its connection closed, and the chat
// completion pipelined behind it (which a front framing by Content-Length would have read as
// the first one's body) is never served nor billed; a head the server cannot read (no Host)
// is answered in the same envelope, where it was net/http's plain text, and so is one whose
// Authorization header holds a bare CR, the answer naming the header (task h3).
func TestSmuggledRequestIsRefused(t *testing.T) {
	g := apitest.Start(t, apitest.Options{})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	addr := strings.TrimPrefix(g.URL, "http://")
	ctx := context.Background()
	before, err := g.Meter.Balance(ctx, tenant.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	chat := `{"model":"service-flint-base","messages":[{"role":"user","content":"hi"}]}`
	smuggled := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tenant.Key, len(chat), chat)
	first := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n0\r\n\r\n", tenant.Key, 5+len(smuggled))

	for name, tc := range map[string]struct {
		send, message string
	}{
		"length and encoding": {first + smuggled, "the request could not be read as HTTP/1.1: the request has both Content-Length and Transfer-Encoding"},
		"no host":             {"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + tenant.Key + "\r\n\r\n", "the request could not be read as HTTP/1.1: missing required Host header"},
		// A key pasted from a file with Windows line ends: a bare CR at the end of the value,
		// which net/http refused with a plain 400 ("the request could not be read as HTTP/1.1").
		"a key with its CR": {"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key + "\r\r\n\r\n",
			"the request could not be read as HTTP/1.1: the Authorization header holds a carriage return: a key pasted from a file with Windows line ends? Send the key without it"},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a guard
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			var env struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %q %s (%v), want 400 in the JSON envelope", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
			}
			if env.Error.Message != tc.message || env.Error.Type != "invalid_request_error" || env.Error.Code == nil || *env.Error.Code != "bad_request" {
				t.Errorf("envelope %s, want the message %q", body, tc.message)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Errorf("the connection stayed open (%v)", err)
			}
		})
	}
	after, err := g.Meter.Balance(ctx, tenant.Account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("balance %d → %d: the smuggled request was served", before, after)
	}
}

// TestManyHeaderFieldsHoldLittleMemory: 30 authenticated requests send a head of 1 MiB (within
// the head limit) made of short header fields, some 150,000 each, announce a body and stall.
// Before, net/http's parsed header kept about 12 MiB of heap per request while the handler
// waited for the body (360 MiB here; 1.2 GiB for 100, past the default memory limit, for as long
// as the stall lasts): now such a head is refused at once, 431 in the JSON envelope saying why,
// its connection closed, and the heap keeps almost nothing of them (measured after a collection
// during the stall: parsing them still costs garbage, for moments).
func TestManyHeaderFieldsHoldLittleMemory(t *testing.T) {
	const (
		requests = 30
		deadline = 10 * time.Second
		bound    = 64 << 20
	)
	g := apitest.Start(t, apitest.Options{BodyReadTimeout: deadline})
	tenant := g.NewTenant(t, "acme", 0, 100_000_000)
	addr := strings.TrimPrefix(g.URL, "http://")
	var fields strings.Builder
	for i := 0; fields.Len() < 1<<20-8<<10; i++ {
		fmt.Fprintf(&fields, "x%d:\r\n", i)
	}
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tenant.Key +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n" + fields.String() + "\r\n{\"model\":"

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	conns := make([]net.Conn, requests)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(deadline + 20*time.Second)) // a guard
		go func() { _, _ = io.WriteString(c, head) }()
		conns[i] = c
	}
	// What the heap keeps while the bodies stall (the body deadline is 10 s away): after a
	// collection, so that the parsing's garbage is not counted, and late enough that every
	// head has been parsed (some 50 ms of CPU each: up to 2 s for the 30 on a busy machine).
	time.Sleep(5 * time.Second)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	growth := int64(ms.HeapAlloc) - int64(base)
	statuses := map[string]int{}
	for _, c := range conns {
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			statuses[fmt.Sprintf("no answer (%v)", err)]++
			continue
		}
		var env struct {
			Error struct{ Message, Code string }
		}
		_ = json.NewDecoder(res.Body).Decode(&env)
		statuses[fmt.Sprintf("%d %s %q, close: %v", res.StatusCode, env.Error.Code, env.Error.Message, res.Close)]++
	}

	t.Logf("%d heads of %d fields: heap %d MiB before, %d MiB more kept 5 s later; answers %v",
		requests, strings.Count(fields.String(), "\n"), base>>20, growth>>20, statuses)
	if growth > bound {
		t.Errorf("the heap grew by %d MiB while the requests stalled, over the bound of %d MiB", growth>>20, bound>>20)
	}
	want := `431 request_header_fields_too_large "the request head has more header fields than the server accepts (1024): send fewer headers", close: true`
	if statuses[want] != requests {
		t.Errorf("answers %v, want %d of %s", statuses, requests, want)
	}
}

// TestRefusedRequestWithStalledBodyIsLetGo: 40 requests without a key announce a body and
// stall. Each is answered 401 at once, and its connection is closed within about half a second:
// the body is read after a closing answer only so long as keeps the answer from a reset. Before,
// the server went on waiting for the body after the 401, up to the body read timeout (60 s by
// default), holding the connection of a caller without a key (the lean path, a small head), and
// with a head of about 1 MiB (1,000 header fields of 1 KiB, within both head limits), which
// net/http serves, the request's head in memory too: 39 MiB for 40 of them a second after their
// answers, and one address could keep its eighth of the connections (1,024 at the default bound).
func TestRefusedRequestWithStalledBodyIsLetGo(t *testing.T) {
	const (
		requests = 40
		deadline = 10 * time.Second
		bound    = 12 << 20
	)
	g := apitest.Start(t, apitest.Options{BodyReadTimeout: deadline})
	addr := strings.TrimPrefix(g.URL, "http://")
	for _, tc := range []struct{ name, fields string }{
		{"small head", ""},
		{"1 MiB head", strings.Repeat("X-Filler: "+strings.Repeat("f", 1000)+"\r\n", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n" +
				tc.fields + "\r\n{\"model\":"
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapAlloc
			conns := make([]net.Conn, requests)
			for i := range conns {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				_ = c.SetDeadline(time.Now().Add(deadline + 20*time.Second)) // a guard
				go func() { _, _ = io.WriteString(c, head) }()
				conns[i] = c
			}
			start := time.Now()
			statuses := map[string]int{}
			readers := make([]*bufio.Reader, requests)
			for i, c := range conns {
				readers[i] = bufio.NewReader(c)
				res, err := http.ReadResponse(readers[i], nil)
				if err != nil {
					statuses[fmt.Sprintf("no answer (%v)", err)]++
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				statuses[strconv.Itoa(res.StatusCode)]++
			}
			// What the heap keeps a second after the answers, the bodies still stalled.
			time.Sleep(time.Second)
			runtime.GC()
			runtime.ReadMemStats(&ms)
			kept := int64(ms.HeapAlloc) - int64(base)
			var lastClose time.Duration
			closed := 0
			for _, br := range readers {
				if _, err := br.ReadByte(); err != nil && !os.IsTimeout(err) {
					closed++
				}
				lastClose = max(lastClose, time.Since(start))
			}
			t.Logf("%d requests without a key, bodies stalled: answers %v; a second later the heap kept %d MiB; %d connections closed, the last %v after the heads were sent",
				requests, statuses, kept>>20, closed, lastClose.Round(time.Millisecond))
			if statuses["401"] != requests || closed != requests {
				t.Errorf("answers %v, %d connections closed; want %d 401s, each connection closed", statuses, closed, requests)
			}
			if lastClose > deadline/2 {
				t.Errorf("the last connection was closed %v after the heads were sent; want well within the body read timeout (%v)", lastClose, deadline)
			}
			if kept > bound {
				t.Errorf("the heap kept %d MiB a second after the answers, over %d MiB", kept>>20, bound>>20)
			}
		})
	}
}
