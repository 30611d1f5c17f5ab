package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
// MemAvailable, or less where a cgroup (a Slurm job's, a container's) caps
// it. 0 where neither can be read.
func AvailableBytes() int64 {
	avail := int64(procMB("/proc/meminfo", "MemAvailable:") * (1 << 20))
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil { // "max": no limit
			continue
		}
		used := cgroupUsed(f)
		if left := limit - used; left >= 0 && (avail == 0 || left < avail) {
			avail = left
		}
	}
	return avail
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
