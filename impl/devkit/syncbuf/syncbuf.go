// Package syncbuf holds Buffer, a bytes.Buffer that one goroutine may write while others read
// it: the output of a child process the test kit starts (Redis, PgBouncer, Chromium, Jaeger),
// written by os/exec's copying goroutine and read by a test that fails and shows it.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers. The zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
