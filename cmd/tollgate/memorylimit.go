package main

import (
	"bufio"
	"bytes"
	"log/slog"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/impl/config"
)

// applyMemoryLimit sets the Go runtime's soft memory limit and leaves the limit in force in
// cfg.Server.MemoryLimitMB, from which the body budget's default is derived: GOMEMLIMIT when it
// is set; else memory_limit_mb when positive; when it is 0 (the default), one derived from the
// machine (config.DefaultMemoryLimitMB: three quarters of the process's cgroup memory limit,
// else a quarter of the physical memory, between 256 MiB and 1 GiB); -1: none. It logs what it
// chose.
func applyMemoryLimit(cfg *config.Config, log *slog.Logger) {
	s := &cfg.Server
	from := "configuration"
	switch _, set := os.LookupEnv("GOMEMLIMIT"); {
	case set:
		from = "GOMEMLIMIT"
		s.MemoryLimitMB = -1
		if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
			s.MemoryLimitMB = int(limit >> 20)
		}
	case s.MemoryLimitMB == 0:
		cgroup, physical := cgroupMemoryLimit(), physicalMemory()
		s.MemoryLimitMB = config.DefaultMemoryLimitMB(cgroup, physical)
		from = "a quarter of the physical memory"
		if cgroup > 0 {
			from = "three quarters of the cgroup's memory limit"
		}
		if s.MemoryLimitMB == 0 {
			s.MemoryLimitMB, from = -1, "none known"
		}
	}
	if from != "GOMEMLIMIT" && s.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(int64(s.MemoryLimitMB) << 20)
	}
	log.Info("memory limit", "limit_mb", max(s.MemoryLimitMB, 0), "from", from, "body_budget_mb", s.BodyBudgetBytes()>>20)
}

// cgroupMemoryLimit is the memory limit of the process's cgroup in bytes, the lowest along its
// path (a parent's limit binds its children), for cgroup v2 (memory.max) or v1
// (memory.limit_in_bytes); 0 when there is none or it cannot be read.
func cgroupMemoryLimit() int64 {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	var limit int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2's line is "0::path".
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var root, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			root, file = "/sys/fs/cgroup", "memory.max"
		case strings.Contains(","+parts[1]+",", ",memory,"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		// Inside a cgroup namespace the path is "/" and the root is the process's own cgroup;
		// without one, the path names it under the root.
		for dir := path.Clean(parts[2]); ; dir = path.Dir(dir) {
			if n := readLimit(path.Join(root, dir, file)); n > 0 && (limit == 0 || n < limit) {
				limit = n
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return limit
}

// readLimit reads a cgroup memory limit file: 0 for "max", for v1's "unlimited" (a value near
// the largest int64), and when the file cannot be read.
func readLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0
	}
	return n
}

// physicalMemory is MemTotal of /proc/meminfo in bytes (0 when it cannot be read).
func physicalMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
