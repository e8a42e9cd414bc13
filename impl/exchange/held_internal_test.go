package exchange

import (
	"runtime"
	"testing"
	"weak"

	"github.com/tollgate/tollgate/impl/sse"
)

// TestHeldOpeningIsReleased: the copies a stream holds of its opening events (up to
// maxHeldBytes) are no longer reachable once the held events are released, whether they were
// written (the upstream's first output, or the bounds passed) or go to no one (a failover to
// the next expert), though the array that held them is kept for the next expert's opening.
// Before, the events were forgotten by reslicing to zero length: the array kept the copies
// reachable for as long as the stream that followed lasted (the rest of the same stream, or
// the next expert's whole stream after a failover).
func TestHeldOpeningIsReleased(t *testing.T) {
	var h heldOpening
	evs := []sse.Event{
		{Name: "message_start", Data: make([]byte, 64<<10)},
		{Name: "ping", Data: make([]byte, 64<<10)},
	}
	if !h.hold(evs) {
		t.Fatal("two events of 64 KiB were not held")
	}
	copies := make([]weak.Pointer[byte], len(h.events))
	for i, ev := range h.events {
		if &ev.Data[0] == &evs[i].Data[0] {
			t.Fatal("the held event is not a copy")
		}
		copies[i] = weak.Make(&ev.Data[0])
	}
	h.release()
	runtime.GC()
	runtime.GC()
	for i, c := range copies {
		if c.Value() != nil {
			t.Errorf("the copy of held event %d is still reachable after the release", i)
		}
	}
	if len(h.events) != 0 || h.bytes != 0 || cap(h.events) < 2 {
		t.Errorf("after the release: %d events, %d bytes, room for %d: want none, and the array kept", len(h.events), h.bytes, cap(h.events))
	}
	// The next opening reuses the array: holding it allocates its copies only.
	small := []sse.Event{{Name: "ping", Data: []byte(`{"type":"ping"}`)}}
	if n := testing.AllocsPerRun(100, func() {
		h.hold(small)
		h.release()
	}); n != 1 {
		t.Errorf("holding one event after a release allocates %v times, want 1 (its copy)", n)
	}
	// The bounds still hold: an event past maxHeldBytes is not held.
	if h.hold([]sse.Event{{Data: make([]byte, maxHeldBytes+1)}}) || len(h.events) != 0 {
		t.Error("an event past maxHeldBytes was held")
	}
}
