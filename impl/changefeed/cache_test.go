package changefeed

import (
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	f := &Feed{}
	c := NewCache[string, int](f, time.Minute, 10, nil)
	loads := 0
	load := func() (int, error) { loads++; return loads, nil }

	// Not live: nothing is served from memory.
	c.Get("a", load)
	c.Get("a", load)
	if loads != 2 {
		t.Fatalf("served from memory while not live: %d loads", loads)
	}
	f.live.Store(true)
	v1, _ := c.Get("a", load)
	v2, _ := c.Get("a", load)
	if v1 != v2 || loads != 3 {
		t.Fatalf("live: %d %d after %d loads", v1, v2, loads)
	}
	c.Invalidate("a")
	if v, _ := c.Get("a", load); v != 4 {
		t.Fatalf("after Invalidate: %d", v)
	}
	// A value loaded while an invalidation happened is not stored.
	c.Get("b", func() (int, error) { c.Invalidate("b"); return 100, nil })
	if v, _ := c.Get("b", func() (int, error) { return 200, nil }); v != 200 {
		t.Fatalf("a raced load was cached: %d", v)
	}
	c.Reset()
	if v, _ := c.Get("a", load); v != 5 {
		t.Fatalf("after Reset: %d", v)
	}
}
