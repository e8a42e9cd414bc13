package upstreamconn

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// bodyState is where a responseBody stands.
type bodyState int

const (
	// bodyReading: the body owns the connection and may read more.
	bodyReading bodyState = iota
	// bodyFinished: the body ended (io.EOF) or failed, and the connection was given back or
	// closed; Read returns the final error again.
	bodyFinished
	// bodyClosed: Close was called; Read returns http.ErrBodyReadAfterClose.
	bodyClosed
)

// responseBody is the Body of a response that owns its connection. It gives the connection
// back to the pool when it is read to io.EOF and keep-alive is allowed, and closes it when the
// read fails, the context is cancelled or the body is closed before its end. Close may be
// called while a Read is blocked (on another goroutine); it closes the connection, which ends
// that Read.
type responseBody struct {
	t         *Transport
	c         *conn
	src       io.ReadCloser // the body readResponse returned; never closed, as that would drain it
	ctx       context.Context
	stopWatch func() bool // stops the cancellation watch; nil for a context that cannot be cancelled
	keepAlive bool

	mu    sync.Mutex
	state bodyState
	err   error // the final error once bodyFinished
}

func (b *responseBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch b.state {
	case bodyFinished:
		err := b.err
		b.mu.Unlock()
		return 0, err
	case bodyClosed:
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	}
	b.mu.Unlock()

	n, err := b.src.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.state == bodyClosed:
		// Close ran while this Read was blocked and has already closed the connection.
		if err != io.EOF {
			err = http.ErrBodyReadAfterClose
		}
		return n, err
	case err == io.EOF:
		b.finish(io.EOF, b.keepAlive)
	default:
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		b.finish(err, false)
	}
	return n, err
}

// Close ends the body. Before io.EOF this discards the connection rather than reading the rest.
func (b *responseBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == bodyReading {
		b.finish(http.ErrBodyReadAfterClose, false)
	}
	b.state = bodyClosed
	return nil
}

// finish records the body's final error and releases the connection: back to the pool when
// reuse is allowed and the cancellation watch could be stopped before it fired, else closed.
// b.mu is held.
func (b *responseBody) finish(err error, reuse bool) {
	b.state, b.err = bodyFinished, err
	if b.stopWatch != nil && !b.stopWatch() {
		reuse = false
	}
	if reuse {
		b.t.putIdle(b.c)
	} else {
		b.c.close()
	}
	b.c = nil
}
