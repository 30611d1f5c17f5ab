package launch

import (
	"os"
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
