package h1server

import (
	"io"
	"net/http"
	"sync"
)

// maxPostHandlerReadBytes is how much of a request body the server reads after the handler
// left it unread, to keep the connection usable; with more left it closes the connection
// instead. It is net/http's value and rule.
const maxPostHandlerReadBytes = 256 << 10

// body is the Body of a request with a Content-Length. It reads from the connection's buffer
// first and then from the connection, never past the declared length, so whatever follows
// stays buffered for the next request. Its methods are safe for concurrent use, as net/http's.
type body struct {
	c          *conn
	mu         sync.Mutex
	remaining  int64 // bytes of the body not read yet
	closing    bool  // the request asked to close the connection: Close does not read the rest
	sawEOF     bool
	closed     bool
	earlyClose bool // closed with more than maxPostHandlerReadBytes unread: the connection is not reused
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.readLocked(p)
}

// readLocked reads like net/http's body: the final bytes come with io.EOF, and a connection that
// ends early gives io.ErrUnexpectedEOF once and io.EOF after.
func (b *body) readLocked(p []byte) (int, error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.readBody(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		b.hitEOF()
		return n, io.EOF
	}
	if err == io.EOF {
		b.sawEOF = true
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// hitEOF records that the body was read to its end, which lets the connection watcher start.
func (b *body) hitEOF() {
	b.sawEOF = true
	b.c.bodyDone()
}

// discardLocked drops up to limit unread bytes without copying them, like
// io.CopyN(io.Discard, body, limit), and returns how many it dropped.
func (b *body) discardLocked(limit int64) (int64, error) {
	var total int64
	for total < limit {
		if b.sawEOF {
			return total, io.EOF
		}
		n, err := b.c.discardBody(min(limit-total, b.remaining))
		total += int64(n)
		b.remaining -= int64(n)
		if b.remaining == 0 {
			b.hitEOF()
			continue
		}
		if err == io.EOF {
			b.sawEOF = true
			return total, io.ErrUnexpectedEOF
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Close is net/http's early close for server request bodies: it reads the rest of the body to
// keep the connection usable when that is at most maxPostHandlerReadBytes, and otherwise marks
// the connection for closing without reading. It reads nothing when the request asked to close
// the connection anyway.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	var err error
	switch {
	case b.sawEOF, b.closing:
	case b.remaining > maxPostHandlerReadBytes:
		b.earlyClose = true
	default:
		var n int64
		n, err = b.discardLocked(maxPostHandlerReadBytes)
		if err == io.EOF {
			err = nil
		}
		if n == maxPostHandlerReadBytes {
			b.earlyClose = true
		}
	}
	b.closed = true
	return err
}

// didEarlyClose reports whether Close gave up on the rest of the body.
func (b *body) didEarlyClose() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.earlyClose
}

// state reports, for the response's check before its head, whether the body was closed, whether
// it was read to its end and how much of it is left.
func (b *body) state() (closed, sawEOF bool, remaining int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed, b.sawEOF, b.remaining
}

// discard is io.CopyN(io.Discard, b, limit) without the copy.
func (b *body) discard(limit int64) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.discardLocked(limit)
}

// abandon makes the body unusable without reading it, when the connection is closed after a
// panic.
func (b *body) abandon() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}
