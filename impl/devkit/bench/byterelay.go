package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// ByteRelay is the floor the bench measures every relay against: a hand-written HTTP/1.1 relay
// that does the least a process forwarding requests can do. Each client connection gets one
// upstream connection of its own, dialled when the client connects; a request is read up to the
// end of its Content-Length body and written to the upstream as it came, and the answer is
// written back as it came, framed by its Content-Length or, for a streamed answer, forwarded
// chunk by chunk as the chunks arrive. It parses nothing but the framing: no http.Request, no
// header map, no pool, no deadlines.
//
// It is a measuring instrument, not a server: requests with a chunked body, answers framed by
// the connection's end and anything malformed close the connection. Shutdown and Close both
// close the listener and every connection at once.
type ByteRelay struct {
	// Upstream is the host:port every connection is relayed to.
	Upstream string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// errFraming is a message the byte relay does not frame.
var errFraming = errors.New("bench: message framing the byte relay does not handle")

// Serve relays the connections accepted on ln until Close; it returns http.ErrServerClosed
// then, as net/http's servers do.
func (r *ByteRelay) Serve(ln net.Listener) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return http.ErrServerClosed
	}
	r.ln = ln
	r.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			r.wg.Wait()
			if r.isClosed() {
				return http.ErrServerClosed
			}
			return err
		}
		if !r.open(c) {
			c.Close()
			continue
		}
		r.wg.Go(func() {
			defer r.forget(c)
			defer c.Close()
			r.relay(c)
		})
	}
}

// Shutdown is Close: the relay has no requests worth waiting for.
func (r *ByteRelay) Shutdown(context.Context) error { return r.Close() }

// Close stops accepting and closes every connection.
func (r *ByteRelay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.ln != nil {
		r.ln.Close()
	}
	for c := range r.conns {
		c.Close()
	}
	return nil
}

func (r *ByteRelay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// open adds c to the connections Close closes; it fails once the relay is closed.
func (r *ByteRelay) open(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.conns == nil {
		r.conns = make(map[net.Conn]struct{})
	}
	r.conns[c] = struct{}{}
	return true
}

// forget removes c from the open connections.
func (r *ByteRelay) forget(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

// relay serves one client connection until either side closes or misframes a message.
func (r *ByteRelay) relay(client net.Conn) {
	up, err := net.Dial("tcp", r.Upstream)
	if err != nil {
		return
	}
	if !r.open(up) {
		up.Close()
		return
	}
	defer r.forget(up)
	defer up.Close()
	cr, ur := bufio.NewReaderSize(client, 4<<10), bufio.NewReaderSize(up, 4<<10)
	var buf []byte
	for {
		var h head
		if buf, h, err = readHead(cr, buf[:0]); err != nil || h.chunked {
			return
		}
		if buf, err = appendN(buf, cr, h.length); err != nil {
			return
		}
		if _, err = up.Write(buf); err != nil {
			return
		}
		if buf, h, err = readHead(ur, buf[:0]); err != nil {
			return
		}
		if h.chunked {
			err = relayChunks(client, ur, buf)
		} else if h.length >= 0 {
			if buf, err = appendN(buf, ur, h.length); err == nil {
				_, err = client.Write(buf)
			}
		} else {
			err = errFraming
		}
		if err != nil {
			return
		}
	}
}

// head is what the byte relay reads from a message head: its body's framing.
type head struct {
	// length is the Content-Length, or -1 when there is none.
	length  int
	chunked bool
}

// readHead appends a message head (start line and header lines, up to the empty line) read
// from br to dst.
func readHead(br *bufio.Reader, dst []byte) ([]byte, head, error) {
	h := head{length: -1}
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return dst, h, err
		}
		dst = append(dst, line...)
		if len(line) <= 2 {
			if first {
				return dst, h, errFraming
			}
			return dst, h, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || first {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return dst, h, errFraming
			}
			h.length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			h.chunked = bytes.EqualFold(value, []byte("chunked"))
			if !h.chunked {
				return dst, h, errFraming
			}
		}
	}
}

// appendN appends n bytes read from br to dst (none when n is negative).
func appendN(dst []byte, br *bufio.Reader, n int) ([]byte, error) {
	if n <= 0 {
		return dst, nil
	}
	at := len(dst)
	dst = append(dst, make([]byte, n)...)
	_, err := io.ReadFull(br, dst[at:])
	return dst, err
}

// relayChunks forwards a chunked body from br to w after the head in pending: whatever has
// arrived is written as soon as no more is waiting in br, so no chunk waits for the next one.
func relayChunks(w io.Writer, br *bufio.Reader, pending []byte) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		pending = append(pending, line...)
		sizeField, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		size, err := strconv.ParseUint(string(sizeField), 16, 32)
		if err != nil {
			return errFraming
		}
		if size == 0 {
			// The trailer section, up to its empty line, ends the body.
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				pending = append(pending, line...)
				if len(line) <= 2 {
					_, err = w.Write(pending)
					return err
				}
			}
		}
		if pending, err = appendN(pending, br, int(size)+2); err != nil {
			return err
		}
		if br.Buffered() == 0 {
			if _, err := w.Write(pending); err != nil {
				return err
			}
			pending = pending[:0]
		}
	}
}
