package hostile

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"
	"unicode/utf8"
)

// TestBodiesAreWhatTheySay: each bad body yields exactly the length it announces, and is the
// kind of bad it is named for.
func TestBodiesAreWhatTheySay(t *testing.T) {
	read := func(name string, b body) []byte {
		t.Helper()
		got, err := io.ReadAll(b.r)
		if err != nil || int64(len(got)) != b.n {
			t.Fatalf("%s: read %d bytes (%v), announced %d", name, len(got), err, b.n)
		}
		return got
	}
	for name, b := range map[string]body{"chat": chatPrompt(1 << 20), "responses": responsesPrompt(1 << 20), "image": chatImage(1<<20 + 3)} {
		if got := read(name, b); !json.Valid(got) {
			t.Errorf("%s: not JSON: %.100s", name, got)
		}
	}
	if got := read("nested", nested(100)); !json.Valid(got) || !bytes.Contains(got, bytes.Repeat([]byte("["), 100)) || bytes.Contains(got, bytes.Repeat([]byte("["), 101)) {
		t.Errorf("nested 100 deep: %.200s", got)
	}
	if got := read("invalid UTF-8", invalidUTF8(1000)); utf8.Valid(got) {
		t.Error("the invalid UTF-8 body is valid UTF-8")
	}
	if got := read("truncated", truncated(chatPrompt(1000))); json.Valid(got) {
		t.Error("the truncated body is valid JSON")
	}
	start := time.Now()
	read("slow", slow(chatPrompt(256<<10)))
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("256 KiB from the slow sender in %s, faster than 1 MiB a second", d)
	}
}

// TestQuantile: nearest-rank quantiles.
func TestQuantile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Errorf("p50 %s, p99 %s of 1..100 ms", p50, p99)
	}
	if q := quantile(lat[:1], 0.99); q != time.Millisecond {
		t.Errorf("p99 of one: %s", q)
	}
}
