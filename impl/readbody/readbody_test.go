package readbody

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// stallingReader yields data in reads of at most step bytes, then fails with errStalled (as a
// body read fails at its deadline). It records the largest room a Read was offered.
type stallingReader struct {
	data    []byte
	step    int
	maxRoom int
}

var errStalled = errors.New("stalled")

func (r *stallingReader) Read(p []byte) (int, error) {
	r.maxRoom = max(r.maxRoom, len(p))
	if len(r.data) == 0 {
		return 0, errStalled
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestAppendBodyRoomFollowsArrivals: a body announced as 32 MiB of which a few KiB arrive
// before it stalls is never given more than firstRoom; one of which 1 MiB arrives, never more
// than twice that. The room grows with what arrived, not with what was announced.
func TestAppendBodyRoomFollowsArrivals(t *testing.T) {
	const announced = 32 << 20
	for _, arrived := range []int{3 << 10, 1 << 20} {
		r := &stallingReader{data: bytes.Repeat([]byte("x"), arrived), step: 16 << 10}
		if _, err := Append(nil, r, announced, announced); !errors.Is(err, errStalled) {
			t.Fatalf("%d bytes arrived: %v, want the reader's error", arrived, err)
		}
		if bound := max(firstRoom, 2*arrived); r.maxRoom > bound {
			t.Errorf("%d bytes arrived: offered room for %d bytes, over %d", arrived, r.maxRoom, bound)
		}
	}
}

// TestAppendBodyAnnounced: a body with a Content-Length is read whole in any pieces, appended
// to what dst holds, using dst's room when it suffices, and refused when it is shorter or
// longer than announced.
func TestAppendBodyAnnounced(t *testing.T) {
	for _, size := range []int{1, 100, firstRoom - 1, firstRoom, firstRoom + 1, 5*firstRoom + 7, 3 << 20} {
		body := strings.Repeat("0123456789abcdef", size/16+1)[:size]
		for name, r := range map[string]io.Reader{
			"whole": strings.NewReader(body),
			"bytes": iotest.OneByteReader(strings.NewReader(body[:min(size, 70_000)])),
			"half":  iotest.HalfReader(strings.NewReader(body)),
		} {
			want := body
			if name == "bytes" {
				want = body[:min(size, 70_000)]
			}
			got, err := Append([]byte("old"), r, int64(len(want)), 32<<20)
			if err != nil || string(got) != "old"+want {
				t.Errorf("%d bytes, %s: got %d bytes, %v", size, name, len(got), err)
			}
		}
		if _, err := Append(nil, strings.NewReader(body), int64(size+1), 32<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d bytes announced as %d: %v, want io.ErrUnexpectedEOF", size, size+1, err)
		}
		if _, err := Append(nil, strings.NewReader(body+"!"), int64(size), 32<<20); err == nil {
			t.Errorf("%d bytes and one more: accepted", size)
		}
	}
	if _, err := Append(nil, strings.NewReader(""), 10, 32<<20); err != io.EOF {
		t.Errorf("nothing of 10 bytes: %v, want io.EOF (as io.ReadFull)", err)
	}
	room := make([]byte, 0, 1<<20)
	got, err := Append(room, strings.NewReader(strings.Repeat("y", 100_000)), 100_000, 32<<20)
	if err != nil || len(got) != 100_000 || &got[0] != &room[:1][0] {
		t.Errorf("a body that fits the room dst has was not read into it (%v)", err)
	}
}

// TestAppendBodyAllocations: a body that fits firstRoom costs no more allocations than when the
// whole announced length was set aside at once: two then (its room and the probe for its end),
// one now when the room has a spare byte for the probe (two under the race detector).
func TestAppendBodyAllocations(t *testing.T) {
	body := []byte(strings.Repeat("z", 3000))
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if _, err := Append(nil, r, int64(len(body)), 32<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%v allocations, want at most 2", allocs)
	}
}
