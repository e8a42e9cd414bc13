package readbody

import (
	"fmt"
	"io"
	"slices"
)

// firstRoom is the most Append sets aside for a body before any of it has arrived. A body
// announced as larger gets room as its bytes arrive, so what a slow or stalled sender holds is
// about what it sent, not what it announced.
const firstRoom = 32 << 10

// Append appends what r yields to dst, at most limit bytes. When length (the announced
// Content-Length) is known and within limit, r must yield exactly that many bytes: the room
// they take grows with the bytes that arrived (doubling, from at most firstRoom, and never
// past length), so that a body that fits in firstRoom, or in the room dst already has, is read
// with one allocation at most, and a larger one costs a few more. Otherwise dst grows as the
// bytes arrive. Both request bodies and upstream answers are read with it.
func Append(dst []byte, r io.Reader, length, limit int64) ([]byte, error) {
	if length > 0 && length <= limit {
		end := len(dst) + int(length)
		if cap(dst) < end {
			dst = slices.Grow(dst, min(int(length), max(firstRoom, cap(dst)-len(dst))))
		}
		for len(dst) < end {
			if len(dst) == cap(dst) {
				grown := make([]byte, len(dst), min(end, 2*cap(dst)))
				copy(grown, dst)
				dst = grown
			}
			m, err := r.Read(dst[len(dst):min(cap(dst), end)])
			dst = dst[:len(dst)+m]
			if err == io.EOF && len(dst) < end {
				if len(dst) > end-int(length) {
					err = io.ErrUnexpectedEOF // as io.ReadFull says it
				}
				return nil, err
			}
			if err != nil && err != io.EOF {
				return nil, err
			}
		}
		// The body must end there: one more byte is asked for, into the room past the body
		// when there is some (a local array would escape to the heap).
		probe := dst[len(dst):cap(dst)]
		if len(probe) == 0 {
			probe = make([]byte, 1)
		}
		if m, err := r.Read(probe[:1]); m > 0 || (err != nil && err != io.EOF) {
			return nil, fmt.Errorf("the body is longer than its Content-Length (%v)", err)
		}
		return dst, nil
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
