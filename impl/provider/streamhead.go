package provider

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// NotAStream is ErrorType's word, and the usage record's status, for a try whose upstream
// answered a streamed request 2xx with something other than an event stream
// (checkStreamHead), or any request 2xx with an error in place of the answer (ErrorInAnswer):
// an answer that came and could not be used, as a non-streamed answer that cannot be read is.
const NotAStream = "upstream_malformed"

// eventStreamType is the media type of a 2xx answer's Content-Type (without its parameters) and
// whether it is an event stream: text/event-stream, in any case. The type is "" when the
// answer has no Content-Type.
func eventStreamType(h http.Header) (mediaType string, isStream bool) {
	mediaType = h.Get("Content-Type")
	if i := strings.IndexByte(mediaType, ';'); i >= 0 {
		mediaType = mediaType[:i]
	}
	mediaType = strings.TrimSpace(mediaType)
	return mediaType, strings.EqualFold(mediaType, "text/event-stream")
}

// checkStreamHead reads what a 2xx answer to a streamed request is before any of it can reach
// the client: an answer that is not an event stream (a proxy's HTML page, a JSON error, a
// whole JSON answer from a server that ignored "stream") is a failed try, which the caller
// fails over as it does a 5xx, rather than the head of a 200 stream that then ends with an
// in-band error. The Content-Type decides: text/event-stream (any case, with or without
// parameters) is a stream and nothing is read; JSON, HTML and XML (surelyNotAStream) are not.
// An answer with no Content-Type (some OpenAI-compatible servers send none) or of another type
// (text/plain, application/octet-stream) is decided by its first byte that is not blank, waited for at most wait: an event stream's lines begin with a field ("data:",
// "event:", "id:", "retry:") or a comment (":"), a JSON body with '{' or '[', a page with '<'.
// A first byte that is not there when wait expires (a long prefill) leaves the answer a stream,
// as before, with what was read replayed; so does a negative wait.
//
// The failure keeps what the upstream said (at most 64 KiB read, its message or an excerpt,
// the key elided) for the logs and the try's span; the client gets the gateway's words.
func (u *Upstream) checkStreamHead(res *http.Response, wait time.Duration, cred *Credential) (*http.Response, *failure) {
	mediaType, isStream := eventStreamType(res.Header)
	if isStream {
		return res, nil
	}
	if mediaType == "" || !surelyNotAStream(mediaType) {
		if wait < 0 {
			return res, nil
		}
		o := &openingBody{body: res.Body, done: make(chan struct{})}
		go o.readFirstByte()
		timer := time.NewTimer(wait)
		defer timer.Stop()
		res.Body = o
		select {
		case <-o.done:
		case <-timer.C:
			return res, nil
		}
		if beginsEventStream(o.first) {
			return res, nil
		}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if f := u.answerFailure(res.StatusCode, raw, cred, true); f != nil {
		// An error in place of the stream is judged by its kind, as the same error answered
		// to a request not streamed is (answererror.go).
		return nil, f
	}
	return nil, &failure{status: res.StatusCode, notStream: notStreamLabel(mediaType),
		detail: u.wordsIn(raw, cred), provider: u.Name, accountKey: cred != nil}
}

// surelyNotAStream reports whether mediaType (not text/event-stream) names a body that cannot
// be an event stream: JSON (application/json, any +json), HTML or XML. A body of another type
// (text/plain, application/octet-stream: a compatible server may label a real event stream so)
// is decided by its first byte, as one with no Content-Type is.
func surelyNotAStream(mediaType string) bool {
	t := strings.ToLower(mediaType)
	switch {
	case t == "application/json", strings.HasSuffix(t, "+json"),
		t == "text/html", t == "application/xhtml+xml",
		t == "application/xml", t == "text/xml", strings.HasSuffix(t, "+xml"):
		return true
	}
	return false
}

// notStreamLabel names, in the client's error, what an answer that is not an event stream was:
// its media type when that is a plain token (an upstream cannot put words of its own there).
func notStreamLabel(mediaType string) string {
	switch {
	case mediaType == "":
		return "a body with no Content-Type"
	case plainToken(mediaType, 100, "/+") != "":
		return strings.ToLower(mediaType)
	}
	return "a body of another Content-Type"
}

// notStreamMessage is the client's error message for an answer that is not an event stream.
func notStreamMessage(label string) string {
	return fmt.Sprintf("the upstream answered the streamed request with %s, not an event stream", label)
}

// beginsEventStream reports whether c, the first byte of an answer that is not blank (0 when
// the answer ended before one), can begin an event stream: a field's name ("data", "event",
// "id", "retry") or a comment's colon.
func beginsEventStream(c byte) bool {
	switch c {
	case 'd', 'e', 'i', 'r', ':':
		return true
	}
	return false
}

// readFirstByte reads the body until its first byte that is not blank (space, tab, line ends, a
// UTF-8 byte order mark), its end, or maxOpeningBytes: that byte is in first (0 when none came).
// Every byte it takes from the body is kept for Read.
func (o *openingBody) readFirstByte() {
	defer close(o.done)
	var p [512]byte
	for o.buf.Len() < maxOpeningBytes {
		n, err := o.body.Read(p[:])
		o.buf.Write(p[:n])
		for _, c := range p[:n] {
			switch c {
			case ' ', '\t', '\r', '\n', 0xEF, 0xBB, 0xBF:
				continue
			}
			o.first = c
			o.err = err
			return
		}
		if err != nil {
			o.err = err
			return
		}
	}
}
