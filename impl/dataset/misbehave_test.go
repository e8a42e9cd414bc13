package dataset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Statements that the engine of this test binary answers by misbehaving (engineTestQueries):
// what a broken engine, or one a tenant's SQL had taken over, might do to its parent.
const (
	// strayOutputQuery writes to the engine's standard output, through os.Stdout and straight
	// to fd 1 (as DuckDB's C++ code would), then answers properly.
	strayOutputQuery = "SELECT 'tollgate test: stray output' AS x"
	// malformedFrameQuery is answered by a frame whose bytes are not JSON.
	malformedFrameQuery = "SELECT 'tollgate test: malformed frame' AS x"
	// oversizedFrameQuery is answered by a frame's head announcing 4 GiB.
	oversizedFrameQuery = "SELECT 'tollgate test: oversized frame' AS x"
	// noResultQuery is answered by a response of its id without a result or an error.
	noResultQuery = "SELECT 'tollgate test: no result' AS x"
	// claimedFrameQuery is answered by a frame's head announcing maxFrame, 100 bytes of it, and
	// nothing more, the engine alive.
	claimedFrameQuery = "SELECT 'tollgate test: a large frame announced' AS x"
	// hangInReadQuery blocks in a read(2) of a pipe nobody writes: a query stuck without using
	// a core, which no interrupt reaches.
	hangInReadQuery = "SELECT 'tollgate test: hang in a read' AS x"
	// slowQuery answers after 1.5 s.
	slowQuery = "SELECT 'tollgate test: slow' AS x"
	// stopQuery stops the engine (SIGSTOP to itself): it reads no more requests.
	stopQuery = "SELECT 'tollgate test: stop' AS x"
)

// strayOutput is what strayOutputQuery writes to the engine's standard output.
const strayOutput = "stray output of a library"

var _ = installMisbehaviours()

// installMisbehaviours fills engineTestQueries; it runs as a package variable's initializer, so
// before init makes this test binary an engine.
func installMisbehaviours() bool {
	engineTestQueries = map[string]func(id uint64, out io.Writer){
		strayOutputQuery: func(id uint64, out io.Writer) {
			fmt.Println(strayOutput)
			_, _ = syscall.Write(1, []byte{0, 0, 0, 5, 'j', 'u', 'n', 'k', '!', '\n'})
			_ = writeFrame(out, okAnswer(id))
		},
		malformedFrameQuery: func(id uint64, out io.Writer) {
			_, _ = out.Write(append(frameHead(10), "not json!!"...))
		},
		oversizedFrameQuery: func(id uint64, out io.Writer) {
			_, _ = out.Write(frameHead(1<<32 - 1))
		},
		noResultQuery: func(id uint64, out io.Writer) {
			_ = writeFrame(out, engineResponse{ID: id})
		},
		hangInReadQuery: func(uint64, io.Writer) {
			var fds [2]int
			if err := syscall.Pipe(fds[:]); err == nil {
				var b [1]byte
				_, _ = syscall.Read(fds[0], b[:])
			}
		},
		slowQuery: func(id uint64, out io.Writer) {
			time.Sleep(1500 * time.Millisecond)
			_ = writeFrame(out, okAnswer(id))
		},
		stopQuery: func(uint64, io.Writer) {
			_ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP)
		},
		claimedFrameQuery: func(id uint64, out io.Writer) {
			_, _ = out.Write(append(frameHead(maxFrame), make([]byte, 100)...))
			select {}
		},
	}
	return true
}

// okAnswer is a query's answer of one row.
func okAnswer(id uint64) engineResponse {
	return engineResponse{ID: id, Result: &engineResult{Text: []byte("x\n--\nok\n(1 row)\n"), Columns: []Column{{Name: "x", Type: "VARCHAR"}}, Rows: 1}}
}

// frameHead is a frame's head announcing n bytes.
func frameHead(n uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return b[:]
}

// TestStrayOutputOfTheEngineGoesToItsLog: what else in an engine process writes to its
// standard output (a library's fmt.Println, DuckDB's C++ code writing to fd 1) goes to the
// engine's log, and the protocol, on a descriptor of its own, goes on: the query is answered,
// and so is the next one by the same process. Before, the protocol ran on fd 1: the stray bytes
// were read as a frame's head, and the parent killed the engine (reported as out of memory).
func TestStrayOutputOfTheEngineGoesToItsLog(t *testing.T) {
	ctx := t.Context()
	s, acct := loadedService(t, "stray", Options{})
	e := s.entries[entryKey{acct.ID, "t"}]
	r, err := s.Query(ctx, acct.ID, "t", strayOutputQuery)
	if err != nil || !strings.Contains(r.Text, "ok") {
		t.Fatalf("the query whose engine wrote to its standard output: %+v %v", r, err)
	}
	r, err = s.Query(ctx, acct.ID, "t", "SELECT * FROM t")
	if err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the next query: %+v %v", r, err)
	}
	if s.entries[entryKey{acct.ID, "t"}] != e || !e.proc.alive() {
		t.Error("the engine was replaced")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.proc.stderr.String(), strayOutput) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if log := e.proc.stderr.String(); !strings.Contains(log, strayOutput) || !strings.Contains(log, "junk!") {
		t.Errorf("the engine's log %q lacks its stray output", log)
	}
}

// TestMalformedAnswerStopsOnlyItsEngine: an engine whose answer is not the protocol's (a frame
// that is not JSON, a head announcing 4 GiB, a response without its result) is killed, its
// entry dropped, the caller told so plainly, and the next query is answered by a new engine;
// the gateway neither panics nor allocates what a head announces. Before, the first two were
// reported as the query running out of memory (the parent's own kill taken for the kernel's),
// and the third was an internal error that left the engine in place.
func TestMalformedAnswerStopsOnlyItsEngine(t *testing.T) {
	ctx := t.Context()
	s, acct := loadedService(t, "malformed", Options{})
	k := entryKey{acct.ID, "t"}
	for _, q := range []string{malformedFrameQuery, oversizedFrameQuery, noResultQuery} {
		s.mu.Lock()
		e := s.entries[k]
		s.mu.Unlock()
		_, err := s.Query(ctx, acct.ID, "t", q)
		var ue *Error
		if !errors.As(err, &ue) || ue.Code != CodeFailed || !strings.Contains(ue.Msg, "not the engine's protocol") || !strings.Contains(ue.Msg, "retry") {
			t.Errorf("%s: %v, want the engine's protocol named", q, err)
		}
		if e.proc.wait(5 * time.Second); e.proc.alive() {
			t.Errorf("%s: the engine is still running", q)
		}
		s.mu.Lock()
		kept := s.entries[k] == e
		s.mu.Unlock()
		if kept {
			t.Errorf("%s: the engine's entry was kept", q)
		}
		if r, err := s.Query(ctx, acct.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
			t.Fatalf("%s: the next query: %+v %v", q, r, err)
		}
	}
	noZombies(t)
}

// TestAnnouncedFrameIsNotAllocatedAhead: an engine that announces a frame of maxFrame (64 MiB)
// and sends 100 bytes of it costs the gateway what it sent, not what it announced, until the
// query's kill at its timeout and grace. Before, the parent allocated the whole 64 MiB on the
// head alone (sixteen engines doing so, 1 GiB).
func TestAnnouncedFrameIsNotAllocatedAhead(t *testing.T) {
	s, acct := loadedService(t, "announced", Options{QueryTimeout: time.Second})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := s.Query(t.Context(), acct.ID, "t", claimedFrameQuery)
	runtime.ReadMemStats(&after)
	var ue *Error
	if !errors.As(err, &ue) || ue.Code != CodeTimeout {
		t.Errorf("the query whose answer never came: %v, want the timeout's error", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the gateway allocated %d MiB for an announced frame", grew>>20)
	}
	if r, err := s.Query(t.Context(), acct.ID, "t", "SELECT * FROM t"); err != nil || !strings.Contains(r.Text, "1\n(1 row)") {
		t.Fatalf("the next query: %+v %v", r, err)
	}
}

// noZombies fails the test if a child of this process stays a zombie (exited, not waited for)
// for more than a few seconds: every engine process is waited for.
func noZombies(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		z := childPids(t, "Z")
		if len(z) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("zombie children: %v", z)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// childPids lists this process's children (any executable) in state state ("Z": zombies).
func childPids(t testing.TB, state string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		var ppid, st string
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid = strings.TrimSpace(rest)
			}
			if rest, ok := strings.CutPrefix(line, "State:"); ok {
				st = strings.TrimSpace(rest)
			}
		}
		if ppid == self && strings.HasPrefix(st, state) {
			pids = append(pids, pid)
		}
	}
	return pids
}
