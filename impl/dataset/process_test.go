package dataset_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/impl/dataset"
)

// TestQueryOutOfItsMemoryCostsOnlyTheEngine: a query whose values DuckDB builds outside its
// memory limit (trial s16h3: replace of a string's every character by the string, list_reduce
// doubling its accumulator) ends in an "out of memory" error of the dataset's engine process,
// bounded by the kernel, while this process (the gateway's) stays small; the next query of the
// dataset works. On the code before, the engine ran in this process, whose peak (VmHWM) grew by
// gigabytes: a larger argument would have had it killed.
func TestQueryOutOfItsMemoryCostsOnlyTheEngine(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{QueryTimeout: 20 * time.Second})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	for _, q := range []string{
		// A 30,000-character string with each character replaced by the string: 900 MB.
		"SELECT length(replace(s, 'a', s)) AS n FROM (SELECT string_agg('a', '') AS s FROM range(30000))",
		// A list doubled 24 times, each step a copy (2.2 GB in the trial).
		"SELECT len(list_reduce(list_transform((SELECT list(x) FROM range(25) t(x)), x -> [x]), (acc, y) -> acc || acc)) AS n",
	} {
		before := peakBytes(t)
		_, err := s.Query(context.Background(), f.a, "sales", q)
		grew := peakBytes(t) - before
		var e *dataset.Error
		if !errors.As(err, &e) || !strings.Contains(strings.ToLower(e.Msg), "out of memory") {
			t.Errorf("%s: %v, want an out-of-memory error", q, err)
		}
		if grew > 256<<20 {
			t.Errorf("%s: this process's peak memory grew by %d MiB", q, grew>>20)
		}
		if r, err := s.Query(context.Background(), f.a, "sales", "SELECT count(*) AS n FROM sales"); err != nil || r.Rows != 1 {
			t.Fatalf("the next query: %+v %v", r, err)
		}
	}
}

// TestQueryThatIgnoresInterruptsIsKilled: a query that does not check for interrupts (trial
// s16h3: a LIKE of 2,000 '%a' over 200,000 characters ran more than a minute past a 5 s
// statement timeout, holding a core) returns the timeout's error once its engine process is
// killed at the timeout plus a short grace; that process is gone, and the next query of the
// dataset materializes it in a new one. On the code before, there was no engine process: the
// query ran in this one.
func TestQueryThatIgnoresInterruptsIsKilled(t *testing.T) {
	f := newFixture(t)
	s := f.service(t, dataset.Options{QueryTimeout: 2 * time.Second})
	mustLoad(t, s, f.a, "sales", dataset.LoadOptions{})
	engines := enginePids(t)
	if len(engines) == 0 {
		t.Fatal("no engine process: the dataset's queries run in this process")
	}
	_, err := s.Query(context.Background(), f.a, "sales",
		"SELECT h LIKE p AS m FROM (SELECT string_agg('a', '') AS h FROM range(400000)), (SELECT string_agg('%a', '') || '%b' AS p FROM range(2000))")
	var e *dataset.Error
	if !errors.As(err, &e) || e.Code != dataset.CodeTimeout || !strings.Contains(e.Msg, "ran longer than the 2s statement timeout") {
		t.Errorf("the query that ignores interrupts: %v, want the timeout's error", err)
	}
	for _, pid := range engines {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("the engine process %d is still there", pid)
		}
	}
	if r, err := s.Query(context.Background(), f.a, "sales", "SELECT count(*) AS n FROM sales"); err != nil || r.Rows != 1 {
		t.Fatalf("the next query: %+v %v", r, err)
	}
	if len(enginePids(t)) == 0 {
		t.Error("the next query ran without an engine process")
	}
}

// peakBytes is this process's peak resident memory (VmHWM).
func peakBytes(t *testing.T) int64 {
	t.Helper()
	return procStatusBytes(t, "self", "VmHWM:")
}

// procStatusBytes reads a field of /proc/<pid>/status given in kB, in bytes.
func procStatusBytes(t testing.TB, pid, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/%s/status", field, pid)
	return 0
}

// enginePids lists the engine processes of this one: its children that run its executable
// (not the test database's server).
func enginePids(t testing.TB) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
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
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "PPid:"); ok && strings.TrimSpace(rest) == self {
				if target, err := os.Readlink("/proc/" + d.Name() + "/exe"); err == nil && target == exe {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}
