package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The process's memory as the kernel counts it, for the results JSON and
// prepare's meta.json.

// PeakRSSMB is the process's peak resident memory (VmHWM), in MB.
func PeakRSSMB() float64 { return procMB("/proc/self/status", "VmHWM:") }

// RSSMB is the process's resident memory now (VmRSS), in MB.
func RSSMB() float64 { return procMB("/proc/self/status", "VmRSS:") }

// PssMB is the process's proportional set size now, in MB (0 where the
// kernel has no smaps_rollup, before Linux 4.14).
func PssMB() float64 { return procMB("/proc/self/smaps_rollup", "Pss:") }

// procMB reads a "field: N kB" line of a /proc file, in MB.
func procMB(path, field string) float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// AvailableBytes is the memory this process can still take: the kernel's
// MemAvailable, or less where a cgroup (a Slurm job's, a container's) or
// the process's own limits (ulimit -v, -d) cap it. 0 where none can be
// read.
func AvailableBytes() int64 {
	avail, _ := Available()
	return avail
}

// Available is AvailableBytes with the bound that set it, for a message:
// "MemAvailable", "the cgroup's memory.max", "ulimit -v" or "ulimit -d".
func Available() (int64, string) {
	avail, from := int64(procMB("/proc/meminfo", "MemAvailable:")*(1<<20)), "MemAvailable"
	lower := func(left int64, what string) {
		if left >= 0 && (avail == 0 || left < avail) {
			avail, from = left, what
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil { // "max": no limit
			continue
		}
		lower(limit-cgroupUsed(f), "the cgroup's memory.max")
	}
	// A process limit counts address space the runtime has reserved as
	// well as what it uses (Go sizes its reservations to the limit), so
	// what is left is the limit less the process's size now.
	for _, l := range []struct {
		res   int
		field string
		what  string
	}{{syscall.RLIMIT_AS, "VmSize:", "ulimit -v"}, {syscall.RLIMIT_DATA, "VmData:", "ulimit -d"}} {
		var rl syscall.Rlimit
		if syscall.Getrlimit(l.res, &rl) != nil || rl.Cur > 1<<62 { // unlimited (RLIM_INFINITY)
			continue
		}
		lower(int64(rl.Cur)-int64(procMB("/proc/self/status", l.field)*(1<<20)), l.what)
	}
	return avail, from
}

// cgroupUsed is what the cgroup of limit file f holds now.
func cgroupUsed(f string) int64 {
	name := "memory.current"
	if strings.HasSuffix(f, "limit_in_bytes") {
		name = "memory.usage_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(f), name))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}
