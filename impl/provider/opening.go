package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/impl/sse"
)

// DefaultOpeningWait is how long, unless Upstream.OpeningWait says otherwise, a streamed answer
// of the Messages kind is held back for its opening events (see checkOpening).
const DefaultOpeningWait = 2 * time.Second

// maxOpeningBytes bounds what checkOpening reads before it hands the stream over.
const maxOpeningBytes = 64 << 10

// openingStatus is the HTTP status Anthropic documents for an error type
// (docs.claude.com, "Errors": 429 rate_limit_error, 500 api_error, 504 timeout_error, 529
// overloaded_error), for the types a retry or another upstream may pass; 0 for the others,
// which are the request's doing and go to the client as they are.
func openingStatus(errType string) int {
	switch errType {
	case "overloaded_error":
		return 529
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	}
	return 0
}

// checkOpening reads a streamed Messages answer's opening events (message_start, pings, the
// start of an empty text or thinking block) until its first content: Anthropic can open a 200 stream with an error event
// (overloaded_error, say) before any content, which no client has seen yet. Such an error of a
// passing kind is a failed try like a 529 status (retried, then another expert), not an answer.
// Anything else is handed over whole: the body replays what was read, then reads on. The wait
// is bounded by wait: an upstream whose first content takes longer (a long prompt's prefill)
// is handed over when it expires, with what was read so far and the read in flight, so that its
// client gets its opening events and keep-alives as before; an error after that reaches the
// client in the stream, as before.
func checkOpening(res *http.Response, wait time.Duration) (*http.Response, *failure) {
	o := &openingBody{body: res.Body, done: make(chan struct{})}
	go o.read()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-o.done:
	case <-timer.C:
		res.Body = o
		return res, nil
	}
	if o.fail != nil {
		_ = res.Body.Close()
		return nil, o.fail
	}
	res.Body = o
	return res, nil
}

// openingBody is a streamed answer's body whose opening events were read ahead (read): Read
// waits for that reading to end, returns what it read, then reads the body itself.
type openingBody struct {
	body io.ReadCloser
	done chan struct{}

	// Set by read before done is closed.
	buf  bytes.Buffer
	err  error
	fail *failure
	// first is the answer's first byte that is not blank, for readFirstByte (0: none came).
	first byte

	closeOnce sync.Once
}

// read reads events until the first that carries content, an error, or maxOpeningBytes; every byte it takes from the body is kept for Read.
func (o *openingBody) read() {
	defer close(o.done)
	rec := &recording{r: o.body, to: &o.buf}
	r := sse.NewReader(rec)
	for o.buf.Len() < maxOpeningBytes {
		ev, err := r.Next()
		if err != nil {
			// The body's own error (its end, a cut) ends Read once the bytes are out; one
			// of the reader's (a line too long) is the stream's to meet, reading on.
			o.err = rec.err
			return
		}
		switch ev.Name {
		case "message_start", "ping":
			continue
		case "content_block_start":
			if emptyTextBlock(ev.Data) {
				continue
			}
		case "error":
			var env struct {
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(ev.Data, &env) == nil {
				if status := openingStatus(env.Error.Type); status != 0 {
					o.fail = &failure{status: status, retryable: true, detail: upstreamDetail{message: env.Error.Message, code: env.Error.Type}}
				}
			}
		}
		return
	}
}

// emptyTextBlock reports whether a content_block_start event opens a text or thinking block
// with nothing in it yet: no content a client could have used.
func emptyTextBlock(data []byte) bool {
	var ev struct {
		ContentBlock struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"content_block"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	b := ev.ContentBlock
	return (b.Type == "text" || b.Type == "thinking") && b.Text == "" && b.Thinking == ""
}

// Read returns the bytes read ahead, then the body's own, and the error that ended the read
// ahead (if it ended the body) once the bytes are out.
func (o *openingBody) Read(p []byte) (int, error) {
	<-o.done
	if o.buf.Len() > 0 {
		return o.buf.Read(p)
	}
	if o.err != nil {
		return 0, o.err
	}
	return o.body.Read(p)
}

// Close closes the body (which ends a read ahead still waiting on it).
func (o *openingBody) Close() error {
	var err error
	o.closeOnce.Do(func() { err = o.body.Close() })
	return err
}

// recording is a reader that keeps a copy of every byte it reads, and the error that ended
// its reading.
type recording struct {
	r   io.Reader
	to  *bytes.Buffer
	err error
}

func (c *recording) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.to.Write(p[:n])
	if err != nil {
		c.err = err
	}
	return n, err
}
