package dataset

import (
	"encoding/binary"
	"fmt"
	"io"
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
