package logsink

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer records every write to the output.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
	fail   error
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) snapshot() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

func TestBuffersUntilFlushAndKeepsOrder(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Hour, 1<<20)
	defer w.Close()
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if s, n := out.snapshot(); s != "" || n != 0 {
		t.Fatalf("written before a flush: %d writes", n)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	s, n := out.snapshot()
	if n != 1 {
		t.Errorf("%d writes, want one batch", n)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != 100 || lines[0] != "line 0" || lines[99] != "line 99" {
		t.Errorf("lines out of order or lost: %d lines", len(lines))
	}
}

func TestWritesWhenFull(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Hour, 64)
	defer w.Close()
	line := strings.Repeat("x", 40) + "\n"
	fmt.Fprint(w, line)
	if _, n := out.snapshot(); n != 0 {
		t.Fatal("flushed below the limit")
	}
	fmt.Fprint(w, line)
	if s, n := out.snapshot(); n != 1 || s != line+line {
		t.Fatalf("past the limit: %d writes of %q", n, s)
	}
}

func TestCloseFlushesAndTimerFlushes(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Millisecond, 1<<20)
	fmt.Fprint(w, "ticked\n")
	// The timer writes without any Flush; wait for it by polling the output, not by timing.
	for {
		if s, _ := out.snapshot(); s == "ticked\n" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Fprint(w, "closing\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if s, _ := out.snapshot(); s != "ticked\nclosing\n" {
		t.Errorf("after Close: %q", s)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConcurrentWritersLoseNothing(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Millisecond, 256)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(w, "g%d-%d\n", g, i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ := out.snapshot()
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if seen[l] {
			t.Fatalf("line %q twice", l)
		}
		seen[l] = true
	}
	if len(seen) != 8*500 {
		t.Errorf("%d lines, want %d", len(seen), 8*500)
	}
	// Each writer's own lines stay in order.
	last := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var g, i int
		fmt.Sscanf(l, "g%d-%d", &g, &i)
		k := fmt.Sprint(g)
		if prev, ok := last[k]; ok && i != prev+1 {
			t.Fatalf("writer %d: line %d after %d", g, i, prev)
		}
		last[k] = i
	}
}

func TestUrgentRecordsAreWrittenAtOnce(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Hour, 1<<20)
	defer w.Close()
	log := slog.New(w.Urgent(slog.NewJSONHandler(w, nil), slog.LevelWarn)).With("component", "test")
	log.Info("routine")
	if _, n := out.snapshot(); n != 0 {
		t.Fatal("an info record was written at once")
	}
	log.WithGroup("g").Error("broken", "k", "v")
	s, n := out.snapshot()
	if n != 1 || !strings.Contains(s, `"msg":"routine"`) || !strings.Contains(s, `"msg":"broken"`) || !strings.Contains(s, `"component":"test"`) {
		t.Fatalf("after an error record: %d writes: %s", n, s)
	}
}

func TestOutputErrorIsReported(t *testing.T) {
	out := &lockedBuffer{fail: errors.New("disk full")}
	w := New(out, time.Hour, 1<<20)
	fmt.Fprint(w, "x\n")
	if err := w.Flush(); err == nil {
		t.Fatal("Flush hid the output's error")
	}
	if _, err := w.Write([]byte("y\n")); err == nil {
		t.Error("Write after a failed output did not report it")
	}
	_ = w.Close()
}

func TestWritesAfterCloseGoOutAtOnce(t *testing.T) {
	out := &lockedBuffer{}
	w := New(out, time.Hour, 1<<20)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "late\n")
	if s, _ := out.snapshot(); s != "late\n" {
		t.Errorf("after Close: %q", s)
	}
}
