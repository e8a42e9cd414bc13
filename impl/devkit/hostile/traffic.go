package hostile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// normalOutcome is what one request of normal traffic got.
type normalOutcome struct {
	start   time.Time
	latency time.Duration
	status  int    // 0: no answer
	err     string // a transport error, or why a 200 was not a whole answer
}

func (n normalOutcome) ok() bool { return n.status == http.StatusOK && n.err == "" }

// normalTraffic sends small chat completions to the fusion model at rate a second until ctx
// ends, and returns what each got once every one has been answered.
func normalTraffic(ctx context.Context, base, key string, rate int) []normalOutcome {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var (
		mu   sync.Mutex
		out  []normalOutcome
		sent sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			sent.Wait()
			return out
		case <-tick.C:
		}
		sent.Go(func() {
			o := normalRequest(client, base, key, seq)
			mu.Lock()
			out = append(out, o)
			mu.Unlock()
		})
	}
}

// normalRequest sends one small chat completion and checks its answer is a whole completion.
func normalRequest(client *http.Client, base, key string, seq int) normalOutcome {
	body := fmt.Sprintf(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"Hello! Say something short, please (%d)."}]}`, seq)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	o := normalOutcome{start: time.Now()}
	res, err := client.Do(req)
	if err != nil {
		o.latency, o.err = time.Since(o.start), err.Error()
		return o
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	o.latency, o.status = time.Since(o.start), res.StatusCode
	var c struct {
		Choices []json.RawMessage `json:"choices"`
	}
	switch {
	case err != nil:
		o.err = err.Error()
	case res.StatusCode == http.StatusOK && (json.Unmarshal(b, &c) != nil || len(c.Choices) == 0):
		o.err = "not a chat completion"
	case res.StatusCode != http.StatusOK:
		o.err = strings.TrimSpace(string(b))
	}
	return o
}

// badOutcome is what one bad request got.
type badOutcome struct {
	kind    string
	status  int    // 0: no HTTP answer
	code    string // the error envelope's code or type, when there is one
	latency time.Duration
	err     string // a transport error, or what the client did instead of reading an answer
}

// label is the outcome as the report counts it.
func (b badOutcome) label() string {
	switch {
	case b.status == 0 && b.err != "":
		return "no answer: " + b.err
	case b.status == 0:
		return "no answer"
	case b.code != "":
		return fmt.Sprintf("%d %s", b.status, b.code)
	}
	return fmt.Sprint(b.status)
}

// badKind is one kind of bad request.
type badKind struct {
	name string
	send func(b *badSender, rng *rand.Rand) badOutcome
}

// badKinds are the kinds of bad request, sent in turn (in an order shuffled by the seed).
var badKinds = []badKind{
	{"prompt 20-30 MB, chat", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", chatPrompt(size(rng)), true)
	}},
	{"prompt 20-30 MB, Responses, chunked", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/responses", responsesPrompt(size(rng)), false)
	}},
	{"image 20-30 MB (base64), chat", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", chatImage(size(rng)), true)
	}},
	{"nesting 1,000,000 deep", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", nested(1_000_000), true)
	}},
	{"nesting 9,990 deep (accepted)", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", nested(9_990), true)
	}},
	{"request head of 1.1-2 MiB", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.hugeHead(1<<20 + 100<<10 + rng.IntN(900<<10))
	}},
	{"invalid UTF-8 in a string", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", invalidUTF8(rng.IntN(4<<20)), true)
	}},
	{"connection closed half-way through 20-30 MB", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.cut(chatPrompt(size(rng)))
	}},
	{"JSON cut short, 20-30 MB", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", truncated(chatPrompt(size(rng))), true)
	}},
	{"slow sender, 3-5 MB at 1 MiB/s", func(b *badSender, rng *rand.Rand) badOutcome {
		return b.post("/v1/chat/completions", slow(chatPrompt(3<<20+rng.IntN(2<<20))), true)
	}},
}

// size is a body size between 20 and 30 MB.
func size(rng *rand.Rand) int { return 20_000_000 + rng.IntN(10_000_001) }

// badTraffic sends o.Bad bad requests, o.Workers at a time, and returns what each got.
func badTraffic(ctx context.Context, base, key string, o Options) []badOutcome {
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 23))
	order := make([]int, o.Bad)
	for i := range order {
		order[i] = i % len(badKinds)
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	jobs := make(chan int)
	out := make([]badOutcome, o.Bad)
	var wg sync.WaitGroup
	for w := range o.Workers {
		wg.Go(func() {
			s := &badSender{base: base, key: key, client: &http.Client{Timeout: 5 * time.Minute,
				Transport: &http.Transport{DisableKeepAlives: true}}}
			r := rand.New(rand.NewPCG(uint64(o.Seed), uint64(w)))
			for i := range jobs {
				k := badKinds[order[i]]
				start := time.Now()
				out[i] = k.send(s, r)
				out[i].kind, out[i].latency = k.name, time.Since(start)
			}
		})
	}
	for i := range order {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			out = out[:i]
			break
		}
		if (i+1)%100 == 0 {
			o.Logf("%d bad requests sent", i+1)
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

// badSender sends bad requests with the hostile account's key.
type badSender struct {
	base, key string
	client    *http.Client
}

// body is a request body: its bytes made as they are read, and their number.
type body struct {
	r io.Reader
	n int64
}

// post sends a body; with announce false it goes without a Content-Length (chunked).
func (b *badSender) post(path string, bd body, announce bool) badOutcome {
	r := bd.r
	if !announce {
		r = struct{ io.Reader }{r} // hides the length from net/http
	}
	req, _ := http.NewRequest("POST", b.base+path, r)
	if announce {
		req.ContentLength = bd.n
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.key)
	res, err := b.client.Do(req)
	if err != nil {
		return badOutcome{err: shortError(err)}
	}
	defer res.Body.Close()
	return answered(res)
}

// answered reads an answer's status and the code (or type) of its error envelope.
func answered(res *http.Response) badOutcome {
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var env struct {
		Error struct {
			Type string  `json:"type"`
			Code *string `json:"code"`
		} `json:"error"`
	}
	o := badOutcome{status: res.StatusCode}
	if res.StatusCode != http.StatusOK && json.Unmarshal(raw, &env) == nil {
		o.code = env.Error.Type
		if env.Error.Code != nil {
			o.code = *env.Error.Code
		}
	}
	return o
}

// hugeHead sends a chat request whose head carries a header of n bytes.
func (b *badSender) hugeHead(n int) badOutcome {
	return b.raw(func(c net.Conn) error {
		const body = `{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
		_, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nX-Filler: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			b.key, strings.Repeat("f", n), len(body), body)
		return err
	}, true)
}

// cut announces a body, sends about half of it and closes the connection.
func (b *badSender) cut(bd body) badOutcome {
	o := b.raw(func(c net.Conn) error {
		if _, err := fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", b.key, bd.n); err != nil {
			return err
		}
		_, err := io.Copy(c, io.LimitReader(bd.r, bd.n/2))
		return err
	}, false)
	if o.status == 0 && o.err == "" {
		o.err = "the client closed the connection"
	}
	return o
}

// raw writes a request on a connection of its own with write, then reads the answer (when
// read is set; else the connection is closed at once).
func (b *badSender) raw(write func(net.Conn) error, read bool) badOutcome {
	c, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		return badOutcome{err: shortError(err)}
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	if !read {
		if err := write(c); err != nil {
			return badOutcome{err: shortError(err)}
		}
		return badOutcome{}
	}
	// The gateway may answer before the request is written whole (a head too large): the
	// answer is read while the request is written.
	wrote := make(chan error, 1)
	go func() { wrote <- write(c) }()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		<-wrote
		return badOutcome{err: shortError(err)}
	}
	o := answered(res)
	_ = c.Close()
	<-wrote
	return o
}

// shortError is a transport error without the URL net/http puts in front of it.
func shortError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// The bodies. Each is made as it is read, so that the run itself holds no 30 MB buffers.

// repeatReader yields n bytes of pattern, repeated.
type repeatReader struct {
	pattern string
	n, off  int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := 0; i < len(p); {
		i += copy(p[i:], r.pattern[(r.off+int64(i))%int64(len(r.pattern)):])
	}
	r.off += int64(len(p))
	return len(p), nil
}

// framed is prefix, n bytes of pattern, and suffix.
func framed(prefix, pattern string, n int, suffix string) body {
	return body{io.MultiReader(strings.NewReader(prefix), &repeatReader{pattern: pattern, n: int64(n)}, strings.NewReader(suffix)),
		int64(len(prefix) + n + len(suffix))}
}

const prose = "the quick brown fox jumps over the lazy dog while the gateway reads on "

func chatPrompt(n int) body {
	return framed(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"`, prose, n, `"}]}`)
}

func responsesPrompt(n int) body {
	return framed(`{"model":"service-flint","max_output_tokens":16,"input":"`, prose, n, `"}`)
}

// chatImage is a chat request with a PNG data URL of n bytes of base64 (within the context
// window: an image counts a fixed number of tokens).
func chatImage(n int) body {
	return framed(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,`,
		"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk", n/4*4, `"}}]}]}`)
}

// nested is a chat request with a metadata value of arrays nested depth deep.
func nested(depth int) body {
	return body{io.MultiReader(strings.NewReader(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"metadata":{"x":`),
		&repeatReader{pattern: "[", n: int64(depth)}, &repeatReader{pattern: "]", n: int64(depth)}, strings.NewReader(`}}`)),
		int64(len(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"metadata":{"x":`) + 2*depth + 2)}
}

// invalidUTF8 is a chat request whose prompt, n bytes of prose, ends in bytes that are not
// UTF-8.
func invalidUTF8(n int) body {
	return framed(`{"model":"service-flint","max_tokens":16,"messages":[{"role":"user","content":"`, prose, n, "caf\xe9 \xff\xfe\"}]}")
}

// truncated is bd without its last 20 bytes: JSON that ends early, its length announced.
func truncated(bd body) body {
	return body{io.LimitReader(bd.r, bd.n-20), bd.n - 20}
}

// slowReader yields at most 64 KiB a read, at 1 MiB a second.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p[:min(len(p), 64<<10)])
	time.Sleep(time.Duration(n) * time.Second / (1 << 20))
	return n, err
}

func slow(bd body) body { return body{slowReader{bd.r}, bd.n} }
