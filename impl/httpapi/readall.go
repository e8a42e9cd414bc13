package httpapi

import (
	"fmt"
	"io"
	"slices"
)

// appendBody appends what r yields to dst, at most limit bytes. When length (the announced
// Content-Length) is known and within limit, it is read in one go into room of exactly that
// size and r must end there; otherwise dst grows as the bytes arrive. Both request bodies and
// upstream answers are read with it.
func appendBody(dst []byte, r io.Reader, length, limit int64) ([]byte, error) {
	if length > 0 && length <= limit {
		n := int(length)
		dst = slices.Grow(dst, n)
		if _, err := io.ReadFull(r, dst[len(dst):len(dst)+n]); err != nil {
			return nil, err
		}
		var one [1]byte
		if m, err := r.Read(one[:]); m > 0 || (err != nil && err != io.EOF) {
			return nil, fmt.Errorf("the body is longer than its Content-Length (%v)", err)
		}
		return dst[:len(dst)+n], nil
	}
	for {
		dst = slices.Grow(dst, 4<<10)
		m, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+m]
		if int64(len(dst)) > limit {
			return nil, fmt.Errorf("the body is longer than %d bytes", limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
